"""Analogue output overrides through the API and the staff page: bounds on every input (a 4xx
JSON naming the field, tried at the bound), the permission from both sides, cancel not delete,
and the outputs on the status page after a real tick against a pymodbus board."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from control.drivers.simulated_board import RelayBoard
from control.models import AnalogueCommand, HeatingPlant, OutputOverride, WeatherCompensation
from control.runner import run_tick
from feeds.store import service as feed_service
from sensors.models import Actuator

from . import factories as f

pytestmark = pytest.mark.django_db
URL = "/api/v1/output-overrides"


def _boiler(name: str, board=None) -> Actuator:
    if board is not None:
        return f.relay(f"{name} boiler", board, coil=0, kind="boiler")
    # Not switched in these tests: a coil of its own on a board nobody dials (one per coil).
    return Actuator.objects.create(
        name=f"{name} boiler", kind="boiler", host="192.0.2.1", coil=40 + Actuator.objects.count()
    )


def _plant(name: str, mode: str = "mixing_valve", board=None, **weather) -> HeatingPlant:
    boiler = _boiler(name, board)
    outside, flow = f.temperature_sensor(f"{name} outside"), f.temperature_sensor(f"{name} flow")
    plant = HeatingPlant.objects.create(
        name=name, boiler=boiler, outside_sensor=outside, flow_sensor=flow, has_bypass=True,
        frost_outside_c=-5.0,
    )  # fmt: skip
    where = {"register_host": "127.0.0.1"}
    if board is not None:
        where.update(register_host=board.host, register_port=board.port)
    wc = WeatherCompensation(plant=plant, mode=mode, **where, **weather)
    wc.full_clean()
    wc.save()
    return plant


@pytest.fixture
def mixing(redis_client) -> HeatingPlant:
    return _plant("Boiler house")


def _body(plant: HeatingPlant, **kw) -> dict:
    return {"plant": plant.pk, "value": 40.0, "reason": "Commissioning",
            "expires": (timezone.now() + timedelta(hours=1)).isoformat(), **kw}  # fmt: skip


def _refused_on(response, field: str) -> None:
    assert response.status_code == 400, response.content
    data = response.json()
    assert field in data["fields"], data


@pytest.mark.parametrize("value", [0.0, 100.0])
def test_a_valve_position_at_either_end_is_accepted(engineer_api, mixing, value):
    r = engineer_api.post(URL, _body(mixing, value=value), format="json")
    assert r.status_code == 201, r.content
    assert (r.json()["value"], r.json()["unit"]) == (value, "%")


@pytest.mark.parametrize("value", [-0.1, 100.1, "open", None])
def test_a_valve_position_out_of_range_names_the_value(engineer_api, mixing, value):
    _refused_on(engineer_api.post(URL, _body(mixing, value=value), format="json"), "value")
    assert not OutputOverride.objects.exists()


def test_a_boiler_set_point_is_bounded_by_its_curves_flow_range(engineer_api, redis_client):
    boiler = _plant("Boiler", mode="boiler_setpoint", flow_min_c=30.0, flow_max_c=70.0)
    for ok in (30.0, 70.0):
        r = engineer_api.post(URL, _body(boiler, value=ok), format="json")
        assert r.status_code == 201 and r.json()["unit"] == "°C"
    for bad in (29.9, 70.1):
        r = engineer_api.post(URL, _body(boiler, value=bad), format="json")
        _refused_on(r, "value")
        assert "30 to 70 °C" in r.json()["fields"]["value"][0]


def test_the_duration_is_one_minute_to_24_hours(engineer_api, mixing):
    now = timezone.now()
    for ok in (timedelta(minutes=2), timedelta(hours=24)):
        r = engineer_api.post(URL, _body(mixing, expires=(now + ok).isoformat()), format="json")
        assert r.status_code == 201, (ok, r.content)
    for bad in (timedelta(hours=24, seconds=2), timedelta(seconds=50), timedelta(hours=-1)):
        r = engineer_api.post(URL, _body(mixing, expires=(now + bad).isoformat()), format="json")
        _refused_on(r, "expires")
    _refused_on(engineer_api.post(URL, _body(mixing, expires="tomorrow"), format="json"),
                "expires")  # fmt: skip


def test_a_reason_is_required_and_bounded(engineer_api, mixing):
    assert engineer_api.post(URL, _body(mixing, reason="r" * 200), format="json").status_code == 201
    for bad in ("", "   ", "r" * 201):
        _refused_on(engineer_api.post(URL, _body(mixing, reason=bad), format="json"), "reason")


def test_only_a_weather_compensated_plant_has_an_output(engineer_api, mixing):
    bare = HeatingPlant.objects.create(name="No curve", boiler=_boiler("Bare"))
    _refused_on(engineer_api.post(URL, _body(bare), format="json"), "plant")
    _refused_on(engineer_api.post(URL, {**_body(mixing), "plant": 999999}, format="json"), "plant")
    mixing.weather.enabled = False
    mixing.weather.save()
    _refused_on(engineer_api.post(URL, _body(mixing), format="json"), "plant")


def test_who_and_when_are_the_servers(engineer_api, engineer, mixing):
    early = (timezone.now() - timedelta(days=3)).isoformat()
    r = engineer_api.post(URL, _body(mixing, created_by=999, starts=early, cancelled=True),
                          format="json")  # fmt: skip
    assert r.status_code == 201
    held = OutputOverride.objects.get()
    assert held.created_by == engineer and not held.cancelled
    assert held.starts > timezone.now() - timedelta(minutes=1)


def test_viewers_and_bookers_may_read_but_not_hold_or_cancel(
    viewer_api, booker_api, anon_api, engineer_api, mixing
):
    held = engineer_api.post(URL, _body(mixing), format="json").json()
    for client in (viewer_api, booker_api):
        assert client.get(f"{URL}/{held['id']}").status_code == 200
        assert client.post(URL, _body(mixing), format="json").status_code == 403
        assert client.patch(f"{URL}/{held['id']}", {"value": 90}, format="json").status_code == 403
        assert client.delete(f"{URL}/{held['id']}").status_code == 403
    assert anon_api.get(URL).status_code in (401, 403)
    assert anon_api.post(URL, _body(mixing), format="json").status_code in (401, 403)
    row = OutputOverride.objects.get()
    assert (row.value, row.cancelled) == (40.0, False)


def test_delete_cancels_and_keeps_the_override(engineer_api, mixing):
    held = engineer_api.post(URL, _body(mixing), format="json").json()
    assert engineer_api.delete(f"{URL}/{held['id']}").status_code == 204
    row = OutputOverride.objects.get(pk=held["id"])
    assert row.cancelled and row.cancelled_by == "engineer" and row.cancelled_at is not None
    _refused_on(engineer_api.patch(f"{URL}/{held['id']}", {"value": 50}, format="json"),
                "cancelled")  # fmt: skip


def test_the_status_page_shows_the_output_and_an_engineer_holds_it(engineer, viewer, redis_client):
    with RelayBoard(coils=8) as board:
        plant = _plant("Boiler house", board=board, register_address=5,
                       kp=5.0, ti_s=100.0)  # fmt: skip
        valve = f.relay("Hall valve", board, coil=1)
        plant.zones.add(f.zone("Hall", valve, temp=15.0, setback_setpoint=20.0))
        now = int(timezone.now().timestamp())
        feed_service.log_points([(plant.outside_sensor.feed_id, now, 0.0),
                                 (plant.flow_sensor.feed_id, now, 40.0)])  # fmt: skip
        run_tick()
        assert board.register(5) == 6500
        page = _client(viewer).get("/staff/control/").content.decode()
        row = page[page.index('id="circuit-') :]
        row = row[: row.index("</tr>")]
        for shown in ("Boiler house", "0.0 °C", "50.0 °C", "40.0 °C", "65 %",
                      "weather compensation"):  # fmt: skip
            assert shown in row, (shown, row)
        assert 'id="output-override-form"' not in page  # a viewer may not hold it
        refused = _client(viewer).post("/staff/control/output-overrides/", {
            "plant": plant.pk, "value": 20, "minutes": 30, "reason": "test"})  # fmt: skip
        assert refused.status_code == 403 and not OutputOverride.objects.exists()

        engineer_page = _client(engineer)
        assert 'id="output-override-form"' in engineer_page.get("/staff/control/").content.decode()
        for field, data in (("value", {"value": 100.5}), ("minutes", {"minutes": 1441}),
                            ("minutes", {"minutes": 0}), ("reason", {"reason": ""})):  # fmt: skip
            r = engineer_page.post("/staff/control/output-overrides/", {
                "plant": plant.pk, "value": 20, "minutes": 30, "reason": "Valve test",
                **data}, follow=True)  # fmt: skip
            assert f"{field}:" in r.content.decode() and not OutputOverride.objects.exists()
        engineer_page.post("/staff/control/output-overrides/", {
            "plant": plant.pk, "value": 20, "minutes": 1440, "reason": "Valve test"})  # fmt: skip
        held = OutputOverride.objects.get()
        assert held.created_by == engineer
        run_tick()
        assert board.register(5) == 2000
        row = AnalogueCommand.objects.filter(plant=plant).first()
        assert (row.value, row.strategy, row.user) == (20.0, "manual_override", engineer)
        assert "Manual override by engineer" in row.reason and "Valve test" in row.reason
        page = _client(viewer).get("/staff/control/").content.decode()
        assert "manual override by engineer" in page and "Cancel override" not in page
        # Listed with the relay overrides in force, too.
        assert "Boiler house (analogue output)" in page and "held at 20 %" in page
        # The same in the status API, for a viewer too.
        status = _client(viewer).get("/api/v1/control/status").json()
        (out,) = status["outputs"]
        assert (out["id"], out["value"], out["unit"], out["override"]) == (plant.pk, 20.0, "%",
                                                                          held.pk)  # fmt: skip
        assert (
            out["owner"] == "manual override by engineer" and out["strategy"] == "manual_override"
        )
        assert (out["outside_c"], out["flow_c"], out["fault"]) == (0.0, 40.0, "")
        engineer_page.post(f"/staff/control/output-overrides/{held.pk}/cancel/")
        held.refresh_from_db()
        assert held.cancelled and held.cancelled_by == "engineer"


def _client(user) -> Client:
    c = Client()
    c.force_login(user)
    return c
