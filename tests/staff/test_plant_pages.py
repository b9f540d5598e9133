"""Heating plants (with weather compensation) and solar circuits on the staff pages (issue #28):
engineers change them with a reason that is audited with who and what; every other role reads
a table with no form and is refused a POST; the admin's and the API's rules refuse here too,
next to the field, with nothing stored."""

from __future__ import annotations

import pytest
from django.test import Client

from control.models import HeatingPlant, ProgrammeChange, SolarCircuit, WeatherCompensation
from control.plant_words import WEATHER_WORDS
from sensors.models import Actuator, Site
from staff.plant_forms import PlantForm, SolarForm, WeatherForm

from ..control import factories as f

pytestmark = pytest.mark.django_db


def client_for(user) -> Client:
    c = Client()
    c.force_login(user)
    return c


def relay(name: str, kind: str, coil: int) -> Actuator:
    return Actuator.objects.create(name=name, kind=kind, host="10.0.0.2", coil=coil)


@pytest.fixture
def kit(redis_client) -> dict:
    boiler, pump = relay("Boiler", "boiler", 0), relay("Pump", "pump", 1)
    hall, office = f.zone("Hall"), f.zone("Office")
    outside, flow = f.temperature_sensor("Outside"), f.temperature_sensor("Flow")
    plant = HeatingPlant.objects.create(
        name="Boiler house", boiler=boiler, pump=pump, outside_sensor=outside, flow_sensor=flow
    )
    plant.zones.set([hall])
    WeatherCompensation.objects.create(plant=plant, register_host="10.0.0.9")
    solar = SolarCircuit.objects.create(
        name="Roof",
        collector_sensor=f.temperature_sensor("Collector"),
        tank_sensor=f.temperature_sensor("Tank"),
        pump=relay("Solar pump", "pump", 2),
    )
    return {"plant": plant, "solar": solar, "hall": hall, "office": office, "boiler": boiler}


def posted(*forms) -> dict:
    """What the browser posts for these forms as shown: every field's current value."""
    data: dict = {}
    for form in forms:
        for name in form.fields:
            value = form[name].value()
            key = form.add_prefix(name)
            if isinstance(value, bool):
                if value:
                    data[key] = "on"
            elif isinstance(value, list | tuple):
                data[key] = [str(v) for v in value]
            elif value is not None:
                data[key] = str(value)
    return data


def plant_post(plant: HeatingPlant, reason: str = "Colder rooms this winter", **changed) -> dict:
    data = posted(PlantForm(instance=plant), WeatherForm(instance=plant.weather))
    data.update({"reason": reason, **changed})
    return data


def solar_post(circuit: SolarCircuit, reason: str = "Tank cycling too often", **changed) -> dict:
    return {**posted(SolarForm(instance=circuit)), "reason": reason, **changed}


def test_an_engineer_changes_the_heating_curve_and_it_is_audited(engineer, kit):
    plant = kit["plant"]
    page = client_for(engineer).post(
        f"/staff/plants/{plant.pk}/", plant_post(plant, **{"weather-slope": "1.2"})
    )
    assert page.status_code == 302, page.content.decode()[:3000]
    assert WeatherCompensation.objects.get().slope == 1.2
    change = ProgrammeChange.objects.get()
    assert (change.by, change.subject, change.reason) == (
        "engineer",
        "heating plant 'Boiler house'",
        "Colder rooms this winter",
    )
    assert change.change == (
        "weather compensation: Curve slope (K of flow per K colder outside) 1.5 → 1.2"
    )
    shown = client_for(engineer).get(f"/staff/plants/{plant.pk}/").content.decode()
    assert "Colder rooms this winter" in shown and "1.5 → 1.2" in shown
    # The curve table: 20 + 1.2 × (20 − outside), between 20 and 75 °C (control/engine/weather.py).
    assert "<td>-10 °C</td>" in shown and "<td>56.0 °C</td>" in shown


