"""Weather compensation and relay board watchdogs: configuration rules (API and admin), and
the tick against a real pymodbus board (without Celery; the worker runs them in
tests/integration/test_weather_worker.py)."""

from __future__ import annotations

import time

import pytest
import time_machine
from django.test import Client

import control.admin_plant  # noqa: F401  (registers the ModelAdmins)
from control import outputs
from control.drivers.simulated_board import RelayBoard as SimulatedBoard
from control.models import AnalogueCommand, HeatingPlant, RelayBoard, WeatherCompensation
from control.runner import run_tick
from feeds.store import service as feed_service
from sensors.models import Actuator

from . import factories as f

pytestmark = pytest.mark.django_db


@pytest.fixture
def board():
    with SimulatedBoard(coils=16) as b:
        yield b


def set_value(sensor, value: float, t: float | None = None) -> None:
    feed_service.log_points([(sensor.feed_id, int(t or time.time()), value)])


def make_plant(board=None) -> HeatingPlant:
    host = board.host if board else "10.0.0.2"
    port = board.port if board else 502
    boiler = Actuator.objects.create(name="Boiler", kind="boiler", host=host, port=port, coil=0,
                                     min_on_s=0, min_off_s=0)  # fmt: skip
    outside, flow = f.temperature_sensor("outside"), f.temperature_sensor("flow")
    return HeatingPlant.objects.create(
        name="Boiler house", boiler=boiler, outside_sensor=outside, flow_sensor=flow,
        frost_outside_c=-5.0, has_bypass=True,
    )  # fmt: skip


VALID = {"mode": "mixing_valve", "output": "register", "register_host": "10.0.0.9",
         "register_address": 3, "slope": 1.2, "flow_min_c": 20, "flow_max_c": 60}  # fmt: skip


@pytest.mark.parametrize(
    "change, field",
    [
        ({"flow_min_c": 60, "flow_max_c": 50}, "flow_max_c"),
        ({"flow_max_c": 90, "flow_limit_c": 85}, "flow_limit_c"),
        ({"slope": 4.5}, "slope"),
        ({"slope": 0.1}, "slope"),
        ({"raw_min": 100, "raw_max": 100}, "raw_max"),
        ({"register_host": ""}, "register_host"),
        ({"register_address": 65536}, "register_address"),
        ({"mode": "boiler_setpoint", "output": "three_point"}, "output"),
        ({"output": "three_point"}, "open_actuator"),
        ({"ti_s": 5}, "ti_s"),
        # Outside test, session 6: a host that is no host was accepted and failed every tick.
        ({"register_host": "http://x y/../"}, "register_host"),
        ({"register_host": "10.0.0.9:502"}, "register_host"),
        ({"register_host": "board_1"}, "register_host"),
        ({"register_host": "a" * 64 + ".local"}, "register_host"),
    ],
)
def test_a_bad_setting_is_a_400_naming_the_field(engineer_api, change, field):
    plant = make_plant()
    response = engineer_api.post(
        "/api/v1/weather-compensations", {**VALID, "plant": plant.pk, **change}, format="json"
    )
    assert response.status_code == 400, response.content
    assert field in response.json()["fields"]


def test_a_mixing_loop_needs_the_flow_sensor_and_a_good_one_is_created(engineer_api):
    plant = make_plant()
    HeatingPlant.objects.filter(pk=plant.pk).update(flow_sensor=None)
    response = engineer_api.post(
        "/api/v1/weather-compensations", {**VALID, "plant": plant.pk}, format="json"
    )
    assert response.status_code == 400 and "mode" in response.json()["fields"]
    HeatingPlant.objects.filter(pk=plant.pk).update(flow_sensor=f.temperature_sensor("flow2"))
    response = engineer_api.post(
        "/api/v1/weather-compensations", {**VALID, "plant": plant.pk}, format="json"
    )
    assert response.status_code == 201, response.content
    assert response.json()["slope"] == 1.2


