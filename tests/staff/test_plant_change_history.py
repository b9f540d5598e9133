"""Changes to the plant made through the API or the admin are in the change history too
(issue #28, outside tester): who, when, "label old → new" in the staff pages' words, and why
(the API's optional `reason`, else "changed through the API"; "changed in the admin"), shown
under Recent changes on the staff pages."""

from __future__ import annotations

import pytest
from django.test import Client
from knox.models import AuthToken
from rest_framework.test import APIClient

from control.change_audit import ADMIN_REASON, API_REASON, REASON_MAX
from control.models import (
    HeatingPlant,
    HeatMain,
    HeatSource,
    ProgrammeChange,
    SolarCircuit,
    ThermalStore,
    WeatherCompensation,
)
from sensors.models import Actuator

from ..control import factories as f
from .test_out_of_range_ids import _admin_form
from .test_plant_pages import kit  # noqa: F401  (a fixture)

pytestmark = pytest.mark.django_db


def token_client(user) -> APIClient:
    _, key = AuthToken.objects.create(user=user)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def client_for(user) -> Client:
    c = Client()
    c.force_login(user)
    return c


def test_an_api_change_to_the_curve_is_recorded_with_the_tokens_user_and_reason(engineer, kit):  # noqa: F811
    weather = kit["plant"].weather
    api = token_client(engineer)
    page = api.patch(
        f"/api/v1/weather-compensations/{weather.pk}/",
        {"slope": 1.2, "reason": "Colder rooms"},
        format="json",
    )
    assert page.status_code == 200, page.content
    assert "reason" not in page.json()  # write-only
    change = ProgrammeChange.objects.get()
    assert (change.by, change.subject, change.reason) == (
        "engineer",
        "heating plant 'Boiler house'",
        "Colder rooms",
    )
    assert change.change == (
        "weather compensation: Curve slope (K of flow per K colder outside) 1.5 → 1.2"
    )
    # The staff page lists it.
    shown = client_for(engineer).get(f"/staff/plants/{kit['plant'].pk}/").content.decode()
    assert "Curve slope (K of flow per K colder outside) 1.5 → 1.2" in shown
    assert "Colder rooms" in shown


def test_an_api_change_without_a_reason_says_it_came_through_the_api(engineer_api, kit):  # noqa: F811
    plant, office = kit["plant"], kit["office"]
    page = engineer_api.patch(
        f"/api/v1/heating-plants/{plant.pk}/",
        {"zones": [kit["hall"].pk, office.pk], "pump_overrun_s": 300},
        format="json",
    )
    assert page.status_code == 200, page.content
    change = ProgrammeChange.objects.get()
    assert change.reason == API_REASON
    assert change.change == (
        "Rooms it heats Hall → Hall, Office; Pump runs on after the boiler stops (s) 360 → 300"
    )


def test_an_api_reason_longer_than_the_audit_holds_is_a_400_and_nothing_changes(
    engineer_api,
    kit,  # noqa: F811
):
    solar = kit["solar"]
    too_long = "x" * (REASON_MAX + 1)
    page = engineer_api.patch(
        f"/api/v1/solar-circuits/{solar.pk}/", {"delta_on": 7, "reason": too_long}, format="json"
    )
    assert page.status_code == 400 and "reason" in page.json()["fields"]
    page = engineer_api.patch(
        f"/api/v1/solar-circuits/{solar.pk}/",
        {"delta_on": 7, "reason": "x" * REASON_MAX},
        format="json",
    )
    assert page.status_code == 200
    assert SolarCircuit.objects.get().delta_on == 7
    assert ProgrammeChange.objects.get().reason == "x" * REASON_MAX


def test_api_creates_and_deletes_are_recorded(engineer_api, kit):  # noqa: F811
    main = engineer_api.post("/api/v1/heat-mains/", {"name": "Heat main"}, format="json")
    assert main.status_code == 201, main.content
    gas = Actuator.objects.create(name="Gas 1", kind="boiler", host="10.0.0.2", coil=7)
    source = engineer_api.post(
        "/api/v1/heat-sources/",
        {"heat_main": main.json()["id"], "name": "Gas 1", "actuator": gas.pk, "order": 1},
        format="json",
    )
    assert source.status_code == 201, source.content
    store = engineer_api.post(
        "/api/v1/thermal-stores/",
        {
            "heat_main": main.json()["id"],
            "name": "Buffer",
            "top_sensor": f.temperature_sensor("Top").pk,
            "bottom_sensor": f.temperature_sensor("Bottom").pk,
        },
        format="json",
    )
    assert store.status_code == 201, store.content
    gone = engineer_api.delete(
        f"/api/v1/heat-sources/{source.json()['id']}/", {"reason": "Gas 1 removed"}, format="json"
    )
    assert gone.status_code == 204
    gone = engineer_api.delete(f"/api/v1/solar-circuits/{kit['solar'].pk}/")
    assert gone.status_code == 204
    said = [(c.subject, c.change.split(";")[0], c.reason) for c in ProgrammeChange.objects.all()]
    assert said[::-1] == [
        ("heat main 'Heat main'", "created: Name — → Heat main", API_REASON),
        ("heat main 'Heat main'", "heat source 'Gas 1': added: heat source 'Gas 1': Name — → Gas 1",
         API_REASON),
        ("heat main 'Heat main'",
         "thermal store 'Buffer': added: thermal store 'Buffer': Name — → Buffer", API_REASON),
        ("heat main 'Heat main'", "heat source 'Gas 1': deleted", "Gas 1 removed"),
        ("solar circuit 'Roof'", "deleted", API_REASON),
    ]  # fmt: skip
    assert not HeatSource.objects.exists() and ThermalStore.objects.count() == 1


