"""Heating plants, solar thermal circuits and their members (a plant's zones) through the REST
API, with the admin's validation, shared (issue 27, item 9); engineers write, viewers and
bookers only read."""

from __future__ import annotations

import pytest
from django.test import Client

import control.admin_plant  # noqa: F401  (registers the ModelAdmins)
from control.models import DELTA_OFF_ABOVE_ON, HeatingPlant, SolarCircuit, Zone
from sensors.models import Actuator

from . import factories as f

pytestmark = pytest.mark.django_db


def relay(name: str, kind: str, coil: int) -> Actuator:
    return Actuator.objects.create(name=name, kind=kind, host="10.0.0.2", coil=coil)


@pytest.fixture
def kit():
    boiler, pump = relay("Boiler", "boiler", 0), relay("Pump", "pump", 1)
    hall = Zone.objects.create(name="Hall", slug="hall")
    office = Zone.objects.create(name="Office", slug="office")
    return {"boiler": boiler, "pump": pump, "hall": hall, "office": office}


def plant_body(kit, **kw) -> dict:
    body = {"name": "Boiler house", "boiler": kit["boiler"].pk, "pump": kit["pump"].pk,
            "zones": [kit["hall"].pk], "index_zone": kit["hall"].pk}  # fmt: skip
    return {**body, **kw}


def test_an_engineer_creates_and_changes_a_plant_and_its_zones(engineer_api, kit):
    response = engineer_api.post("/api/v1/heating-plants", plant_body(kit), format="json")
    assert response.status_code == 201, response.content
    plant = HeatingPlant.objects.get(pk=response.json()["id"])
    assert list(plant.zones.values_list("name", flat=True)) == ["Hall"]
    assert plant.pump_overrun_s == 360  # the model's defaults, as in the admin
    # A zone added and made the index circuit in one change.
    response = engineer_api.patch(
        f"/api/v1/heating-plants/{plant.pk}",
        {"zones": [kit["hall"].pk, kit["office"].pk], "index_zone": kit["office"].pk},
        format="json",
    )
    assert response.status_code == 200, response.content
    plant.refresh_from_db()
    assert plant.index_zone == kit["office"] and plant.zones.count() == 2


@pytest.mark.parametrize(
    "change, field, message",
    [
        ({"pump": "boiler"}, "pump", "The pump must be a different actuator from the boiler."),
        ({"index_zone": "office"}, "index_zone", "The index zone must be one of the plant's zones."),
        ({"pump_overrun_s": 7201}, "pump_overrun_s", ""),
        ({"zones": [999]}, "zones", ""),
    ],
)  # fmt: skip
def test_the_admins_rules_refuse_a_plant_naming_the_field(
    engineer_api, kit, change, field, message
):
    body = plant_body(kit)
    for key, value in change.items():
        body[key] = kit[value].pk if isinstance(value, str) else value
    response = engineer_api.post("/api/v1/heating-plants", body, format="json")
    assert response.status_code == 400, response.content
    assert field in response.json()["fields"]
    assert message in response.json()["fields"][field][0]
    assert not HeatingPlant.objects.exists()


def test_a_boiler_already_driven_is_refused(engineer_api, kit):
    HeatingPlant.objects.create(name="Other", boiler=kit["boiler"])
    response = engineer_api.post(
        "/api/v1/heating-plants", plant_body(kit, name="Second"), format="json"
    )
    assert response.status_code == 400
    assert "already the boiler of heating plant 'Other'" in response.json()["fields"]["boiler"][0]
    # A change that moves the index zone out of the plant's zones is refused and keeps the row.
    plant = engineer_api.post(
        "/api/v1/heating-plants",
        plant_body(kit, name="Third", boiler=relay("Boiler 2", "boiler", 2).pk, pump=None),
        format="json",
    ).json()
    response = engineer_api.patch(
        f"/api/v1/heating-plants/{plant['id']}", {"zones": [kit["office"].pk]}, format="json"
    )
    assert response.status_code == 400 and "index_zone" in response.json()["fields"]
    assert list(HeatingPlant.objects.get(pk=plant["id"]).zones.all()) == [kit["hall"]]


def test_the_admin_accepts_an_index_zone_added_in_the_same_save(superuser, kit):
    plant = HeatingPlant.objects.create(name="Boiler house", boiler=kit["boiler"])
    plant.zones.set([kit["hall"]])
    c = Client()
    c.force_login(superuser)
    form = {"name": "Boiler house", "boiler": kit["boiler"].pk, "pump": "",
            "zones": [kit["hall"].pk, kit["office"].pk], "index_zone": kit["office"].pk,
            "pump_overrun_s": 360, "pump_kick_idle_days": 7, "pump_kick_s": 30,
            "enabled": "on", "flow_frost_c": 5, "frost_outside_c": 1.5,
            "sensor_stale_after_s": 900,
            "weather-TOTAL_FORMS": 0, "weather-INITIAL_FORMS": 0, "weather-MIN_NUM_FORMS": 0,
            "weather-MAX_NUM_FORMS": 1}  # fmt: skip
    response = c.post(f"/admin/control/heatingplant/{plant.pk}/change/", form)
    assert response.status_code == 302, response.content.decode()[:3000]
    plant.refresh_from_db()
    assert plant.index_zone == kit["office"]
    form["zones"], form["index_zone"] = [kit["hall"].pk], kit["office"].pk
    response = c.post(f"/admin/control/heatingplant/{plant.pk}/change/", form)
    assert "The index zone must be one of the plant&#x27;s zones." in response.content.decode()


