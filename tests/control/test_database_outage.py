"""Control while the database is unavailable: the tick runs on the configuration
cached in Redis by the last tick that could read the database, switches a real pymodbus relay
for frost protection, says so in every reason, and writes its audit rows and its alarm once the
database is back.

On SQLite the outage is real: the connection is closed and the database file replaced by a
directory, so every new connection fails with "unable to open database file" (as in
tests/reliability/test_database_outage.py). On PostgreSQL every query is refused with an
OperationalError through Django's execute_wrapper hook, the same error a lost server gives.
"""

from __future__ import annotations

import contextlib
from datetime import time as dtime
from datetime import timedelta

import pytest
from django.db import OperationalError, connection
from django.utils import timezone

from alarms.models import Alarm
from control import config_cache
from control import snapshot as snapshot_builder
from control.drivers.simulated_board import RelayBoard
from control.models import (
    ActuatorCommand,
    Booking,
    HeatingPlant,
    Override,
    Schedule,
    ScheduleException,
    SchedulePeriod,
)
from control.runner import run_tick
from tests.sqlite_away import sqlite_file_away

from . import factories as f

pytestmark = pytest.mark.django_db(transaction=True)

OFFLINE = "database unavailable: using configuration cached at"


@contextlib.contextmanager
def database_unavailable():
    if connection.vendor == "sqlite":
        with sqlite_file_away():
            yield
        return

    def refuse(*_args):
        raise OperationalError("server closed the connection unexpectedly (test outage)")

    with connection.execute_wrapper(refuse):
        yield


@pytest.fixture
def board():
    with RelayBoard(coils=8) as b:
        yield b


def test_the_configuration_survives_a_round_trip_through_redis(redis_client, board):
    boiler = f.relay("Boiler", board, coil=0, kind="boiler")
    pump = f.relay("Pump", board, coil=1, kind="pump")
    valve = f.relay("Hall valve", board, coil=2)
    schedule = Schedule.objects.create(name="Office")
    SchedulePeriod.objects.create(
        schedule=schedule, weekday=2, start=dtime(8), end=dtime(17), setpoint=21.0
    )
    now = timezone.now()
    ScheduleException.objects.create(
        schedule=schedule, date=now.date(), occupied=True, start=dtime(18), end=dtime(20)
    )
    zone = f.zone("Hall", valve, temp=18.5, schedule=schedule)
    Booking.objects.create(
        zone=zone, title="Yoga", start=now + timedelta(hours=2), end=now + timedelta(hours=3)
    )
    Override.objects.create(
        actuator=pump, state=True, starts=now, expires=now + timedelta(hours=1), reason="test"
    )
    plant = HeatingPlant.objects.create(name="Plant", boiler=boiler, pump=pump)
    plant.zones.set([zone])

    live = snapshot_builder.build(now)
    config_cache.save(config_cache.config_of(live.snapshot, live.actuators, live.feeds))
    rebuilt = config_cache.rebuild(config_cache.load(), now)

    assert rebuilt.snapshot == live.snapshot
    assert rebuilt.snapshot.zones[0].bookings[0].title == "Yoga"
    assert rebuilt.snapshot.zones[0].schedule.exceptions[0].start == dtime(18)
    assert rebuilt.snapshot.actuators[pump.pk].override.state is True
    for aid, row in live.actuators.items():
        copy = rebuilt.actuators[aid]
        assert (copy.pk, copy.host, copy.port, copy.coil, copy.driver) == (
            row.pk,
            row.host,
            row.port,
            row.coil,
            row.driver,
        )


def test_a_cache_written_in_another_format_is_not_read(redis_client):
    """A copy left by the version before the mapper (plain dicts, no format) is not mistaken
    for specs: the tick reports no cache, as before its first tick, until it writes its own."""
    old = {"cached_at": timezone.now(), "time_zone": "Europe/London", "zones": [{"id": 1}]}
    redis_client.set(config_cache.CONFIG_KEY, config_cache.dumps(old))
    assert config_cache.load() is None