def test_rooms_and_the_boilers_minimum_times_are_set_from_the_plant_page(engineer, kit):
    plant, office = kit["plant"], kit["office"]
    data = plant_post(plant, min_on_s="43200", index_zone=str(office.pk))
    data["zones"] = [str(kit["hall"].pk), str(office.pk)]
    page = client_for(engineer).post(f"/staff/plants/{plant.pk}/", data)
    assert page.status_code == 302, page.content.decode()[:3000]
    plant.refresh_from_db()
    assert {z.name for z in plant.zones.all()} == {"Hall", "Office"}
    assert plant.index_zone == office
    assert (
        Actuator.objects.get(name="Boiler").min_on_s == 43200
    )  # the bound itself (12 h) is allowed
    change = ProgrammeChange.objects.get().change
    assert "Rooms it heats Hall → Hall, Office" in change
    assert "Boiler minimum run time (s) 600 → 43200" in change


@pytest.mark.parametrize(
    "changed, field, message",
    [
        ({"weather-slope": "4.1"}, "weather-slope", "less than or equal to 4.0"),
        ({"weather-flow_max_c": "19"}, "weather-flow_max_c", "greater than or equal to 20"),
        ({"weather-flow_limit_c": "70"}, "weather-flow_limit_c", "must be above the highest flow"),
        ({"min_on_s": "43201"}, "min_on_s", "less than or equal to 43200"),
        ({"reason": ""}, "reason", "This field is required."),
        ({"pump": "boiler"}, "pump", "The pump must be a different actuator from the boiler."),
    ],
)  # fmt: skip
def test_bad_input_is_a_400_next_to_the_field_and_stores_nothing(
    engineer, kit, changed, field, message
):
    plant = kit["plant"]
    for key, value in changed.items():
        if value == "boiler":
            changed[key] = str(kit["boiler"].pk)
    page = client_for(engineer).post(f"/staff/plants/{plant.pk}/", plant_post(plant, **changed))
    assert page.status_code == 400
    html = page.content.decode()
    beside = html.split(f'id="field-{field}"')[1] if field != "reason" else html
    assert message in beside.split("</div>")[0] if field != "reason" else message in html
    assert not ProgrammeChange.objects.exists()
    assert WeatherCompensation.objects.get().slope == 1.5
    assert Actuator.objects.get(name="Boiler").min_on_s == 600


def test_an_actuator_of_another_plant_is_refused(engineer, kit):
    """Two drivers of one relay would fight: the solar pump cannot be this plant's pump."""
    plant = kit["plant"]
    solar_pump = Actuator.objects.get(name="Solar pump")
    page = client_for(engineer).post(
        f"/staff/plants/{plant.pk}/", plant_post(plant, pump=str(solar_pump.pk))
    )
    assert page.status_code == 400
    assert "already the pump of solar circuit &#x27;Roof&#x27;" in page.content.decode()
    assert HeatingPlant.objects.get().pump.name == "Pump"
    assert not ProgrammeChange.objects.exists()


def test_weather_compensation_without_an_outside_sensor_is_refused_in_words(engineer, kit):
    """WeatherCompensation.clean names `plant`, which the page does not show: said above the
    form, not a 500."""
    plant = kit["plant"]
    page = client_for(engineer).post(
        f"/staff/plants/{plant.pk}/", plant_post(plant, outside_sensor="")
    )
    assert page.status_code == 400
    assert "Weather compensation needs the plant&#x27;s outside sensor." in page.content.decode()
    assert HeatingPlant.objects.get().outside_sensor is not None


def new_plant_post(kit: dict, register_address: int) -> dict:
    """A new plant, 'Workshop', with its own boiler, the kit's sensors and a heating curve
    whose output is this holding register of the kit's output module."""
    boiler = relay("Boiler 2", "boiler", 5)
    data = posted(PlantForm(instance=HeatingPlant()), WeatherForm())
    data.update(
        name="Workshop",
        boiler=str(boiler.pk),
        outside_sensor=str(kit["plant"].outside_sensor_id),
        flow_sensor=str(kit["plant"].flow_sensor_id),
        add_weather="1",
        reason="Workshop boiler fitted",
        **{"weather-register_host": "10.0.0.9", "weather-register_address": str(register_address)},
    )
    return data