def test_three_point_relays_must_share_a_board_and_not_be_the_boiler(engineer_api):
    plant = make_plant()
    a = Actuator.objects.create(name="Open", host="10.0.0.2", coil=5)
    b = Actuator.objects.create(name="Close", host="10.0.0.3", coil=6)
    body = {**VALID, "plant": plant.pk, "output": "three_point", "open_actuator": a.pk}
    response = engineer_api.post(
        "/api/v1/weather-compensations", {**body, "close_actuator": b.pk}, format="json"
    )
    assert (
        response.status_code == 400
        and "one board" in response.json()["fields"]["close_actuator"][0]
    )
    response = engineer_api.post(
        "/api/v1/weather-compensations",
        {**body, "close_actuator": plant.boiler_id},
        format="json",
    )
    assert response.status_code == 400 and "boiler or pump" in str(response.json())


def test_the_admin_shows_the_inline_and_refuses_a_bad_curve(superuser):
    plant = make_plant()
    c = Client()
    c.force_login(superuser)
    page = c.get(f"/admin/control/heatingplant/{plant.pk}/change/")
    assert page.status_code == 200 and "Heating curve" in page.content.decode()
    form = {
        "name": plant.name, "boiler": plant.boiler_id, "outside_sensor": plant.outside_sensor_id,
        "flow_sensor": plant.flow_sensor_id, "frost_outside_c": -5, "flow_frost_c": 5,
        "sensor_stale_after_s": 900,
        "pump_overrun_s": 360, "pump_kick_idle_days": 7, "pump_kick_s": 30, "enabled": "on",
        "weather-TOTAL_FORMS": 1, "weather-INITIAL_FORMS": 0, "weather-MIN_NUM_FORMS": 0,
        "weather-MAX_NUM_FORMS": 1, "weather-0-enabled": "on", "weather-0-mode": "mixing_valve",
        "weather-0-slope": 1.5, "weather-0-shift_k": 0, "weather-0-room_influence": 0,
        "weather-0-flow_min_c": 70, "weather-0-flow_max_c": 50, "weather-0-flow_limit_c": 85,
        "weather-0-kp": 4, "weather-0-ti_s": 180, "weather-0-output": "register",
        "weather-0-register_host": "10.0.0.9", "weather-0-register_port": 502,
        "weather-0-register_device_id": 1, "weather-0-register_address": 0,
        "weather-0-raw_min": 0, "weather-0-raw_max": 10000, "weather-0-scale_low": 0,
        "weather-0-scale_high": 100, "weather-0-run_time_s": 120, "weather-0-min_pulse_s": 2,
        "weather-0-bacnet_priority": 8,  # the form shows its default, so a browser posts it
    }  # fmt: skip
    response = c.post(f"/admin/control/heatingplant/{plant.pk}/change/", form)
    assert response.status_code == 200
    assert "The highest flow set point must be above the lowest." in response.content.decode()
    form["weather-0-flow_min_c"] = 20
    response = c.post(f"/admin/control/heatingplant/{plant.pk}/change/", form)
    assert response.status_code == 302
    assert WeatherCompensation.objects.get(plant=plant).flow_min_c == 20


def register_plant(board) -> tuple[HeatingPlant, object]:
    plant = make_plant(board)
    valve = f.relay("Hall valve", board, coil=1)
    zone = f.zone("Hall", valve, temp=15.0, setback_setpoint=20.0)
    plant.zones.add(zone)
    set_value(plant.outside_sensor, 0.0)
    set_value(plant.flow_sensor, 40.0)
    WeatherCompensation.objects.create(
        plant=plant, kp=5.0, ti_s=100.0, register_host=board.host, register_port=board.port,
        register_address=2,
    )  # fmt: skip
    return plant, plant.flow_sensor


