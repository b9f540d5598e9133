"""The tick against a real pymodbus relay board, real Redis and the test database
(without Celery: tests/integration/test_control_*.py run it through a real worker)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from alarms.models import Alarm
from control import runtime
from control.drivers.simulated_board import RelayBoard
from control.models import ActuatorCommand, Booking, HeatingPlant, Override
from control.runner import run_tick
from control.status import actuator_status, zone_status

from . import factories as f

pytestmark = pytest.mark.django_db


@pytest.fixture
def board():
    with RelayBoard(coils=32) as b:
        yield b


def test_a_booking_switches_the_valve_on_and_audits_why(redis_client, board):
    valve = f.relay("Hall valve", board, coil=3)
    zone = f.zone("Hall", valve, temp=15.0)
    now = timezone.now()
    Booking.objects.create(
        zone=zone, title="Yoga", start=now - timedelta(minutes=5), end=now + timedelta(hours=1)
    )
    report = run_tick()
    assert report["changes"] == 1 and report["faults"] == 0
    assert board.coil(3) is True
    cmd = ActuatorCommand.objects.get(actuator=valve)
    assert cmd.state is True and cmd.strategy == "booking"
    assert cmd.reason.startswith("Booking 'Yoga'") and "heating" in cmd.reason
    assert cmd.sent_at is not None and cmd.confirmed_at is not None and cmd.error == ""
    [row] = [r for r in actuator_status() if r["id"] == valve.pk]
    assert row["state"] == "ON" and row["why"] == cmd.reason and row["confirmed"]


def test_only_changes_are_sent(redis_client, board):
    valve = f.relay("Hall valve", board, coil=0)
    f.zone("Hall", valve, temp=15.0)
    run_tick()
    run_tick()
    assert ActuatorCommand.objects.filter(actuator=valve).count() == 1  # the first OFF


def test_a_relay_that_rebooted_is_put_back_and_audited(redis_client, board):
    valve = f.relay("Hall valve", board, coil=1)
    zone = f.zone("Hall", valve, temp=15.0)
    now = timezone.now()
    Booking.objects.create(zone=zone, title="Choir", start=now, end=now + timedelta(hours=1))
    run_tick()
    board.set_coil(1, False)  # the board rebooted
    report = run_tick()
    assert report["corrected"] == 1 and board.coil(1) is True
    last = ActuatorCommand.objects.filter(actuator=valve).first()
    assert last.reason.startswith("Re-asserted: relay read OFF, should be ON")


def test_a_dead_board_raises_an_alarm_and_flags_the_zone(redis_client, board, settings):
    settings.BMS_CONTROL_DEVICE_DEADLINE = 1.0
    valve = f.relay("Hall valve", board, coil=2)
    f.zone("Hall", valve, temp=4.0)  # frost: wants ON
    board.stop()
    report = run_tick()
    assert report["faults"] == 1
    alarm = Alarm.objects.get(key=f"relay:{valve.pk}", cleared_at__isnull=True)
    assert "did not confirm ON" in alarm.message and alarm.source == "relay"
    cmd = ActuatorCommand.objects.get(actuator=valve)
    assert cmd.error and cmd.confirmed_at is None
    [z] = zone_status()
    assert "actuator_fault" in z["flags"]
    # The board comes back: the next tick retries, confirms and clears the alarm.
    board.start()
    run_tick()
    assert board.coil(2) is True
    assert not Alarm.objects.filter(key=f"relay:{valve.pk}", cleared_at__isnull=True).exists()


def test_boiler_and_pump_with_overrun(redis_client, board):
    valve = f.relay("Hall valve", board, coil=0)
    boiler = f.relay("Boiler", board, coil=10, kind="boiler")
    pump = f.relay("Pump", board, coil=11, kind="pump")
    zone = f.zone("Hall", valve, temp=15.0)
    plant = HeatingPlant.objects.create(
        name="Boiler house", boiler=boiler, pump=pump, pump_overrun_s=360
    )
    plant.zones.add(zone)
    now = timezone.now()
    booking = Booking.objects.create(
        zone=zone, title="Yoga", start=now - timedelta(minutes=1), end=now + timedelta(hours=1)
    )
    run_tick(now)
    # The valve opens first; the boiler fires once its board confirmed it open.
    assert board.coil(0) is True and board.coils_state(10, 2) == [False, False]
    run_tick(now + timedelta(seconds=30))
    assert board.coils_state(10, 2) == [True, True]
    booking.cancelled = True
    booking.save()
    run_tick(now + timedelta(minutes=1))
    assert board.coils_state(10, 2) == [False, True]
    assert runtime.load_actuators([pump.pk])[pump.pk].strategy == "pump_overrun"
    run_tick(now + timedelta(minutes=8))
    assert board.coils_state(10, 2) == [False, False]


def test_at_start_the_boiler_fires_once_the_valve_confirmed_without_a_min_off_wait(
    redis_client, board
):
    """The boiler's first command (OFF: its zone's valve is not confirmed open yet) comes
    from an unknown state: no minimum off time follows it, so it fires at the next tick."""
    valve = f.relay("Hall valve", board, coil=0)
    boiler = f.relay("Boiler", board, coil=10, kind="boiler", min_on_s=600, min_off_s=600)
    zone = f.zone("Hall", valve, temp=15.0)
    HeatingPlant.objects.create(name="Boiler house", boiler=boiler).zones.add(zone)
    now = timezone.now()
    Booking.objects.create(zone=zone, title="Yoga", start=now, end=now + timedelta(hours=1))
    run_tick(now)
    assert (board.coil(0), board.coil(10)) == (True, False)
    run_tick(now + timedelta(seconds=30))
    assert board.coil(10) is True
    assert runtime.load_actuators([boiler.pk])[boiler.pk].reason == "Heat demand from Hall"


def test_a_zone_whose_valve_never_confirms_does_not_fire_the_boiler(redis_client, board):
    """Issue #27 A1, on a real board: Hall's only valve is on a coil the board refuses. It
    used to call the boiler and count as the open circuit, so boiler and pump ran for minutes
    with every valve shut. Now the boiler stays off, the index circuit is the Annex, and the
    zone and the plant say why."""
    boiler = f.relay("Boiler", board, coil=0, kind="boiler")
    pump = f.relay("Pump", board, coil=1, kind="pump")
    hall_valve = f.relay("Hall valve", board, coil=40)  # past the board's 32 coils: refused
    annex_valve = f.relay("Annex valve", board, coil=3)
    hall = f.zone("Hall", hall_valve, temp=4.0)  # frost: calls for heat
    annex = f.zone("Annex", annex_valve, temp=20.0)
    plant = HeatingPlant.objects.create(name="Boiler house", boiler=boiler, pump=pump)
    plant.zones.add(hall, annex)
    now = timezone.now()
    for i in range(4):
        run_tick(now + timedelta(seconds=30 * i))
        assert board.coils_state(0, 2) == [False, False], f"tick {i}: fired against shut valves"
    assert board.coil(3) is False  # nothing runs, so no circuit is forced open
    boiler_state = runtime.load_actuators([boiler.pk])[boiler.pk]
    assert boiler_state.reason == "No zone can take heat (Hall: every valve in fault)"
    alarm = Alarm.objects.get(key=f"zone-valves:{hall.pk}", cleared_at__isnull=True)
    assert "every valve is in fault ('Hall valve')" in alarm.message
    assert ActuatorCommand.objects.filter(actuator=boiler, state=False).exists()


def test_a_new_plant_runs_no_overrun_for_a_boiler_that_never_fired(redis_client, board):
    """Issue #27 A5: creating a plant commanded its boiler OFF from an unknown state, which
    counted as "the boiler just stopped": 6 min of pump overrun and, with no bypass, a zone
    valve forced open."""
    boiler = f.relay("Boiler", board, coil=0, kind="boiler")
    pump = f.relay("Pump", board, coil=1, kind="pump")
    valve = f.relay("Hall valve", board, coil=2)
    hall = f.zone("Hall", valve, temp=20.0)  # satisfied: nothing calls
    plant = HeatingPlant.objects.create(name="Boiler house", boiler=boiler, pump=pump)
    plant.zones.add(hall)
    now = timezone.now()
    for i in range(3):
        run_tick(now + timedelta(seconds=30 * i))
        assert board.coils_state(0, 3) == [False, False, False], f"tick {i}"
    assert not ActuatorCommand.objects.filter(strategy__in=["pump_overrun", "no_bypass"]).exists()


def test_override_switches_an_actuator_nobody_else_drives(redis_client, board, engineer):
    spare = f.relay("Spare", board, coil=20)
    Override.objects.create(
        actuator=spare,
        state=True,
        expires=timezone.now() + timedelta(hours=1),
        reason="test run",
        created_by=engineer,
    )
    run_tick()
    assert board.coil(20) is True
    cmd = ActuatorCommand.objects.get(actuator=spare)
    assert cmd.user == engineer and cmd.strategy == "manual_override"
    assert "Manual override ON by engineer" in cmd.reason


def test_overlapping_ticks_do_not_run_twice(redis_client, board):
    assert runtime.acquire_tick_lock(30)  # someone else's tick
    assert run_tick() == {"skipped": "another control tick is still running"}


def test_a_stale_zone_sensor_alarms_by_email_and_falls_back(redis_client, board, settings):
    """A booked zone whose sensor went quiet runs its fixed duty cycle (not cold
    and silent), the fault is an emailed alarm on the point, and it clears once readings
    return."""
    from django.core import mail

    from alarms.tasks import send_alarm_digest

    settings.BMS_ALARM_EMAILS = ["estates@example.org"]
    valve = f.relay("Hall valve", board, coil=4)
    zone = f.zone("Hall", valve)
    # 10:00:00 UTC: the first half of a 20 min fallback period (on).
    now = timezone.now().replace(hour=10, minute=0, second=0, microsecond=0)
    f.set_temperature(zone, 15.0, t=(now - timedelta(hours=1)).timestamp())
    Booking.objects.create(zone=zone, title="Yoga", start=now, end=now + timedelta(hours=2))
    run_tick(now)
    assert board.coil(4) is True
    cmd = ActuatorCommand.objects.get(actuator=valve)
    assert cmd.strategy == "sensor_fallback"
    assert "stale since" in cmd.reason and "fallback: fixed duty 50% of 20 min" in cmd.reason
    alarm = Alarm.objects.get(key=f"zone-sensor:{zone.pk}", cleared_at__isnull=True)
    assert "Zone 'Hall'" in alarm.message and "stale since" in alarm.message
    assert send_alarm_digest() == 1  # mailed by beat's digest, not by the tick
    assert len(mail.outbox) == 1 and "Zone 'Hall'" in mail.outbox[0].subject
    run_tick(now + timedelta(minutes=1))
    assert send_alarm_digest() == 0 and len(mail.outbox) == 1  # raised once, not every tick
    run_tick(now + timedelta(minutes=11))  # the off half of the period
    assert board.coil(4) is False
    f.set_temperature(zone, 15.0, t=(now + timedelta(minutes=12)).timestamp())
    run_tick(now + timedelta(minutes=12))
    assert board.coil(4) is True  # a fresh reading: the thermostat again
    assert not Alarm.objects.filter(key=f"zone-sensor:{zone.pk}", cleared_at__isnull=True).exists()


def test_over_temperature_flicker_does_not_toggle_the_boiler(redis_client, board, engineer):
    """28.0 / 27.9 °C alternating under an ON override toggled the boiler every
    tick; the cut-off now holds until the zone is 1 K below its maximum."""
    valve = f.relay("Hall valve", board, coil=5)
    boiler = f.relay("Boiler", board, coil=6, kind="boiler")  # no minimum run/off times
    zone = f.zone("Hall", valve)
    HeatingPlant.objects.create(name="Boiler house", boiler=boiler).zones.add(zone)
    now = timezone.now()
    Override.objects.create(
        zone=zone, state=True, starts=now - timedelta(minutes=1), expires=now + timedelta(hours=2),
        reason="drying plaster",
        created_by=engineer,
    )  # fmt: skip
    states = []
    for i, temp in enumerate((26.0, 28.0, 27.9, 28.0, 27.9, 27.5, 26.9)):
        at = now + timedelta(minutes=i)
        f.set_temperature(zone, temp, t=at.timestamp())
        run_tick(at)
        states.append(board.coils_state(5, 2))
    # The boiler fires a tick after the valve, once its board confirmed the valve open.
    run_tick(now + timedelta(minutes=6, seconds=30))
    states.append(board.coils_state(5, 2))
    assert states == [[True, False]] + [[False, False]] * 5 + [[True, False], [True, True]]
    reasons = [c.reason for c in ActuatorCommand.objects.filter(actuator=valve).order_by("pk")]
    assert (
        "Over-temperature cut-off: 28.0 °C (off from 28 °C until at or below 27 °C)" in reasons[1]
    )


def test_a_refused_coil_faults_only_itself_in_the_boards_words(redis_client, board, settings):
    """A coil address the board rejects (exception 02) no longer makes every relay
    on the board unconfirmed with a "no answer" alarm."""
    valves = [f.relay(f"Valve {c}", board, coil=c) for c in (3, 4, 40)]  # 40: past the 32 coils
    for v in valves:
        f.zone(f"Room {v.coil}", v, temp=4.0)  # frost: all want ON
    report = run_tick()
    assert report["faults"] == 1
    assert board.coils_state(3, 2) == [True, True]
    for v in valves[:2]:
        cmd = ActuatorCommand.objects.get(actuator=v)
        assert cmd.error == "" and cmd.confirmed_at is not None
    bad = ActuatorCommand.objects.get(actuator=valves[2])
    assert bad.error == "board answered: illegal data address (exception 2) for coil 40"
    [alarm] = Alarm.objects.filter(source="relay", cleared_at__isnull=True)
    assert alarm.key == f"relay:{valves[2].pk}"
    assert "board answered: illegal data address (exception 2) for coil 40" in alarm.message
    assert "no answer" not in alarm.message
    rows = {r["id"]: r for r in actuator_status()}
    assert rows[valves[0].pk]["confirmed"] and not rows[valves[2].pk]["confirmed"]
    # Verify-only ticks read the run back: the refused read stays the one coil's fault.
    report = run_tick()
    assert report["faults"] == 1 and rows[valves[1].pk]["fault"] == ""


# --- Relays released from control -----------------------------------------------


def test_a_valve_removed_from_its_zone_goes_to_its_idle_state_and_is_still_read_back(
    redis_client, board
):
    valve = f.relay("Hall valve", board, coil=8)
    zone = f.zone("Hall", valve, temp=15.0)
    now = timezone.now()
    Booking.objects.create(zone=zone, title="Yoga", start=now, end=now + timedelta(hours=2))
    run_tick(now)
    assert board.coil(8) is True
    zone.actuators.remove(valve)
    run_tick(now + timedelta(minutes=1))
    assert board.coil(8) is False
    cmd = ActuatorCommand.objects.filter(actuator=valve).first()
    assert cmd.reason == "Released from zone 'Hall': idle state OFF"
    assert cmd.strategy == "idle_state" and cmd.confirmed_at is not None
    [row] = [r for r in actuator_status() if r["id"] == valve.pk]
    assert row["state"] == "OFF" and row["confirmed"]
    assert row["owner"] == "not controlled — idle state OFF"
    assert row["why"] == "Released from zone 'Hall': idle state OFF"
    # Still read back: a hand-switched relay is put back to its idle state.
    board.set_coil(8, True)
    report = run_tick(now + timedelta(minutes=2))
    assert report["corrected"] == 1 and board.coil(8) is False


def test_a_pump_taken_out_of_its_plant_goes_to_its_configured_idle_state(redis_client, board):
    boiler = f.relay("Boiler", board, coil=12, kind="boiler")
    pump = f.relay("Pump", board, coil=13, kind="pump", idle_state=True)
    plant = HeatingPlant.objects.create(name="Boiler house", boiler=boiler, pump=pump)
    run_tick()
    assert board.coils_state(12, 2) == [False, False]
    [row] = [r for r in actuator_status() if r["id"] == pump.pk]
    assert row["owner"] == "heating plant 'Boiler house'"
    plant.pump = None
    plant.save()
    run_tick()
    assert board.coil(13) is True
    assert ActuatorCommand.objects.filter(actuator=pump).first().reason == (
        "Released from heating plant 'Boiler house': idle state ON"
    )


def test_the_valves_of_a_disabled_zone_are_released_and_their_alarm_clears(
    redis_client, board, settings
):
    settings.BMS_CONTROL_DEVICE_DEADLINE = 1.0
    valve = f.relay("Hall valve", board, coil=9)
    zone = f.zone("Hall", valve, temp=4.0)  # frost: ON
    run_tick()
    assert board.coil(9) is True
    board.stop()
    run_tick()
    assert Alarm.objects.filter(key=f"relay:{valve.pk}", cleared_at__isnull=True).exists()
    zone.enabled = False
    zone.save()
    board.start()
    board.set_coil(9, True)  # the relay is still ON
    run_tick()
    assert board.coil(9) is False
    assert not Alarm.objects.filter(key=f"relay:{valve.pk}", cleared_at__isnull=True).exists()
    last = ActuatorCommand.objects.filter(actuator=valve).first()
    assert last.reason == "Released from zone 'Hall' (zone disabled): idle state OFF"
    [z] = zone_status()
    assert z["mode"] == "disabled" and "actuator_fault" not in z["flags"]
    assert z["actuators"][0]["state"] == "OFF" and z["actuators"][0]["confirmed"]


def test_a_disabled_actuators_relay_alarm_clears(redis_client, board, settings):
    settings.BMS_CONTROL_DEVICE_DEADLINE = 1.0
    valve = f.relay("Hall valve", board, coil=14)
    f.zone("Hall", valve, temp=4.0)
    board.stop()
    run_tick()
    assert Alarm.objects.filter(key=f"relay:{valve.pk}", cleared_at__isnull=True).exists()
    valve.enabled = False
    valve.save()
    run_tick()
    assert not Alarm.objects.filter(key=f"relay:{valve.pk}", cleared_at__isnull=True).exists()
    [row] = [r for r in actuator_status() if r["id"] == valve.pk]
    assert row["fault"] == "" and row["owner"] == "disabled: never switched"


def test_a_dead_relay_is_audited_once_per_fault_episode_not_every_tick(
    redis_client, board, settings
):
    """Each retry of a dead relay wrote an audit row, 2,880 a day per relay."""
    settings.BMS_CONTROL_DEVICE_DEADLINE = 0.5
    valve = f.relay("Hall valve", board, coil=15)
    zone = f.zone("Hall", valve, temp=4.0)  # frost: ON
    board.stop()
    now = timezone.now()
    for i in range(4):
        assert run_tick(now + timedelta(minutes=i))["faults"] == 1
    [row] = ActuatorCommand.objects.filter(actuator=valve)
    assert row.state is True and row.error  # the state change, with its fault
    board.start()
    run_tick(now + timedelta(minutes=4))  # the retry confirms: its recovery is a row
    run_tick(now + timedelta(minutes=4, seconds=30))  # and nothing more while it holds
    assert board.coil(15) is True and ActuatorCommand.objects.filter(actuator=valve).count() == 2
    back = ActuatorCommand.objects.filter(actuator=valve).first()
    assert back.reason.startswith("Recovered after a fault: relay confirmed ON. Frost protection")
    assert back.confirmed_at is not None and back.error == ""
    # A second episode, found by the read-back of a steady state: one row for it.
    board.stop()
    for i in range(5, 9):
        run_tick(now + timedelta(minutes=i))
    assert ActuatorCommand.objects.filter(actuator=valve).count() == 3
    assert (
        ActuatorCommand.objects.filter(actuator=valve)
        .first()
        .reason.startswith("Retry after a fault: Frost protection")
    )
    # A state change during the episode is a row of its own.
    f.set_temperature(zone, 8.0, t=(now + timedelta(minutes=9)).timestamp())
    run_tick(now + timedelta(minutes=9))
    run_tick(now + timedelta(minutes=10))
    assert list(ActuatorCommand.objects.filter(actuator=valve).values_list("state", flat=True)) == [
        False,
        True,
        True,
        True,
    ]