def test_frost_protection_runs_on_the_cached_config_and_is_audited_afterwards(redis_client, board):
    valve = f.relay("Hall valve", board, coil=3)
    zone = f.zone("Hall", valve, temp=15.0)
    assert run_tick()["changes"] == 1  # the first OFF; the configuration is now cached
    assert board.coil(3) is False
    f.set_temperature(zone, 3.5)  # readings live in Redis: still seen during the outage

    with database_unavailable():
        report = run_tick()
        assert report["offline"].startswith(OFFLINE)
        assert report["changes"] == 1 and report["faults"] == 0
        assert board.coil(3) is True  # switched and read back from the real board
        assert config_cache.outage()["ticks"] == 1
        assert len(config_cache.pending_audit()) == 1
        assert "control-db:unavailable" in config_cache.pending_alarms()

    report = run_tick()  # the database is back
    assert "offline" not in report
    assert config_cache.pending_audit() == [] and config_cache.outage() is None
    frost = ActuatorCommand.objects.filter(actuator=valve, state=True).get()
    assert frost.reason.startswith(f"[{OFFLINE} ") and "rost" in frost.reason
    assert frost.strategy == "frost_protection"
    assert frost.sent_at is not None and frost.confirmed_at is not None and frost.error == ""
    alarm = Alarm.objects.get(key="control-db:unavailable")
    assert "cached at" in alarm.message and alarm.cleared_at is not None
    assert ActuatorCommand.objects.filter(actuator=valve).count() == 2


def test_a_cached_booking_still_heats_during_the_outage(redis_client, board):
    valve = f.relay("Hall valve", board, coil=4)
    zone = f.zone("Hall", valve, temp=15.0)
    now = timezone.now()
    Booking.objects.create(
        zone=zone, title="Choir", start=now + timedelta(minutes=1), end=now + timedelta(hours=2)
    )
    run_tick(now - timedelta(minutes=200))  # before any pre-heat: OFF, configuration cached
    with database_unavailable():
        report = run_tick(now + timedelta(minutes=5))
    assert report["offline"].startswith(OFFLINE)
    assert board.coil(4) is True
    run_tick(now + timedelta(minutes=6))
    on = ActuatorCommand.objects.get(actuator=valve, state=True)
    assert "Booking 'Choir'" in on.reason and on.reason.startswith(f"[{OFFLINE}")


def test_without_a_cached_config_nothing_is_switched_and_it_is_flagged(redis_client, board):
    valve = f.relay("Hall valve", board, coil=5)
    f.zone("Hall", valve, temp=3.0)  # frost, but the tick cannot know
    board.set_coil(5, True)
    with database_unavailable():
        report = run_tick()
        assert report["skipped"] == "database unavailable, no cached config"
        assert board.coil(5) is True  # left exactly as it was
        assert "control-db:no-cache" in config_cache.pending_alarms()
    run_tick()  # back: raised (emailed) and closed, and control resumes
    alarm = Alarm.objects.get(key="control-db:no-cache")
    assert "no relay is being switched" in alarm.message and alarm.cleared_at is not None
    assert ActuatorCommand.objects.get(actuator=valve).strategy == "frost_protection"


# --- analogue outputs: their audit rows wait in Redis as the relays' do --


def _weather_plant(board, output: str = "register", **weather):
    from control.models import WeatherCompensation

    boiler = f.relay("Boiler", board, coil=0, kind="boiler")
    valve = f.relay("Hall valve", board, coil=1)
    zone = f.zone("Hall", valve, temp=15.0, setback_setpoint=20.0)
    outside, flow = f.temperature_sensor("outside"), f.temperature_sensor("flow")
    now = int(timezone.now().timestamp())
    from feeds.store import service as feed_service

    feed_service.log_points([(outside.feed_id, now, 0.0), (flow.feed_id, now, 40.0)])
    plant = HeatingPlant.objects.create(
        name="Boiler house", boiler=boiler, outside_sensor=outside, flow_sensor=flow,
        frost_outside_c=-5.0, has_bypass=True,
    )  # fmt: skip
    plant.zones.add(zone)
    wc = WeatherCompensation(plant=plant, kp=5.0, ti_s=100.0, output=output, **weather)
    wc.full_clean()
    wc.save()
    return plant