def test_the_pi_state_carries_from_tick_to_tick_through_redis(redis_client, board):
    from django.utils import timezone

    plant, flow = register_plant(board)
    t0 = timezone.now()
    run_tick(now=t0)
    assert board.register(2) == 6500  # P 50 + I 15
    set_value(flow, 48.0)
    # 30 s later, another tick (a restarted worker reads the same Redis): P 10 + I 18 = 28 %.
    run_tick(now=t0 + timezone.timedelta(seconds=30))
    assert board.register(2) == 2800
    rows = list(AnalogueCommand.objects.filter(plant=plant).order_by("requested_at"))
    assert [r.raw for r in rows] == [6500, 2800]
    # At the set point the error is 0: P 0, I stays 18 -> 18 %, tick after tick. An unchanged
    # value is written again (a module that rebooted gets it back) but not audited again.
    set_value(flow, 50.0)
    run_tick(now=t0 + timezone.timedelta(seconds=60))
    run_tick(now=t0 + timezone.timedelta(seconds=90))
    assert board.register(2) == 1800
    assert [
        r.raw for r in AnalogueCommand.objects.filter(plant=plant).order_by("requested_at")
    ] == [
        6500,
        2800,
        1800,
    ]


def test_a_refused_output_register_alarms_with_the_boards_words(redis_client, board):
    from alarms.models import Alarm

    plant, _ = register_plant(board)
    WeatherCompensation.objects.filter(plant=plant).update(register_address=40)  # beyond 16
    report = run_tick()
    assert report["faults"] >= 1
    alarm = Alarm.objects.get(key=f"plant-output:{plant.pk}", cleared_at__isnull=True)
    assert "illegal data address (exception 2) for holding register 40" in alarm.message
    row = AnalogueCommand.objects.get(plant=plant)
    assert "exception 2" in row.error and row.confirmed_at is None
    # The status page says so, in the board's words, beside the output.
    from control.status import output_rows

    shown = {r["id"]: r for r in output_rows()}[plant.pk]
    assert "exception 2" in shown["fault"] and shown["confirmed"] is False
    assert shown["owner"] == "weather compensation"
    # Put right: the first good write is a row of its own, so the newest row no longer reads
    # as failing (outside test, session 6), and the alarm clears.
    # A modulating boiler's set point follows the outside only: the same value tick to tick.
    WeatherCompensation.objects.filter(plant=plant).update(mode="boiler_setpoint")
    run_tick()  # the new value, refused: a row with the error
    rows = AnalogueCommand.objects.filter(plant=plant).count()
    run_tick()  # refused again, same value: no row (one per fault episode)
    assert AnalogueCommand.objects.filter(plant=plant).count() == rows, [
        (r.reason[:40], r.strategy, r.error[:20])
        for r in AnalogueCommand.objects.filter(plant=plant)
    ]
    WeatherCompensation.objects.filter(plant=plant).update(register_address=2)
    run_tick()
    assert AnalogueCommand.objects.filter(plant=plant).count() == rows + 1
    newest = AnalogueCommand.objects.filter(plant=plant).order_by("-requested_at", "-pk").first()
    assert newest.reason.startswith("Recovered after a fault: "), newest.reason
    assert newest.confirmed_at is not None and newest.error == ""
    assert not Alarm.objects.filter(key=f"plant-output:{plant.pk}", cleared_at__isnull=True)