def test_a_new_plant_with_a_new_heating_curve(engineer, kit):
    page = client_for(engineer).post("/staff/plants/new/", new_plant_post(kit, 7))
    assert page.status_code == 302, page.content.decode()[:3000]
    plant = HeatingPlant.objects.get(name="Workshop")
    assert plant.weather.register_address == 7
    change = ProgrammeChange.objects.get()
    assert change.subject == "heating plant 'Workshop'" and change.change.startswith("created: ")


def test_a_new_plant_keeps_its_boilers_own_minimum_times(engineer, kit):
    """A new plant's form cannot know the boiler before it is chosen: blank times keep the
    boiler's own (a biomass boiler's 2 h run was overwritten with 600 s)."""
    data = new_plant_post(kit, 7)
    boiler = Actuator.objects.get(name="Boiler 2")
    Actuator.objects.filter(pk=boiler.pk).update(min_on_s=7200, min_off_s=1800)
    assert "min_on_s" not in data and "min_off_s" not in data
    page = client_for(engineer).post("/staff/plants/new/", data)
    assert page.status_code == 302, page.content.decode()[:3000]
    boiler.refresh_from_db()
    assert (boiler.min_on_s, boiler.min_off_s) == (7200, 1800)


def test_a_second_output_on_the_same_register_is_refused(engineer, kit):
    page = client_for(engineer).post("/staff/plants/new/", new_plant_post(kit, 0))
    assert page.status_code == 400
    assert "two writers would fight" in page.content.decode()
    assert HeatingPlant.objects.count() == 1


def test_an_engineer_changes_a_solar_differential(engineer, kit):
    solar = kit["solar"]
    page = client_for(engineer).post(
        f"/staff/plants/solar/{solar.pk}/", solar_post(solar, delta_on="20")
    )
    assert page.status_code == 302, page.content.decode()[:3000]
    assert SolarCircuit.objects.get().delta_on == 20  # the top of its range
    change = ProgrammeChange.objects.get()
    assert change.subject == "solar circuit 'Roof'"
    assert change.change == (
        "Pump on when the collector is this much warmer than the tank (K) 6 → 20"
    )


@pytest.mark.parametrize(
    "changed, message",
    [
        ({"delta_on": "20.5"}, "less than or equal to 20"),
        ({"delta_off": "6"}, "go off at a smaller difference than the one it comes on at"),
        ({"antifreeze_off": "-20"}, "frost protection must end above the temperature it starts"),
        ({"tank_max": "96"}, "less than or equal to 95"),
        ({"reason": "  "}, "This field is required."),
    ],
)
def test_bad_solar_input_is_refused(engineer, kit, changed, message):
    solar = kit["solar"]
    page = client_for(engineer).post(
        f"/staff/plants/solar/{solar.pk}/", solar_post(solar, **changed)
    )
    assert page.status_code == 400
    assert message in page.content.decode()
    assert SolarCircuit.objects.get().delta_on == 6 and not ProgrammeChange.objects.exists()


@pytest.mark.parametrize("who", ["viewer", "booker"])
def test_other_roles_read_a_table_and_may_not_post(request, kit, who):
    user = request.getfixturevalue(who)
    plant, solar = kit["plant"], kit["solar"]
    for url in (f"/staff/plants/{plant.pk}/", f"/staff/plants/solar/{solar.pk}/"):
        html = client_for(user).get(url).content.decode()
        assert '<form method="post" id=' not in html and "<button>Save" not in html
        assert 'id="read-only"' in html
    html = client_for(user).get(f"/staff/plants/{plant.pk}/").content.decode()
    assert "Curve slope (K of flow per K colder outside)</th><td>1.5" in html
    assert client_for(user).get("/staff/plants/").status_code == 200
    assert "+ New heating plant" not in client_for(user).get("/staff/plants/").content.decode()
    refused = client_for(user).post(
        f"/staff/plants/{plant.pk}/", plant_post(plant, **{"weather-slope": "1.2"})
    )
    assert refused.status_code == 403
    refused = client_for(user).post(f"/staff/plants/solar/{solar.pk}/", solar_post(solar))
    assert refused.status_code == 403
    assert client_for(user).get("/staff/plants/new/").status_code == 403
    assert WeatherCompensation.objects.get().slope == 1.5 and not ProgrammeChange.objects.exists()


