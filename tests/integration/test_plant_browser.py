"""Issue #28: heating plants, weather compensation and solar circuits edited on the staff pages
in real Chromium, as a heating engineer would: from plant status to the plant, a flatter
heating curve with a reason, the curve table and the audit line; a solar circuit's
differential; bad input refused next to the field with nothing stored; a viewer reads only."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import expect

from control.models import HeatingPlant, ProgrammeChange, SolarCircuit, WeatherCompensation
from core.roles import ENGINEERS, VIEWERS
from sensors.models import Actuator
from tests.browser import logged_in_page
from tests.control import factories as f
from tests.integration.test_schedule_browser import PASSWORD, _db, _user
from tests.integration.test_staff_ux_browser import shoot
from tests.live_http import KioskServer

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]

VIEWPORT = {"width": 1400, "height": 1000}


@pytest.fixture
def server(redis_client) -> Iterator[KioskServer]:
    srv = KioskServer()
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture
def plant_room(redis_client) -> dict:
    def relay(name: str, kind: str, coil: int) -> Actuator:
        return Actuator.objects.create(name=name, kind=kind, host="10.0.0.2", coil=coil)

    plant = HeatingPlant.objects.create(
        name="Boiler house",
        boiler=relay("Boiler", "boiler", 0),
        pump=relay("Heating pump", "pump", 1),
        outside_sensor=f.temperature_sensor("Outside"),
        flow_sensor=f.temperature_sensor("Flow"),
    )
    plant.zones.set([f.zone("Hall")])
    WeatherCompensation.objects.create(plant=plant, register_host="10.0.0.9")
    solar = SolarCircuit.objects.create(
        name="Roof",
        collector_sensor=f.temperature_sensor("Collector"),
        tank_sensor=f.temperature_sensor("Tank"),
        pump=relay("Solar pump", "pump", 2),
    )
    _user("estates", ENGINEERS)
    _user("visitor", VIEWERS)
    return {"plant": plant, "solar": solar}


def test_engineer_changes_the_heating_curve_and_a_solar_differential(server, plant_room):
    with logged_in_page(server.url, "estates", PASSWORD, "/staff/control/", VIEWPORT) as (
        page,
        seen,
    ):
        page.get_by_role("link", name="Heating plants and solar circuits").click()
        page.get_by_role("link", name="Boiler house").click()
        curve = page.locator("#curve")
        expect(curve).to_contain_text("65.0 °C")  # slope 1.5: −10 °C outside → 65 °C flow

        # Out of range: refused next to the field, nothing stored.
        page.get_by_label("Curve slope (K of flow per K colder outside)").fill("5")
        page.get_by_label("Why (for the audit)").fill("Rooms too warm in mild weather")
        page.get_by_role("button", name="Save heating plant").click()
        expect(page.locator("#field-weather-slope .errorlist")).to_contain_text(
            "less than or equal to 4.0"
        )
        assert _db(lambda: WeatherCompensation.objects.get().slope) == 1.5

        # A flatter curve, with a reason.
        page.get_by_label("Curve slope (K of flow per K colder outside)").fill("1.2")
        page.get_by_label("Why (for the audit)").fill("Rooms too warm in mild weather")
        page.get_by_role("button", name="Save heating plant").click()
        expect(page.locator(".messages")).to_contain_text("Saved heating plant 'Boiler house'")
        expect(curve).to_contain_text("56.0 °C")  # 20 + 1.2 × 30 at −10 °C outside
        changes = page.locator("#changes")
        expect(changes).to_contain_text("Curve slope (K of flow per K colder outside) 1.5 → 1.2")
        expect(changes).to_contain_text("Rooms too warm in mild weather")
        expect(changes).to_contain_text("estates")
        shoot(page, "plant-edit")

        # An empty reason: refused, nothing stored.
        page.goto(f"{server.url}/staff/plants/")
        page.get_by_role("link", name="Roof").click()
        label = "Pump on when the collector is this much warmer than the tank (K)"
        page.get_by_label(label).fill("8")
        page.get_by_role("button", name="Save solar circuit").click()
        # The browser's own check stops an empty required field before it is sent.
        assert page.evaluate("document.querySelector('[name=reason]').validity.valueMissing")
        assert _db(lambda: SolarCircuit.objects.get().delta_on) == 6

        # A clashing actuator: the heating plant's pump cannot be the solar pump.
        page.get_by_label("Solar pump (its relay)").select_option(label="Heating pump (pump)")
        page.get_by_label("Why (for the audit)").fill("Tank cycling too often")
        page.get_by_role("button", name="Save solar circuit").click()
        expect(page.locator("#field-pump .errorlist")).to_contain_text(
            "Actuator 'Heating pump' is already the pump of heating plant 'Boiler house'."
        )
        assert _db(lambda: SolarCircuit.objects.get().pump.name) == "Solar pump"

        page.get_by_label("Solar pump (its relay)").select_option(label="Solar pump (pump)")
        page.get_by_label(label).fill("8")
        page.get_by_label("Why (for the audit)").fill("Tank cycling too often")
        page.get_by_role("button", name="Save solar circuit").click()
        expect(page.locator(".messages")).to_contain_text("Saved solar circuit 'Roof'")
        expect(page.locator("#changes")).to_contain_text(f"{label} 6 → 8")
        expect(page.locator("#changes")).to_contain_text("Tank cycling too often")
        assert (
            seen["errors"]
            == ["Failed to load resource: the server responded with a status of 400 (Bad Request)"]
            * 2
        )
    assert _db(lambda: SolarCircuit.objects.get().delta_on) == 8
    assert _db(lambda: [c.reason for c in ProgrammeChange.objects.order_by("at", "pk")]) == [
        "Rooms too warm in mild weather",
        "Tank cycling too often",
    ]


def test_a_viewer_reads_the_plant_with_no_form(server, plant_room):
    path = f"/staff/plants/{plant_room['plant'].pk}/"
    with logged_in_page(server.url, "visitor", PASSWORD, path, VIEWPORT) as (page, seen):
        expect(page.locator("#read-only")).to_be_visible()
        expect(page.locator("form#plant-form")).to_have_count(0)
        expect(page.get_by_role("button", name="Save heating plant")).to_have_count(0)
        expect(
            page.get_by_role("row", name="Curve slope (K of flow per K colder outside) 1.5")
        ).to_be_visible()
        expect(page.locator("#curve")).to_contain_text("65.0 °C")
        page.goto(f"{server.url}/staff/plants/solar/{plant_room['solar'].pk}/")
        expect(page.locator("#read-only")).to_be_visible()
        expect(page.get_by_role("button", name="Save solar circuit")).to_have_count(0)
        assert seen["errors"] == []


def test_only_the_weather_fields_that_mean_something_are_shown(server, plant_room):
    """Issue #28, outside tester: a plant without a curve showed the curve fields and dropped
    a changed slope; a modulating boiler was offered the mixing valve's limit and loop."""
    plant = plant_room["plant"]
    _db(lambda: WeatherCompensation.objects.all().delete())
    path = f"/staff/plants/{plant.pk}/"
    with logged_in_page(server.url, "estates", PASSWORD, path, VIEWPORT) as (page, seen):
        slope = page.get_by_label("Curve slope (K of flow per K colder outside)")
        box = page.get_by_label("Give this plant weather compensation (a heating curve)")
        expect(slope).to_be_hidden()  # nothing to change until the box is ticked
        box.check()
        expect(slope).to_be_visible()
        gain = page.get_by_label("Mixing valve gain (% per K)")
        limit = page.get_by_label("Flow over-temperature limit: the valve closes (°C)")
        expect(gain).to_be_visible()
        expect(limit).to_be_visible()
        expect(page.get_by_label("Valve open relay")).to_be_hidden()  # a register output
        page.get_by_label("What it drives").select_option(
            label="Modulating boiler (flow set point)"
        )
        expect(gain).to_be_hidden()
        expect(limit).to_be_hidden()
        expect(page.get_by_label("Output module address")).to_be_visible()
        page.get_by_label("What it drives").select_option(
            label="Mixing valve (PI loop on the flow temperature)"
        )
        page.locator("select[name=weather-output]").select_option(
            label="Three-point valve (open / close relays)"
        )
        expect(page.get_by_label("Valve open relay")).to_be_visible()
        expect(page.get_by_label("Output module address")).to_be_hidden()
        page.locator("select[name=weather-output]").select_option(
            label="Holding register (analogue output module)"
        )

        # A slope typed, then the box unticked: refused in words, not silently dropped.
        slope.fill("1.2")
        box.uncheck()
        page.get_by_label("Why (for the audit)").fill("Colder rooms")
        page.get_by_role("button", name="Save heating plant").click()
        expect(page.locator("#weather-refused")).to_contain_text(
            "tick 'Give this plant weather compensation'"
        )
        assert _db(lambda: WeatherCompensation.objects.count()) == 0

        box.check()
        expect(slope).to_have_value("1.2")  # what was typed is still there
        page.get_by_label("Output module address").fill("10.0.0.8")
        page.get_by_label("What it drives").select_option(
            label="Modulating boiler (flow set point)"
        )
        page.get_by_label("Why (for the audit)").fill("Colder rooms")
        page.get_by_role("button", name="Save heating plant").click()
        expect(page.locator(".messages")).to_contain_text("Saved heating plant 'Boiler house'")
        change = page.locator("#changes")
        expect(change).to_contain_text("Curve slope (K of flow per K colder outside) — → 1.2")
        expect(change).not_to_contain_text("Mixing valve gain")
        assert seen["errors"] == [
            "Failed to load resource: the server responded with a status of 400 (Bad Request)"
        ]
    assert _db(
        lambda: (WeatherCompensation.objects.get().slope, WeatherCompensation.objects.get().mode)
    ) == (
        1.2,
        "boiler_setpoint",
    )