def test_the_watchdog_is_rewritten_periodically_and_when_the_board_comes_back(redis_client, board):
    from django.utils import timezone

    valve = f.relay("Hall valve", board, coil=1)
    f.zone("Hall", valve, temp=15.0)
    wd = RelayBoard.objects.create(
        name="Plant room", host=board.host, port=board.port, watchdog_register=4,
        watchdog_value=60, rewrite_s=300,
    )  # fmt: skip
    t0 = timezone.now()
    # The driver stamps each write with time.time(): on a clock that follows the ticks.
    with time_machine.travel(t0) as clock:

        def tick_at(seconds: int) -> None:
            clock.move_to(t0 + timezone.timedelta(seconds=seconds))
            run_tick(now=t0 + timezone.timedelta(seconds=seconds))

        tick_at(0)
        assert board.register(4) == 60
        written = outputs.watchdog_status([wd.pk])[wd.pk]["written_at"]
        tick_at(30)
        assert outputs.watchdog_status([wd.pk])[wd.pk]["written_at"] == written  # not due
        # The board rebooted (its relays and its watchdog setting lost): the relay is put back
        # and the watchdog written again at once.
        board.set_coil(1, True)
        tick_at(60)
        assert outputs.watchdog_status([wd.pk])[wd.pk]["written_at"] > written
        again = outputs.watchdog_status([wd.pk])[wd.pk]["written_at"]
        tick_at(400)
    assert outputs.watchdog_status([wd.pk])[wd.pk]["written_at"] > again  # every rewrite_s


def test_the_relay_board_api_shows_the_watchdog_status(engineer_api, redis_client, board):
    wd = RelayBoard.objects.create(
        name="Plant room", host=board.host, port=board.port, watchdog_register=4
    )
    run_tick()
    body = engineer_api.get(f"/api/v1/relay-boards/{wd.pk}").json()
    assert body["watchdog"]["ok"] is True and body["watchdog"]["error"] == ""
    response = engineer_api.post(
        "/api/v1/relay-boards",
        {"name": "X", "host": "h", "watchdog_register": 70000},
        format="json",
    )
    assert response.status_code == 400 and "watchdog_register" in response.json()["fields"]


def test_weather_compensation_runs_on_the_cached_configuration(redis_client, board):
    """Database unavailable: the tick rebuilds its snapshot from the Redis cache, curve and
    output included (control/config_cache.py)."""
    from django.utils import timezone

    from control import config_cache

    plant, _ = register_plant(board)
    run_tick()
    live = config_cache.rebuild(config_cache.load(), timezone.now())
    [spec] = live.snapshot.plants
    assert spec.weather is not None and spec.weather.register == 2 and spec.weather.kp == 5.0
    assert spec.flow is not None and spec.flow.value == 40.0


def _second_plant(name: str) -> HeatingPlant:
    boiler = Actuator.objects.create(name=f"{name} boiler", kind="boiler", host="10.0.0.2",
                                     coil=9 if name == "B" else 10)  # fmt: skip
    return HeatingPlant.objects.create(
        name=name, boiler=boiler, outside_sensor=f.temperature_sensor(f"outside {name}"),
        flow_sensor=f.temperature_sensor(f"flow {name}"), has_bypass=True,
    )  # fmt: skip


def test_two_outputs_on_one_holding_register_are_refused_naming_the_other(engineer_api):
    """Outside test, session 6: a second plant's output on the register the first drives was
    201 (two PI loops fighting over one 0-10 V output)."""
    first = make_plant()
    body = {**VALID, "register_host": "10.0.0.9", "register_address": 3}
    assert (
        engineer_api.post(
            "/api/v1/weather-compensations", {**body, "plant": first.pk}, format="json"
        ).status_code
        == 201
    )
    second = _second_plant("B")
    # The same register, the host spelt another way: refused, naming the first plant.
    response = engineer_api.post(
        "/api/v1/weather-compensations",
        {**body, "plant": second.pk, "register_host": "10.0.0.9 "},
        format="json",
    )
    assert response.status_code == 400, response.content
    assert "Boiler house" in response.json()["fields"]["register_address"][0]
    # Another unit, or another register, of the same module: accepted.
    for change in ({"register_device_id": 2}, {"register_address": 4}):
        response = engineer_api.post(
            "/api/v1/weather-compensations", {**body, "plant": second.pk, **change}, format="json"
        )
        assert response.status_code == 201, (change, response.content)
        WeatherCompensation.objects.filter(plant=second).delete()
    # Editing the first output keeps its own register: no conflict with itself.
    wc = WeatherCompensation.objects.get(plant=first)
    response = engineer_api.patch(
        f"/api/v1/weather-compensations/{wc.pk}", {"slope": 1.4}, format="json"
    )
    assert response.status_code == 200, response.content


