"""Celery beat itself drives the control tick: with BMS_CONTROL_TICK=1 a booking made now
switches its relay without anyone sending a task."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta

import pytest
from django.utils import timezone

from control.drivers.simulated_board import RelayBoard
from control.models import ActuatorCommand, Booking
from tests.conftest import ROOT, test_database_url
from tests.control import factories as f
from tests.processes import stop_process
from tests.wait import wait_for

pytestmark = [pytest.mark.integration]


@pytest.fixture
def beat(transactional_db, celery_worker, redis_client, tmp_path):
    env = dict(
        os.environ,
        DATABASE_URL=test_database_url(),
        DJANGO_SETTINGS_MODULE="bms.settings_test",
        BMS_CONTROL_TICK="1",
    )
    log = open(tmp_path / "beat.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "bms", "beat", "-l", "INFO",
         "-s", str(tmp_path / "beat-schedule"), "--pidfile="],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        yield proc
    finally:
        stop_process(proc, timeout_s=10)
        log.close()


def test_beat_ticks_switch_a_booked_room_on(beat):
    with RelayBoard(coils=8) as board:
        valve = f.relay("Hall valve", board, coil=4)
        zone = f.zone("Hall", valve, temp=16.0)
        now = timezone.now()
        Booking.objects.create(zone=zone, title="Yoga", start=now, end=now + timedelta(hours=1))

        def switched_on() -> bool:
            f.set_temperature(zone, 16.0)  # a fresh reading for each tick beat sends
            return board.coil(4)

        wait_for(switched_on, 30, "beat's ticks to switch the booked room's valve on", every_s=0.25)
        assert ActuatorCommand.objects.get(actuator=valve).strategy == "booking"