def test_a_refused_api_change_records_nothing(engineer_api, kit):  # noqa: F811
    page = engineer_api.patch(
        f"/api/v1/weather-compensations/{kit['plant'].weather.pk}/", {"slope": 9}, format="json"
    )
    assert page.status_code == 400
    assert not ProgrammeChange.objects.exists()


def test_a_viewer_cannot_write_and_nothing_is_recorded(viewer_api, kit):  # noqa: F811
    page = viewer_api.patch(
        f"/api/v1/heating-plants/{kit['plant'].pk}/", {"name": "X", "reason": "no"}, format="json"
    )
    assert page.status_code == 403
    assert not ProgrammeChange.objects.exists()


def test_an_admin_save_of_a_plant_and_its_curve_is_one_entry(engineer, kit):  # noqa: F811
    plant = kit["plant"]
    url = f"/admin/control/heatingplant/{plant.pk}/change/"
    c = client_for(engineer)
    data = _admin_form(url, c)
    data.update({"pump_overrun_s": "200", "weather-0-slope": "1.1"})
    page = c.post(url, data)
    assert page.status_code == 302, page.content.decode()[:3000]
    assert WeatherCompensation.objects.get().slope == 1.1
    change = ProgrammeChange.objects.get()
    assert (change.by, change.subject, change.reason) == (
        "engineer",
        "heating plant 'Boiler house'",
        ADMIN_REASON,
    )
    assert change.change == (
        "Pump runs on after the boiler stops (s) 360 → 200; "
        "weather compensation: Curve slope (K of flow per K colder outside) 1.5 → 1.1"
    )
    listed = client_for(engineer).get("/staff/plants/").content.decode()
    assert "1.5 → 1.1" in listed and ADMIN_REASON in listed


def test_an_admin_delete_is_recorded(superuser, kit):  # noqa: F811
    solar = kit["solar"]
    c = client_for(superuser)
    page = c.post(f"/admin/control/solarcircuit/{solar.pk}/delete/", {"post": "yes"})
    assert page.status_code == 302
    assert not SolarCircuit.objects.exists()
    change = ProgrammeChange.objects.get()
    assert (change.by, change.subject, change.change, change.reason) == (
        "root",
        "solar circuit 'Roof'",
        "deleted",
        ADMIN_REASON,
    )
    assert HeatingPlant.objects.count() == 1 and HeatMain.objects.count() == 0


def test_an_admin_heat_main_with_its_source_is_one_entry(engineer):
    from tests.control.test_heat_main_admin import URL, _form, _source

    gas = Actuator.objects.create(name="Gas 1", kind="boiler", host="10.0.0.2", coil=0)
    data = _form(**_source(0, gas))
    data["sources-TOTAL_FORMS"] = 1
    page = client_for(engineer).post(URL, data)
    assert page.status_code == 302, page.content.decode()[:3000]
    change = ProgrammeChange.objects.get()
    assert (change.subject, change.reason) == ("heat main 'Heat main'", ADMIN_REASON)
    assert change.change.startswith("created: Name — → Heat main; ")
    assert "heat source 'Gas 1': Actuator — → Gas 1 (boiler)" in change.change


def test_enabling_a_zones_bacnet_writes_is_recorded_through_the_api_and_the_admin(engineer):
    # #31: it opens the zone to an unauthenticated network, and left no trace of who did it.
    zone = f.zone("Hall")
    api = token_client(engineer)
    url = f"/api/v1/zones/{zone.pk}"
    assert api.patch(url, {"bacnet_setpoint_writable": True}, format="json").status_code == 200
    assert api.patch(url, {"comfort_setpoint": 20.5}, format="json").status_code == 200  # not it
    change = ProgrammeChange.objects.get()
    assert (change.by, change.subject, change.change, change.reason) == (
        "engineer", "zone 'Hall'", "BACnet setpoint writes accepted no → yes", API_REASON,
    )  # fmt: skip

    admin_url = f"/admin/control/zone/{zone.pk}/change/"
    c = client_for(engineer)
    data = _admin_form(admin_url, c)
    data.pop("bacnet_setpoint_writable", None)  # unticked
    data["bacnet_occupancy_writable"] = "on"
    page = c.post(admin_url, data)
    assert page.status_code == 302, page.content.decode()[:3000]
    latest = ProgrammeChange.objects.order_by("-pk").first()
    assert (latest.subject, latest.change, latest.reason) == (
        "zone 'Hall'",
        "BACnet setpoint writes accepted yes → no; BACnet occupancy writes accepted no → yes",
        ADMIN_REASON,
    )


def test_a_zone_created_with_bacnet_writes_on_is_recorded(engineer_api):
    made = engineer_api.post("/api/v1/zones", {"name": "Gym", "slug": "gym", "bacnet_occupancy_writable": True},
                             format="json")  # fmt: skip
    assert made.status_code == 201, made.json()
    assert ProgrammeChange.objects.get().change == "BACnet occupancy writes accepted no → yes"