def test_an_output_on_a_relay_boards_watchdog_register_is_refused_both_ways(engineer_api):
    """Outside test, session 6: an output PATCHed onto the relay board's watchdog register was
    accepted, and the valve position overwrote the board's timeout every tick."""
    board = engineer_api.post(
        "/api/v1/relay-boards",
        {"name": "Plant room relays", "host": "10.0.0.9", "port": 502, "device_id": 1,
         "watchdog_register": 10, "watchdog_value": 30},
        format="json",
    )  # fmt: skip
    assert board.status_code == 201, board.content
    plant = make_plant()
    response = engineer_api.post(
        "/api/v1/weather-compensations",
        {**VALID, "plant": plant.pk, "register_host": "10.0.0.9", "register_address": 10},
        format="json",
    )
    assert response.status_code == 400, response.content
    assert (
        "watchdog register of relay board 'Plant room relays'"
        in (response.json()["fields"]["register_address"][0])
    )
    created = engineer_api.post(
        "/api/v1/weather-compensations",
        {**VALID, "plant": plant.pk, "register_host": "10.0.0.9", "register_address": 5},
        format="json",
    )
    assert created.status_code == 201, created.content
    response = engineer_api.patch(
        f"/api/v1/weather-compensations/{created.json()['id']}",
        {"register_address": 10},
        format="json",
    )
    assert response.status_code == 400 and "register_address" in response.json()["fields"]
    # And the other way: a board's watchdog moved onto the output's register.
    response = engineer_api.patch(
        f"/api/v1/relay-boards/{board.json()['id']}", {"watchdog_register": 5}, format="json"
    )
    assert response.status_code == 400, response.content
    assert "Boiler house" in response.json()["fields"]["watchdog_register"][0]
    assert RelayBoard.objects.get().watchdog_register == 10
    assert WeatherCompensation.objects.get().register_address == 5


def test_a_shortest_pulse_of_half_the_stroke_or_more_is_refused(engineer_api):
    """Outside test, session 6: min pulse 60 s with a 10 s run time was accepted."""
    plant = make_plant()
    a = Actuator.objects.create(name="Open", host="10.0.0.2", coil=5)
    b = Actuator.objects.create(name="Close", host="10.0.0.2", coil=6)
    body = {**VALID, "plant": plant.pk, "output": "three_point", "open_actuator": a.pk,
            "close_actuator": b.pk, "run_time_s": 20}  # fmt: skip
    response = engineer_api.post(
        "/api/v1/weather-compensations", {**body, "min_pulse_s": 10}, format="json"
    )
    assert response.status_code == 400, response.content
    assert "half the valve's run time (20 s)" in response.json()["fields"]["min_pulse_s"][0]
    response = engineer_api.post(
        "/api/v1/weather-compensations", {**body, "min_pulse_s": 9.5}, format="json"
    )
    assert response.status_code == 201, response.content


def test_an_override_of_a_three_point_valve_relay_is_refused(engineer_api):
    """Outside test, session 6: overrides of the valve's relays were 201 and shown, but the
    valve driver ignores them (rightly: the interlock owns both relays)."""
    from datetime import timedelta

    from django.utils import timezone

    plant = make_plant()
    a = Actuator.objects.create(name="Open", host="10.0.0.2", coil=5)
    b = Actuator.objects.create(name="Close", host="10.0.0.2", coil=6)
    WeatherCompensation.objects.create(
        plant=plant, output="three_point", open_actuator=a, close_actuator=b
    )
    expires = (timezone.now() + timedelta(hours=1)).isoformat()
    for relay in (a, b):
        response = engineer_api.post(
            "/api/v1/overrides",
            {"actuator": relay.pk, "state": True, "reason": "force open", "expires": expires},
            format="json",
        )
        assert response.status_code == 400, response.content
        assert (
            "three-point valve of heating plant 'Boiler house'"
            in (response.json()["fields"]["actuator"][0])
        )
    other = Actuator.objects.create(name="Fan", host="10.0.0.2", coil=7)
    response = engineer_api.post(
        "/api/v1/overrides",
        {"actuator": other.pk, "state": True, "reason": "test", "expires": expires},
        format="json",
    )
    assert response.status_code == 201, response.content