def test_plant_status_links_to_the_plant_pages(viewer, kit):
    assert 'href="/staff/plants/"' in client_for(viewer).get("/staff/control/").content.decode()


def _without_weather(kit: dict) -> HeatingPlant:
    plant = kit["plant"]
    plant.weather.delete()
    return HeatingPlant.objects.get(pk=plant.pk)


def _bare_plant_post(plant: HeatingPlant, **changed) -> dict:
    """What the page posts for a plant without weather compensation: its form and a new
    curve's fields (hidden until the box is ticked, but still in the form)."""
    data = posted(PlantForm(instance=plant), WeatherForm(instance=WeatherCompensation()))
    data.update({"reason": "Colder rooms this winter", **changed})
    return data


def test_a_curve_typed_without_ticking_the_box_is_refused_not_thrown_away(engineer, kit):
    """The tester changed the slope of a plant without weather compensation and was told
    "Recorded: no change": the curve was silently dropped."""
    plant = _without_weather(kit)
    page = client_for(engineer).post(
        f"/staff/plants/{plant.pk}/", _bare_plant_post(plant, **{"weather-slope": "1.2"})
    )
    assert page.status_code == 400
    html = page.content.decode()
    assert 'id="weather-refused"' in html and "tick &#x27;Give this plant weather" in html
    assert 'name="weather-slope" value="1.2"' in html  # what was typed is kept to tick and save
    assert not WeatherCompensation.objects.exists() and not ProgrammeChange.objects.exists()
    # Untouched curve fields without the box: the plant is saved, no curve made.
    page = client_for(engineer).post(
        f"/staff/plants/{plant.pk}/", _bare_plant_post(plant, pump_overrun_s="300")
    )
    assert page.status_code == 302, page.content.decode()[:3000]
    assert HeatingPlant.objects.get().pump_overrun_s == 300
    assert not WeatherCompensation.objects.exists()
    # Ticked: the curve is made with the typed slope.
    page = client_for(engineer).post(
        f"/staff/plants/{plant.pk}/",
        _bare_plant_post(
            plant,
            add_weather="1",
            **{"weather-slope": "1.2", "weather-register_host": "10.0.0.8"},
        ),
    )
    assert page.status_code == 302, page.content.decode()[:3000]
    assert WeatherCompensation.objects.get().slope == 1.2


def test_the_page_marks_each_weather_field_with_the_mode_and_output_it_belongs_to(engineer, kit):
    html = client_for(engineer).get(f"/staff/plants/{kit['plant'].pk}/").content.decode()
    assert 'class="plant-field mixing-valve-only" id="field-weather-kp"' in html
    assert 'class="plant-field mixing-valve-only" id="field-weather-flow_limit_c"' in html
    assert 'class="plant-field register-only" id="field-weather-register_host"' in html
    assert 'class="plant-field three-point-only" id="field-weather-open_actuator"' in html
    assert 'class="plant-field " id="field-weather-slope"' in html


def test_switching_to_a_modulating_boiler_audits_only_real_changes(engineer, viewer, kit):
    plant = kit["plant"]
    page = client_for(engineer).post(
        f"/staff/plants/{plant.pk}/", plant_post(plant, **{"weather-mode": "boiler_setpoint"})
    )
    assert page.status_code == 302, page.content.decode()[:3000]
    assert ProgrammeChange.objects.get().change == (
        "weather compensation: What it drives Mixing valve (PI loop on the flow temperature) "
        "→ Modulating boiler (flow set point)"
    )
    # The read-only table shows the modulating boiler's fields only.
    html = client_for(viewer).get(f"/staff/plants/{plant.pk}/").content.decode()
    assert '<th scope="row">Curve slope (K of flow per K colder outside)</th>' in html
    assert '<th scope="row">Output module address</th>' in html
    for name in ("kp", "ti_s", "flow_limit_c", "open_actuator", "run_time_s"):
        assert f'<th scope="row">{WEATHER_WORDS[name]}</th>' not in html


