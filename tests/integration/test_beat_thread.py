"""Beat as a thread of the ingest worker (BMS_BEAT_THREAD=1, scripts/run-site.sh's small box,
bms/celery.py BeatThread): that worker's beat sends the control ticks and stamps the beat
heartbeat as a beat process does; a worker without the setting does not include the step."""

from __future__ import annotations

from datetime import timedelta
from types import SimpleNamespace

import pytest
from django.utils import timezone

from alarms.heartbeat import BEAT_HEARTBEAT_KEY
from bms.celery import BeatThread, app
from control.drivers.simulated_board import RelayBoard
from control.models import Booking
from tests.conftest import running_worker, test_database_url
from tests.control import factories as f
from tests.wait import wait_for


def booked_hall(board: RelayBoard):
    valve = f.relay("Hall valve", board, coil=4)
    zone = f.zone("Hall", valve, temp=16.0)
    now = timezone.now()
    Booking.objects.create(zone=zone, title="Yoga", start=now, end=now + timedelta(hours=1))
    return zone


@pytest.mark.integration
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


@pytest.mark.parametrize(("setting", "runs"), [(None, False), ("0", False), ("1", True)])
def test_only_a_worker_given_the_setting_includes_the_beat_step(monkeypatch, setting, runs):
    # The step's own switch, as Celery asks it (a conditional bootstep runs only when
    # include_if is true): waiting on a worker for a tick that must not come proves only
    # that none came in the time waited.
    if setting is None:
        monkeypatch.delenv("BMS_BEAT_THREAD", raising=False)
    else:
        monkeypatch.setenv("BMS_BEAT_THREAD", setting)
    worker = SimpleNamespace(steps=[])
    assert BeatThread(worker).include_if(worker) is runs
    assert BeatThread in app.steps["worker"]