def test_an_override_lasts_at_most_fourteen_days_everywhere(engineer_api):
    """Outside test, session 6: the API accepted an override until 2099; the staff page's
    bound (14 days) now holds for the API and the admin too."""
    from datetime import timedelta

    from django.utils import timezone

    fan = Actuator.objects.create(name="Fan", host="10.0.0.2", coil=7)
    now = timezone.now()
    body = {"actuator": fan.pk, "state": True, "reason": "test", "starts": now.isoformat()}
    response = engineer_api.post(
        "/api/v1/overrides",
        {**body, "expires": (now + timedelta(days=14, seconds=1)).isoformat()},
        format="json",
    )
    assert response.status_code == 400, response.content
    assert "at most 14 days" in response.json()["fields"]["expires"][0]
    response = engineer_api.post(
        "/api/v1/overrides", {**body, "expires": (now + timedelta(days=14)).isoformat()},
        format="json",
    )  # fmt: skip
    assert response.status_code == 201, response.content


def test_an_unchanged_output_gets_a_keep_alive_row_after_the_keepalive(redis_client, board):
    """CONTROL.md promises a row per keep-alive; the register is written every tick and the
    keep-alive was timed from that write, so it never came due (outside test, session 6)."""
    plant, _ = register_plant(board)
    WeatherCompensation.objects.filter(plant=plant).update(mode="boiler_setpoint")
    run_tick()
    run_tick()  # the same set point: no new row
    assert AnalogueCommand.objects.filter(plant=plant).count() == 1
    states = outputs.load(outputs.OUTPUTS_KEY, [plant.pk])
    states[plant.pk]["audited_at"] -= 601  # the last row was written 10 min ago
    outputs._save(outputs.OUTPUTS_KEY, states)
    run_tick()
    newest = AnalogueCommand.objects.filter(plant=plant).order_by("-pk").first()
    assert newest.reason.startswith("Keep-alive: Heating curve"), newest.reason
    assert newest.confirmed_at is not None
    run_tick()
    assert AnalogueCommand.objects.filter(plant=plant).count() == 2


def test_the_status_page_shows_each_boards_watchdog(viewer, redis_client, board):
    """What the plant does if this server stops is the boards' watchdogs' business: the status
    page says per board whether its watchdog was written, and in the board's words if not."""
    valve = f.relay("Hall valve", board, coil=1)
    f.zone("Hall", valve, temp=15.0)
    good = RelayBoard.objects.create(name="Plant room", host=board.host, port=board.port,
                                     watchdog_register=4, watchdog_value=60)  # fmt: skip
    # A board at an address where nothing answers: its watchdog cannot be written.
    dead = RelayBoard.objects.create(name="Loft board", host="127.0.0.1", port=1,
                                     watchdog_register=4)  # fmt: skip
    RelayBoard.objects.create(name="Old board", host="127.0.0.1", port=2)
    run_tick()
    client = Client()
    client.force_login(viewer)
    page = client.get("/staff/control/").content.decode()
    table = page[page.index('id="relay-boards"') :]
    row = table[table.index(f'id="board-{good.pk}"') :]
    assert "60 written to register 4" in row[: row.index("</tr>")]
    row = table[table.index(f'id="board-{dead.pk}"') :]
    assert "FAULT: " in row[: row.index("</tr>")]
    assert "no watchdog on this board" in table
