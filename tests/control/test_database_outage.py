"""Control while the database is unavailable (issue #8): the tick runs on the configuration
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
import os
from datetime import time as dtime
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import OperationalError, connection
from django.utils import timezone

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
from sensors.models import Alarm

from . import factories as f

pytestmark = pytest.mark.django_db(transaction=True)

OFFLINE = "database unavailable: using configuration cached at"


@contextlib.contextmanager
def database_unavailable():
    if connection.vendor == "sqlite":
        db_file = Path(connection.settings_dict["NAME"])
        away = db_file.with_name(db_file.name + ".away")
        connection.close()
        os.rename(db_file, away)
        db_file.mkdir()
        try:
            yield
        finally:
            connection.close()
            db_file.rmdir()
            os.rename(away, db_file)
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