def test_a_new_plant_with_a_modulating_boiler_audits_none_of_the_valves_fields(engineer, kit):
    data = new_plant_post(kit, 7)
    data["weather-mode"] = "boiler_setpoint"
    page = client_for(engineer).post("/staff/plants/new/", data)
    assert page.status_code == 302, page.content.decode()[:3000]
    change = ProgrammeChange.objects.get().change
    assert "Curve slope (K of flow per K colder outside) — → 1.5" in change
    for label in ("Mixing valve gain", "integral time", "over-temperature", "Valve open relay"):
        assert label not in change
    assert "— → —" not in change


def test_a_new_plant_and_circuit_get_the_only_site(engineer, kit):
    """The tester's new plant had `"site": null` in the API; the demo plant has its site."""
    site = Site.objects.create(name="College", slug="college")
    data = new_plant_post(kit, 7)
    assert data["site"] == str(site.pk)  # the form carries it, hidden: nothing to choose
    del data["site"]  # a client that leaves it out gets it too
    page = client_for(engineer).post("/staff/plants/new/", data)
    assert page.status_code == 302, page.content.decode()[:3000]
    assert HeatingPlant.objects.get(name="Workshop").site == site
    assert "Site — → College" in ProgrammeChange.objects.get().change
    solar = kit["solar"]
    data = solar_post(
        SolarCircuit(),
        name="Garage roof",
        reason="New collector",
        pump=str(relay("P2", "pump", 9).pk),
    )
    data.update(
        collector_sensor=str(solar.collector_sensor_id), tank_sensor=str(solar.tank_sensor_id)
    )
    page = client_for(engineer).post("/staff/plants/solar/new/", data)
    assert page.status_code == 302, page.content.decode()[:3000]
    assert SolarCircuit.objects.get(name="Garage roof").site == site
    api = client_for(engineer).get("/api/v1/heating-plants/").json()
    assert {p["name"]: p["site"] for p in api["results"]}["Workshop"] == site.pk


def test_with_several_sites_a_new_plant_asks_which(engineer, kit):
    Site.objects.create(name="College", slug="college")
    annexe = Site.objects.create(name="Annexe", slug="annexe")
    html = client_for(engineer).get("/staff/plants/new/").content.decode()
    assert "(choose the site)" in html and 'id="field-site"' in html
    data = new_plant_post(kit, 7)
    page = client_for(engineer).post("/staff/plants/new/", data)
    assert page.status_code == 400
    beside = page.content.decode().split('id="field-site"')[1].split('id="field-')[0]
    assert "This field is required." in beside
    assert HeatingPlant.objects.count() == 1
    data["site"] = str(annexe.pk)
    page = client_for(engineer).post("/staff/plants/new/", data)
    assert page.status_code == 302, page.content.decode()[:3000]
    assert HeatingPlant.objects.get(name="Workshop").site == annexe


def test_a_form_of_over_a_thousand_fields_is_refused_in_plain_words(engineer, kit):
    from django.conf import settings

    plant = kit["plant"]
    bound = settings.DATA_UPLOAD_MAX_NUMBER_FIELDS
    data = plant_post(plant, **{"weather-slope": "1.2"})
    data.update({f"x{i}": "1" for i in range(bound - len(data) - 1)})  # csrf token: one more
    c = client_for(engineer)
    page = c.post(f"/staff/plants/{plant.pk}/", data)
    assert page.status_code == 302  # at the bound: read and saved
    data.update({f"y{i}": "1" for i in range(2)})
    page = c.post(f"/staff/plants/{plant.pk}/", {**data, "weather-slope": "1.1"})
    assert page.status_code == 400
    html = page.content.decode()
    assert f"Too many fields in one form: at most {bound} are read." in html
    assert "Nothing was saved" in html and "<h1>Not saved</h1>" in html
    assert WeatherCompensation.objects.get().slope == 1.2
    api = c.post("/api/v1/heating-plants/", data)
    assert api.status_code == 400
    assert api.json()["error"] == f"Too many fields in one form: at most {bound} are read."