def solar_body(**kw) -> dict:
    collector = f.temperature_sensor("collector")
    tank = f.temperature_sensor("tank")
    pump = relay("Solar pump", "pump", 5)
    body = {"name": "Roof", "collector_sensor": collector.pk, "tank_sensor": tank.pk,
            "pump": pump.pk}  # fmt: skip
    return {**body, **kw}


def test_an_engineer_creates_and_changes_a_solar_circuit(engineer_api):
    response = engineer_api.post("/api/v1/solar-circuits", solar_body(), format="json")
    assert response.status_code == 201, response.content
    circuit = response.json()
    assert circuit["delta_on"] == 6.0 and circuit["delta_off"] == 4.0
    url = f"/api/v1/solar-circuits/{circuit['id']}"
    response = engineer_api.patch(url, {"delta_off": 6.0}, format="json")
    assert response.status_code == 400
    assert response.json()["fields"]["delta_off"] == [DELTA_OFF_ABOVE_ON]
    assert engineer_api.patch(url, {"delta_on": 8.0}, format="json").status_code == 200
    assert SolarCircuit.objects.get().delta_on == 8.0


def test_a_solar_pump_driven_by_a_plant_is_refused(engineer_api, kit):
    HeatingPlant.objects.create(name="Boiler house", boiler=kit["boiler"], pump=kit["pump"])
    response = engineer_api.post(
        "/api/v1/solar-circuits", solar_body(pump=kit["pump"].pk), format="json"
    )
    assert response.status_code == 400
    assert "already the pump of heating plant" in response.json()["fields"]["pump"][0]


@pytest.mark.parametrize("who", ["viewer_api", "booker_api"])
def test_viewers_and_bookers_read_but_cannot_write(request, who, kit, engineer_api):
    client = request.getfixturevalue(who)
    plant = engineer_api.post("/api/v1/heating-plants", plant_body(kit), format="json").json()
    assert client.get("/api/v1/heating-plants").status_code == 200
    assert client.get("/api/v1/solar-circuits").status_code == 200
    body = plant_body(kit, name="Mine", boiler=relay("B2", "boiler", 3).pk, pump=None)
    assert client.post("/api/v1/heating-plants", body, format="json").status_code == 403
    url = f"/api/v1/heating-plants/{plant['id']}"
    assert client.patch(url, {"enabled": False}, format="json").status_code == 403
    assert client.delete(url).status_code == 403
    assert client.post("/api/v1/solar-circuits", solar_body(), format="json").status_code == 403
    assert HeatingPlant.objects.count() == 1 and HeatingPlant.objects.get().enabled
    assert not SolarCircuit.objects.exists()


def test_anonymous_callers_get_nothing(anon_api):
    assert anon_api.get("/api/v1/heating-plants").status_code in (401, 403)
    assert anon_api.post("/api/v1/solar-circuits", {}, format="json").status_code in (401, 403)


def test_a_plants_zones_and_a_zones_actuators_are_bounded(engineer_api, kit):
    """Every id list of the API is bounded (core.serializers.MAX_RELATED_IDS): each id is a
    database lookup, so an unbounded body of ids was a request of 100,000 queries."""
    from core.serializers import MAX_RELATED_IDS

    plant = engineer_api.post("/api/v1/heating-plants", plant_body(kit), format="json").json()
    Zone.objects.bulk_create(
        Zone(name=f"Room {i}", slug=f"room-{i}") for i in range(MAX_RELATED_IDS - 2)
    )
    ids = list(Zone.objects.values_list("pk", flat=True))
    assert len(ids) == MAX_RELATED_IDS
    url = f"/api/v1/heating-plants/{plant['id']}"
    response = engineer_api.patch(url, {"zones": ids}, format="json")
    assert response.status_code == 200, response.content
    assert HeatingPlant.objects.get().zones.count() == MAX_RELATED_IDS
    response = engineer_api.patch(url, {"zones": [*ids, ids[0]]}, format="json")
    assert response.status_code == 400
    assert response.json()["fields"]["zones"] == [f"At most {MAX_RELATED_IDS} items."]
    assert HeatingPlant.objects.get().zones.count() == MAX_RELATED_IDS

    hall = kit["hall"]
    response = engineer_api.patch(
        f"/api/v1/zones/{hall.pk}",
        {"actuators": list(range(1, MAX_RELATED_IDS + 2))},
        format="json",
    )
    assert response.status_code == 400
    assert response.json()["fields"]["actuators"] == [f"At most {MAX_RELATED_IDS} items."]