def test_an_analogue_output_held_during_an_outage_is_audited_once_the_database_is_back(
    redis_client, board, engineer
):
    from control.models import AnalogueCommand, OutputOverride

    plant = _weather_plant(
        board, register_host=board.host, register_port=board.port, register_address=7
    )
    now = timezone.now()
    held = OutputOverride.objects.create(
        plant=plant, value=30.0, starts=now, expires=now + timedelta(minutes=10),
        reason="Pump swap", created_by=engineer,
    )  # fmt: skip
    run_tick(now)  # caches the configuration, override included
    assert board.register(7) == 3000
    assert AnalogueCommand.objects.count() == 1

    with database_unavailable():
        # Still held from the cached configuration: unchanged, so no row.
        run_tick(now + timedelta(minutes=1))
        assert config_cache.pending_analogue() == []
        # It ends by itself at its expiry, database or not: back to the curve's PI output.
        report = run_tick(now + timedelta(minutes=11))
        assert report["offline"].startswith(OFFLINE)
        assert board.register(7) != 3000
        queued = config_cache.pending_analogue()
        assert len(queued) == 1 and queued[0]["strategy"] == "weather_compensation"

    run_tick(now + timedelta(minutes=12))  # back: the queued row is written
    assert config_cache.pending_analogue() == []
    rows = list(AnalogueCommand.objects.filter(plant=plant).order_by("requested_at"))
    # The held value, then the curve's value written during the outage (and whatever the
    # loop wrote since the database came back).
    assert [r.strategy for r in rows[:2]] == ["manual_override", "weather_compensation"]
    assert rows[0].user == engineer and "Pump swap" in rows[0].reason
    back = rows[1]
    assert back.reason.startswith(f"[{OFFLINE}")
    assert back.raw not in (None, 3000) and back.sent_at is not None
    assert back.confirmed_at is not None and back.error == ""
    assert not OutputOverride.objects.get(pk=held.pk).cancelled  # expired, not cancelled


def test_a_valve_pulse_during_an_outage_is_audited_once_the_database_is_back(redis_client, board):
    opener = f.relay("Mix open", board, coil=2, kind="relay")
    closer = f.relay("Mix close", board, coil=3, kind="relay")
    plant = _weather_plant(board, output="three_point", open_actuator=opener,
                           close_actuator=closer, run_time_s=10.0, min_pulse_s=0.5)  # fmt: skip
    hall = plant.zones.get()
    f.set_temperature(hall, 25.0)  # no demand: the valve is driven closed (10 s, end resync)
    now = timezone.now()
    run_tick(now)
    assert ActuatorCommand.objects.filter(actuator=closer, state=True).count() == 1
    f.set_temperature(hall, 15.0)  # demand: PI 65 %, an open pulse of 6.5 s
    with database_unavailable():
        report = run_tick(now + timedelta(seconds=30))
        assert report["offline"].startswith(OFFLINE) and report["pulses"] == 1
    assert not ActuatorCommand.objects.filter(actuator=opener, state=True).exists()
    # The next tick collects the pulse (it has ended) and writes its row with what the relays
    # answered; had the database still been away, the row would wait in Redis.
    run_tick(now + timedelta(seconds=60))
    # (That tick may start a pulse of its own: the loop goes on.)
    row = ActuatorCommand.objects.get(actuator=opener, state=True, reason__contains=OFFLINE)
    assert row.reason.startswith(f"Pulse 6.5 s: [{OFFLINE}")
    assert row.sent_at is not None and row.confirmed_at is not None and row.error == ""
    assert config_cache.pending_audit() == []


def test_a_queued_output_row_of_a_deleted_plant_does_not_block_the_queue(redis_client, board):
    from control.models import AnalogueCommand

    plant = _weather_plant(
        board, register_host=board.host, register_port=board.port, register_address=7
    )
    now = timezone.now()
    config_cache.queue_analogue([
        AnalogueCommand(plant_id=plant.pk + 1000, value=1, unit="%", reason="gone", requested_at=now),
        AnalogueCommand(plant_id=plant.pk, value=2, unit="%", reason="kept", requested_at=now),
    ])  # fmt: skip
    run_tick(now)
    assert config_cache.pending_analogue() == []
    assert AnalogueCommand.objects.filter(reason="kept").count() == 1
    assert not AnalogueCommand.objects.filter(reason="gone").exists()
    run_tick(now + timedelta(seconds=30))  # the queue stays clear; alarms and outage close too
    assert config_cache.pending_analogue() == []
