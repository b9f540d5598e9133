"""Heat mains, their heat sources and the thermal store through the REST API, with the admin's
validation (the models' clean() and constraints, core/serializers.py); engineers write, viewers
and bookers only read (issue 27)."""

from __future__ import annotations

import pytest

from control.models import HeatingPlant, HeatMain, HeatSource, ThermalStore, Zone
from sensors.models import Actuator

from . import factories as f

pytestmark = pytest.mark.django_db


def relay(name: str, kind: str, coil: int) -> Actuator:
    return Actuator.objects.create(name=name, kind=kind, host="10.0.0.2", coil=coil)


@pytest.fixture
def kit():
    hall = Zone.objects.create(name="Hall", slug="hall")
    office = Zone.objects.create(name="Office", slug="office")
    return {
        "hall": hall,
        "office": office,
        "gas": relay("Gas 1", "boiler", 0),
        "biomass": relay("Biomass", "boiler", 1),
        "charge": relay("Charge pump", "pump", 2),
        "discharge": relay("Discharge pump", "pump", 3),
        "top": f.temperature_sensor("store-top"),
        "bottom": f.temperature_sensor("store-bottom"),
        "flow": f.temperature_sensor("main-flow"),
    }


def _main(api, kit, **kw) -> dict:
    body = {"name": "Heat main", "zones": [kit["hall"].pk], "flow_sensor": kit["flow"].pk, **kw}
    response = api.post("/api/v1/heat-mains", body, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def _store_body(kit, main_id: int, **kw) -> dict:
    body = {"heat_main": main_id, "name": "Buffer", "top_sensor": kit["top"].pk,
            "bottom_sensor": kit["bottom"].pk, "charge_pump": kit["charge"].pk,
            "discharge_pump": kit["discharge"].pk}  # fmt: skip
    return {**body, **kw}


def test_an_engineer_builds_a_heat_main_with_its_sources_and_store(engineer_api, kit):
    main = _main(engineer_api, kit)
    assert main["flow_setpoint_c"] == 75.0 and main["stage_up_s"] == 600  # the admin's defaults
    for order, name in ((1, "gas"), (2, "biomass")):
        response = engineer_api.post(
            "/api/v1/heat-sources",
            {"heat_main": main["id"], "name": kit[name].name, "actuator": kit[name].pk,
             "order": order, "rotate": name == "gas", "ramp_s": 2700 if name == "biomass" else 120},
            format="json",
        )  # fmt: skip
        assert response.status_code == 201, response.content
    response = engineer_api.post(
        "/api/v1/thermal-stores", _store_body(kit, main["id"]), format="json"
    )
    assert response.status_code == 201, response.content
    # Members: a zone added (the PATCH replaces the list).
    url = f"/api/v1/heat-mains/{main['id']}"
    response = engineer_api.patch(url, {"zones": [kit["hall"].pk, kit["office"].pk]}, format="json")
    assert response.status_code == 200, response.content
    shown = engineer_api.get(url).json()
    assert shown["zones"] == [kit["hall"].pk, kit["office"].pk]
    assert shown["sources"] == list(HeatSource.objects.values_list("pk", flat=True))
    assert shown["store"] == ThermalStore.objects.get().pk
    assert [s.name for s in HeatMain.objects.get().sources.all()] == ["Gas 1", "Biomass"]


@pytest.mark.parametrize(
    "change, field, message",
    [
        ({"flow_setpoint_c": 96}, "flow_setpoint_c", "less than or equal to 95"),
        ({"stage_up_s": 59}, "stage_up_s", "greater than or equal to 60"),
        ({"stage_down_k": 30.5}, "stage_down_k", "less than or equal to 30"),
        ({"rotate_hours": 10001}, "rotate_hours", "less than or equal to 10000"),
        ({"sensor_stale_after_s": 86401}, "sensor_stale_after_s", ""),
        ({"zones": [999]}, "zones", ""),
        ({"name": "x" * 101}, "name", "no more than 100 characters"),
    ],
)
def test_a_heat_main_out_of_bounds_is_refused_naming_the_field(
    engineer_api, kit, change, field, message
):
    body = {"name": "Heat main", **change}
    response = engineer_api.post("/api/v1/heat-mains", body, format="json")
    assert response.status_code == 400, response.content
    assert message in response.json()["fields"][field][0]
    assert not HeatMain.objects.exists()


def test_a_heat_main_name_is_unique(engineer_api, kit):
    _main(engineer_api, kit)
    response = engineer_api.post("/api/v1/heat-mains", {"name": "Heat main"}, format="json")
    assert response.status_code == 400 and "name" in response.json()["fields"]


def test_a_source_on_a_relay_driven_elsewhere_is_refused(engineer_api, kit):
    main = _main(engineer_api, kit)
    HeatingPlant.objects.create(name="Boiler house", boiler=kit["gas"])
    body = {"heat_main": main["id"], "name": "Gas 1", "actuator": kit["gas"].pk}
    response = engineer_api.post("/api/v1/heat-sources", body, format="json")
    assert response.status_code == 400
    assert response.json()["fields"]["actuator"] == [
        "Actuator 'Gas 1' is already the boiler of heating plant 'Boiler house'."
    ]
    # One relay, two sources: the same refusal as the admin's (no second row, no 500).
    body["actuator"] = kit["biomass"].pk
    assert engineer_api.post("/api/v1/heat-sources", body, format="json").status_code == 201
    body["name"] = "Biomass again"
    response = engineer_api.post("/api/v1/heat-sources", body, format="json")
    assert response.status_code == 400
    assert "already heat source 'Gas 1'" in response.json()["fields"]["actuator"][0]
    assert HeatSource.objects.count() == 1


@pytest.mark.parametrize(
    "change, field, message",
    [
        ({"charge_stop_c": 50.0}, "charge_stop_c",
         "The bottom must reach above where the top starts a charge."),
        ({"discharge_pump": "charge"}, "discharge_pump",
         "The discharge pump must be another relay than the charge pump."),
        ({"charge_pump": "gas"}, "charge_pump", "is already heat source 'Gas 1'"),
        ({"charge_start_c": 19.5}, "charge_start_c", "greater than or equal to 20"),
        ({"top_sensor": None}, "top_sensor", ""),
    ],
)  # fmt: skip
def test_a_store_that_cannot_work_is_refused_naming_the_field(
    engineer_api, kit, change, field, message
):
    main = _main(engineer_api, kit)
    HeatSource.objects.create(heat_main_id=main["id"], name="Gas 1", actuator=kit["gas"])
    body = _store_body(kit, main["id"])
    for key, value in change.items():
        body[key] = kit[value].pk if isinstance(value, str) else value
    response = engineer_api.post("/api/v1/thermal-stores", body, format="json")
    assert response.status_code == 400, response.content
    assert message in response.json()["fields"][field][0]
    assert not ThermalStore.objects.exists()


def test_a_main_has_one_store_and_a_change_is_checked_as_a_whole(engineer_api, kit):
    main = _main(engineer_api, kit)
    store = engineer_api.post(
        "/api/v1/thermal-stores", _store_body(kit, main["id"]), format="json"
    ).json()
    second = _store_body(kit, main["id"], name="Second", charge_pump=None, discharge_pump=None)
    response = engineer_api.post("/api/v1/thermal-stores", second, format="json")
    assert response.status_code == 400 and "heat_main" in response.json()["fields"]
    # A PATCH of one field is judged with the saved others: stop below the saved start.
    url = f"/api/v1/thermal-stores/{store['id']}"
    response = engineer_api.patch(url, {"charge_stop_c": 55.0}, format="json")
    assert response.status_code == 400 and "charge_stop_c" in response.json()["fields"]
    assert engineer_api.patch(url, {"charge_stop_c": 72.0}, format="json").status_code == 200
    assert ThermalStore.objects.get().charge_stop_c == 72.0


@pytest.mark.parametrize("who", ["viewer_api", "booker_api"])
def test_viewers_and_bookers_read_but_cannot_write(request, who, kit, engineer_api):
    client = request.getfixturevalue(who)
    main = _main(engineer_api, kit)
    for resource in ("heat-mains", "heat-sources", "thermal-stores"):
        assert client.get(f"/api/v1/{resource}").status_code == 200
    assert client.post("/api/v1/heat-mains", {"name": "Mine"}, format="json").status_code == 403
    url = f"/api/v1/heat-mains/{main['id']}"
    assert client.patch(url, {"enabled": False}, format="json").status_code == 403
    assert client.delete(url).status_code == 403
    body = {"heat_main": main["id"], "name": "Gas 1", "actuator": kit["gas"].pk}
    assert client.post("/api/v1/heat-sources", body, format="json").status_code == 403
    store = _store_body(kit, main["id"])
    assert client.post("/api/v1/thermal-stores", store, format="json").status_code == 403
    assert HeatMain.objects.get().enabled
    assert not HeatSource.objects.exists() and not ThermalStore.objects.exists()


def test_anonymous_callers_get_nothing(anon_api):
    for resource in ("heat-mains", "heat-sources", "thermal-stores"):
        assert anon_api.get(f"/api/v1/{resource}").status_code in (401, 403)
        assert anon_api.post(f"/api/v1/{resource}", {}, format="json").status_code in (401, 403)


def test_a_main_takes_its_zones_up_to_the_bound_and_no_more(engineer_api, kit):
    """Each zone id is a lookup: a 1 MB body of ids would be 100,000 queries in one request."""
    from control.serializers import MAX_HEAT_MAIN_ZONES

    Zone.objects.bulk_create(
        Zone(name=f"Room {i}", slug=f"room-{i}") for i in range(MAX_HEAT_MAIN_ZONES - 2)
    )
    ids = list(Zone.objects.values_list("pk", flat=True))
    assert len(ids) == MAX_HEAT_MAIN_ZONES
    main = _main(engineer_api, kit)
    url = f"/api/v1/heat-mains/{main['id']}"
    response = engineer_api.patch(url, {"zones": ids}, format="json")
    assert response.status_code == 200, response.content
    assert HeatMain.objects.get().zones.count() == MAX_HEAT_MAIN_ZONES
    response = engineer_api.patch(url, {"zones": [*ids, ids[0]]}, format="json")
    assert response.status_code == 400
    assert response.json()["fields"]["zones"] == [f"At most {MAX_HEAT_MAIN_ZONES} items."]
    assert HeatMain.objects.get().zones.count() == MAX_HEAT_MAIN_ZONES
