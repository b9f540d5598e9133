"""The control tick in a real Celery worker (queue "control"), against real pymodbus relay
boards on free high ports, real Redis and the shared test database. Ticks are sent to the
worker as tasks (what beat does every BMS_CONTROL_TICK seconds) and awaited.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from alarms.models import Alarm
from control import runtime
from control.drivers.simulated_board import RelayBoard
from control.models import ActuatorCommand, Booking, HeatingPlant, Override, Schedule
from control.tasks import control_tick
from tests.control import factories as f
from tests.wait import wait_for

pytestmark = [pytest.mark.integration]


@pytest.fixture
def worker(transactional_db, celery_worker, redis_client):
    return celery_worker


@pytest.fixture
def board():
    with RelayBoard(coils=32) as b:
        yield b


def tick(timeout_s: float = 20.0, now: datetime | None = None) -> dict:
    """Send one control tick to the worker and wait for its report. `now`: the moment the
    worker evaluates (the task's `now`), so an expiry is reached without waiting for it."""
    before = runtime.load_last_tick()
    control_tick.apply_async(kwargs={"now": now.isoformat()} if now is not None else None)

    def reported() -> dict | None:
        report = runtime.load_last_tick()
        return report if report is not None and report != before else None

    return wait_for(reported, timeout_s, "the worker to finish a control tick", every_s=0.05)


def test_a_booking_created_now_switches_on_and_its_end_off_with_pump_overrun(worker, board):
    valve = f.relay("Hall valve", board, coil=0)
    boiler = f.relay("Boiler", board, coil=1, kind="boiler")
    pump = f.relay("Pump", board, coil=2, kind="pump")
    zone = f.zone("Hall", valve, temp=16.0)
    plant = HeatingPlant.objects.create(
        name="Boiler house", boiler=boiler, pump=pump, pump_overrun_s=3
    )
    plant.zones.add(zone)
    now = timezone.now()
    booking = Booking.objects.create(
        zone=zone, title="Yoga", start=now - timedelta(minutes=1), end=now + timedelta(seconds=6)
    )
    tick()
    # The valve opens first; the boiler fires once its board confirmed the valve open.
    assert board.coils_state(0, 3) == [True, False, False]
    tick()
    assert board.coils_state(0, 3) == [True, True, True]
    reason = ActuatorCommand.objects.filter(actuator=valve).first().reason
    assert reason.startswith("Booking 'Yoga'")

    ended = booking.end + timedelta(seconds=1)  # the worker's clock, not a wait
    f.set_temperature(zone, 16.0)
    tick(now=ended)
    # The pump overruns, and the plant has no bypass: the valve stays open for it.
    assert board.coils_state(0, 3) == [True, False, True]
    assert "Overrun" in runtime.load_actuators([pump.pk])[pump.pk].reason
    assert runtime.load_actuators([valve.pk])[valve.pk].reason.startswith("Held open: 'Boiler")

    f.set_temperature(zone, 16.0)
    tick(now=ended + timedelta(seconds=3.1))  # past the 3 s overrun
    assert board.coils_state(0, 3) == [False, False, False]
    assert ActuatorCommand.objects.filter(actuator=pump, state=False).exists()


def test_frost_protection_overrides_an_off_schedule(worker, board):
    valve = f.relay("Store valve", board, coil=5)
    closed = Schedule.objects.create(name="Closed")  # no periods: always off
    zone = f.zone("Store", valve, temp=4.0, schedule=closed)
    tick()
    assert board.coil(5) is True
    cmd = ActuatorCommand.objects.get(actuator=valve)
    assert cmd.strategy == "frost_protection" and cmd.confirmed_at is not None
    f.set_temperature(zone, 7.5)
    tick()
    assert board.coil(5) is False


def test_a_manual_override_wins_until_it_expires(worker, board, engineer):
    valve = f.relay("Hall valve", board, coil=7)
    zone = f.zone("Hall", valve, temp=16.0)
    now = timezone.now()
    Booking.objects.create(
        zone=zone, title="Choir", start=now - timedelta(minutes=5), end=now + timedelta(hours=1)
    )
    override = Override.objects.create(
        zone=zone,
        state=False,
        expires=now + timedelta(seconds=4),
        reason="window repair",
        created_by=engineer,
    )
    tick()
    assert board.coil(7) is False
    cmd = ActuatorCommand.objects.get(actuator=valve)
    assert cmd.strategy == "manual_override" and cmd.user == engineer
    f.set_temperature(zone, 16.0)
    tick(now=override.expires + timedelta(seconds=1))
    assert board.coil(7) is True
    assert ActuatorCommand.objects.filter(actuator=valve).first().strategy == "booking"


def test_a_stopped_relay_board_alarms_within_two_ticks_and_other_zones_still_switch(worker, board):
    with RelayBoard(coils=8) as other_board:
        lost = f.relay("Barn valve", board, coil=3)
        fine = f.relay("Hall valve", other_board, coil=3)
        f.zone("Barn", lost, temp=16.0)
        hall = f.zone("Hall", fine, temp=16.0)
        tick()
        board.stop()
        now = timezone.now()
        Booking.objects.create(zone=hall, title="Yoga", start=now, end=now + timedelta(hours=1))
        tick()
        tick()
        assert other_board.coil(3) is True  # the other zone was served
        alarm = Alarm.objects.get(key=f"relay:{lost.pk}", cleared_at__isnull=True)
        assert "Barn valve" in alarm.message and "did not confirm" in alarm.message
        # Each tick's report came back within tick()'s wait: the dead board did not hang it
        # (the per-device deadline, 3 s; how fast is bench/control.py's question).
        assert runtime.load_last_tick()["faults"] == 1


def test_a_valve_removed_from_its_zone_is_released_to_its_idle_state(worker, board):
    """It stayed ON, unread, with the old booking as its reason."""
    valve = f.relay("Hall valve", board, coil=9)
    zone = f.zone("Hall", valve, temp=16.0)
    now = timezone.now()
    Booking.objects.create(zone=zone, title="Yoga", start=now, end=now + timedelta(hours=1))
    tick()
    assert board.coil(9) is True
    zone.actuators.remove(valve)
    tick()
    assert board.coil(9) is False
    state = runtime.load_actuators([valve.pk])[valve.pk]
    assert state.reason == "Released from zone 'Hall': idle state OFF" and state.confirmed
    assert state.owner == "" and state.released_from == "zone 'Hall'"
    board.set_coil(9, True)  # switched by hand: still read back and put back
    assert tick()["corrected"] == 1 and board.coil(9) is False
