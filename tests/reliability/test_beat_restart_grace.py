"""A planned restart is not a critical alarm (#28): "Celery beat is not alive" was raised, and
e-mailed, for a minute after every ordinary restart. Beat marks its planned stop; the process
watching beat gives a grace after its own start. Past the grace a beat that has not come back
is raised as before. Time is given as `now=` (the watcher's start moved by monkeypatch)."""

from __future__ import annotations

import time

import pytest

from alarms import lifecycle, watchdog
from alarms.heartbeat import BEAT_HEARTBEAT_KEY, BEAT_STOPPED_KEY
from alarms.models import Alarm

pytestmark = pytest.mark.django_db

T0 = 1_800_000_000.0


@pytest.fixture
def grace(settings, monkeypatch):
    settings.BMS_ALARM_BEAT_STALE_S = 120
    settings.BMS_ALARM_STARTUP_GRACE = 120
    monkeypatch.setattr(lifecycle, "PROCESS_STARTED_AT", T0 - 3600)  # a watcher up for an hour
    return 120


def beat_alarm_open() -> bool:
    return Alarm.objects.open().filter(key=watchdog.BEAT_ALARM).exists()


def test_a_beat_that_stopped_for_a_restart_is_not_alarmed_within_the_grace(redis_client, grace):
    redis_client.set(BEAT_STOPPED_KEY, T0)  # beat stopped on SIGTERM; no heartbeat since
    result = watchdog.check_beat(T0 + grace - 1)
    assert result["held"] == "beat stopped for a restart"
    assert not beat_alarm_open()
    redis_client.set(BEAT_HEARTBEAT_KEY, int(T0 + grace))  # back
    watchdog.check_beat(T0 + grace + 1)
    assert not beat_alarm_open()


def test_a_beat_that_stopped_and_did_not_come_back_is_raised_after_the_grace(redis_client, grace):
    redis_client.set(BEAT_STOPPED_KEY, T0)
    watchdog.check_beat(T0 + grace + 1)
    alarm = Alarm.objects.open().get(key=watchdog.BEAT_ALARM)
    assert alarm.severity == Alarm.Severity.CRITICAL
    assert "stopped for a restart 121 s ago and has not come back" in alarm.message


def test_a_beat_that_died_without_a_word_is_raised_at_once(redis_client, grace):
    redis_client.set(BEAT_HEARTBEAT_KEY, int(T0 - 200))
    watchdog.check_beat(T0)
    assert "last heartbeat 200 s ago" in Alarm.objects.open().get(key=watchdog.BEAT_ALARM).message


def test_the_watcher_just_restarted_waits_the_grace_before_judging_beat(
    redis_client, grace, monkeypatch
):
    monkeypatch.setattr(lifecycle, "PROCESS_STARTED_AT", T0)  # the whole site restarted
    assert watchdog.check_beat(T0 + 60)["held"] == "this process just started"
    assert not beat_alarm_open()
    watchdog.check_beat(T0 + grace + 1)
    assert beat_alarm_open()


def test_an_alarm_open_before_the_restart_stays_open(redis_client, grace, monkeypatch):
    watchdog.check_beat(T0)
    assert beat_alarm_open()
    monkeypatch.setattr(lifecycle, "PROCESS_STARTED_AT", T0 + 10)
    watchdog.check_beat(T0 + 20)
    assert beat_alarm_open()


def test_a_stop_marker_from_the_future_is_no_grace(redis_client, grace):
    """A clock set back must not hold the alarm for ever."""
    redis_client.set(BEAT_STOPPED_KEY, T0 + 10_000)
    watchdog.check_beat(T0)
    assert beat_alarm_open()


@pytest.mark.integration
def test_a_real_beat_marks_a_planned_stop_and_a_killed_one_does_not(fault_site):
    from tests.wait import wait_for

    client = fault_site.redis.client()
    fault_site.start_beat("beat")
    wait_for(lambda: client.get(BEAT_HEARTBEAT_KEY) is not None, 60, "beat's first heartbeat")
    before = time.time()
    fault_site.stop("beat")  # SIGTERM: a planned restart
    stopped = client.get(BEAT_STOPPED_KEY)
    assert stopped is not None and float(stopped) >= before - 1
    assert client.ttl(BEAT_STOPPED_KEY) > 0  # it expires: an old restart excuses nothing

    client.delete(BEAT_STOPPED_KEY, BEAT_HEARTBEAT_KEY)
    fault_site.start_beat("beat2")
    wait_for(lambda: client.get(BEAT_HEARTBEAT_KEY) is not None, 60, "beat's first heartbeat")
    fault_site.kill("beat2")  # a death, not a restart
    assert client.get(BEAT_STOPPED_KEY) is None
