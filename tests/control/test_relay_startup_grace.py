"""Start-up grace for relays: a relay board that does not answer in the first
BMS_ALARM_STARTUP_GRACE seconds after the control worker started is shown as a fault at once,
but alarmed (and emailed) only if it still does not answer after the grace. Time is given as
now=, measured from alarms.lifecycle.PROCESS_STARTED_AT, never slept."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from alarms.lifecycle import PROCESS_STARTED_AT
from alarms.models import Alarm
from alarms.tasks import send_alarm_digest
from control import runner
from control.drivers.simulated_board import RelayBoard
from control.runner import run_tick

from . import factories as f

pytestmark = pytest.mark.django_db


def at(offset_s: float) -> datetime:
    return datetime.fromtimestamp(PROCESS_STARTED_AT + offset_s, UTC)


@pytest.fixture
def dead_board(redis_client, settings, monkeypatch):
    settings.BMS_ALARM_STARTUP_GRACE = 120
    settings.BMS_CONTROL_DEVICE_DEADLINE = 1.0
    monkeypatch.setattr(runner, "_judged_since_start", False)  # as in a freshly started worker
    with RelayBoard(coils=8) as board:
        valve = f.relay("Hall valve", board, coil=2)
        f.zone("Hall", valve, temp=4.0)  # frost: wants ON
        board.stop()
        yield board, valve


def test_a_board_still_dead_after_the_grace_is_alarmed_once(dead_board, mailoutbox, settings):
    settings.BMS_ALARM_EMAILS = ["estates@example.org"]
    board, valve = dead_board
    report = run_tick(at(5))
    assert report["faults"] == 1  # the fault is known (status page) ...
    assert not Alarm.objects.exists() and mailoutbox == []  # ... but not alarmed yet
    run_tick(at(60))
    assert not Alarm.objects.exists()
    run_tick(at(125))  # grace over, still no answer: now it is an alarm
    alarm = Alarm.objects.get(key=f"relay:{valve.pk}", cleared_at__isnull=True)
    assert "did not confirm ON" in alarm.message
    # The zone, calling for frost protection through its only valve, cannot take heat: its own
    # alarm, under the same grace.
    assert Alarm.objects.filter(key__startswith="zone-valves:", cleared_at__isnull=True).exists()
    run_tick(at(185))
    assert Alarm.objects.count() == 2 and mailoutbox == []  # each once; mail is the digest's
    assert send_alarm_digest() == 2 and len(mailoutbox) == 1


def test_a_board_that_answers_within_the_grace_never_alarms(dead_board):
    board, _valve = dead_board
    run_tick(at(5))
    board.start()  # the board (or its simulator) came up a little after the worker
    run_tick(at(60))
    run_tick(at(125))
    assert board.coil(2) is True
    assert not Alarm.objects.exists()


def test_grace_zero_alarms_on_the_first_tick(dead_board, settings):
    settings.BMS_ALARM_STARTUP_GRACE = 0
    _board, valve = dead_board
    run_tick(at(5))
    assert Alarm.objects.filter(key=f"relay:{valve.pk}", cleared_at__isnull=True).exists()


def test_a_sensor_with_no_reading_yet_is_alarmed_only_after_the_grace(redis_client, settings):
    """Right after a restart a sensor may not have posted yet (the demo's heat-main flow sensor
    raised a critical alarm 6 s after every restart): the tick uses its fallback at once, the
    alarm waits for the grace, and one still without a reading after it is alarmed."""
    settings.BMS_ALARM_STARTUP_GRACE = 120
    with RelayBoard(coils=8) as board:
        valve = f.relay("Hall valve", board, coil=2)
        f.zone("Hall", valve)  # its sensor has never posted
        run_tick(at(5))
        run_tick(at(60))
        assert not Alarm.objects.filter(key__startswith="zone-sensor:").exists()
        run_tick(at(125))
        alarm = Alarm.objects.get(key__startswith="zone-sensor:", cleared_at__isnull=True)
        assert "No reading" in alarm.message
