"""Beat as a thread of the ingest worker (BMS_BEAT_THREAD=1, scripts/run-site.sh's small box,
bms/celery.py BeatThread): that worker's beat sends the control ticks and stamps the beat
heartbeat as a beat process does; a worker without the setting runs no beat."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from alarms.heartbeat import BEAT_HEARTBEAT_KEY
from control.drivers.simulated_board import RelayBoard
from control.models import Booking
from tests.conftest import running_worker, test_database_url
from tests.control import factories as f
from tests.wait import wait_for

pytestmark = [pytest.mark.integration]


def booked_hall(board: RelayBoard):
    valve = f.relay("Hall valve", board, coil=4)
    zone = f.zone("Hall", valve, temp=16.0)
    now = timezone.now()
    Booking.objects.create(zone=zone, title="Yoga", start=now, end=now + timedelta(hours=1))
    return zone


def test_the_ingest_workers_beat_thread_ticks_control_and_stamps_the_heartbeat(
    transactional_db, redis_client, monkeypatch
):
    monkeypatch.setenv("BMS_BEAT_THREAD", "1")
    monkeypatch.setenv("BMS_CONTROL_TICK", "1")
    with (
        RelayBoard(coils=8) as board,
        running_worker("ingest,commit,control", "beat-thread", test_database_url()),
    ):
        zone = booked_hall(board)

        def switched_on() -> bool:
            f.set_temperature(zone, 16.0)  # a fresh reading for each tick beat sends
            return board.coil(4)

        wait_for(switched_on, 30, "the beat thread's ticks to switch the valve on", every_s=0.25)
        assert redis_client.get(BEAT_HEARTBEAT_KEY) is not None


def test_a_worker_without_the_setting_runs_no_beat(transactional_db, redis_client, monkeypatch):
    monkeypatch.delenv("BMS_BEAT_THREAD", raising=False)
    monkeypatch.setenv("BMS_CONTROL_TICK", "1")
    with (
        RelayBoard(coils=8) as board,
        running_worker("ingest,commit,control", "no-beat", test_database_url()),
    ):
        zone = booked_hall(board)
        # Three tick periods: a beat would have ticked (the test above: within one or two).
        for _ in range(12):
            f.set_temperature(zone, 16.0)
            time.sleep(0.25)
        assert not board.coil(4)
        assert redis_client.get(BEAT_HEARTBEAT_KEY) is None
