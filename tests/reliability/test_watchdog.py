"""The system watchdog's alarms: commit backlog, data disk, a queue without a worker, beat not
alive. Each is raised once, emailed, shown on the staff overview, cleared by itself."""

from __future__ import annotations

import time

import pytest
from django.core import mail

from alarms import watchdog
from alarms.heartbeat import BEAT_HEARTBEAT_KEY
from alarms.models import Alarm
from alarms.tasks import send_alarm_digest, system_watchdog
from feeds.models import Feed
from feeds.store import service

pytestmark = pytest.mark.django_db


def open_keys() -> set[str]:
    return set(Alarm.objects.filter(cleared_at__isnull=True).values_list("key", flat=True))


def buffer_points(n: int) -> Feed:
    feed = Feed.objects.create(name=f"f{n}", interval=10)
    t0 = int(time.time()) // 10 * 10 - 10 * n
    service.log_points([(feed.pk, t0 + 10 * i, float(i)) for i in range(n)])
    return feed


def test_a_stuck_backlog_is_raised_once_after_its_age_and_cleared_by_a_commit(
    redis_client, settings
):
    settings.BMS_ALARM_EMAILS = ["estates@example.org"]
    settings.BMS_ALARM_BACKLOG_AGE_S = 180
    buffer_points(100)
    now = time.time()
    assert watchdog.check_backlog(now) == {"points": 100, "feeds": 1, "stuck_s": 0.0}
    watchdog.check_backlog(now + 120)
    assert watchdog.BACKLOG_ALARM not in open_keys()  # younger than the threshold
    for later in (200, 260, 320):
        report = watchdog.check_backlog(now + later)
    assert report["stuck_s"] == 320
    assert Alarm.objects.filter(key=watchdog.BACKLOG_ALARM).count() == 1
    assert send_alarm_digest() == 1  # e-mailed by beat's digest, not by the watchdog
    assert len(mail.outbox) == 1 and "not keeping up" in mail.outbox[0].subject
    service.commit_all()
    assert watchdog.check_backlog(now + 380)["points"] == 0
    assert watchdog.BACKLOG_ALARM not in open_keys()


def test_a_moving_backlog_is_not_stuck(redis_client, settings):
    """Commits trim from the front: a buffer whose head changes is being committed."""
    settings.BMS_ALARM_BACKLOG_AGE_S = 60
    feed = buffer_points(10)
    now = time.time()
    watchdog.check_backlog(now)
    service.commit_all()
    t = int(time.time()) // 10 * 10
    service.log_points([(feed.pk, t, 1.0)])  # new points keep arriving, old ones committed
    assert watchdog.check_backlog(now + 100)["stuck_s"] == 0
    assert watchdog.BACKLOG_ALARM not in open_keys()


def test_too_many_points_waiting_raise_the_backlog_alarm_at_once(redis_client, settings):
    settings.BMS_ALARM_BACKLOG_POINTS = 500
    buffer_points(600)
    watchdog.check_backlog()
    assert watchdog.BACKLOG_ALARM in open_keys()


def test_disk_threshold_raises_once_and_clears_with_a_margin(settings):
    settings.BMS_ALARM_DISK_FREE_PCT = 101  # any disk is "nearly full" against this
    assert watchdog.check_disk()["ok"] is False
    watchdog.check_disk()
    assert Alarm.objects.filter(key=watchdog.DISK_ALARM, cleared_at__isnull=True).count() == 1
    settings.BMS_ALARM_DISK_FREE_PCT = 0
    assert watchdog.check_disk()["ok"] is True
    assert watchdog.DISK_ALARM not in open_keys()


def test_a_queue_without_a_worker_is_raised_per_queue_and_cleared(settings, redis_client):
    settings.BMS_ALARM_EMAILS = ["estates@example.org"]
    assert watchdog.check_workers({"ingest", "commit"})["missing"] == ["control"]
    watchdog.check_workers({"ingest", "commit"})
    assert open_keys() == {"celery-worker:control"}
    send_alarm_digest()
    assert "relays are not being switched" in mail.outbox[0].body
    assert len(mail.outbox) == 1
    watchdog.check_workers({"ingest", "commit", "control"})
    assert not open_keys()


def test_each_feed_shards_commit_queue_needs_a_worker(settings):
    settings.BMS_FEED_SHARDS = 2
    served = {"ingest", "commit", "control", "commit-0"}
    assert watchdog.check_workers(served)["missing"] == ["commit-1"]
    assert open_keys() == {"celery-worker:commit-1"}
    watchdog.check_workers(served | {"commit-1"})
    assert not open_keys()


def test_beat_missing_or_stale_is_raised_and_a_fresh_stamp_clears_it(redis_client, settings):
    settings.BMS_ALARM_BEAT_STALE_S = 120
    now = time.time()
    watchdog.check_beat(now)
    assert "no heartbeat" in Alarm.objects.get(key=watchdog.BEAT_ALARM).message
    redis_client.set(BEAT_HEARTBEAT_KEY, int(now))
    watchdog.check_beat(now + 5)
    assert not open_keys()
    watchdog.check_beat(now + 200)
    assert "last heartbeat 200 s ago" in Alarm.objects.get(cleared_at__isnull=True).message


def test_system_alarms_are_on_the_staff_overview(redis_client, settings, engineer, client):
    settings.BMS_ALARM_DISK_FREE_PCT = 101
    watchdog.check_disk()
    client.force_login(engineer)
    page = client.get("/staff/").content.decode()
    assert "Data disk nearly full" in page


def test_the_task_runs_every_check_and_survives_one_failing(redis_client, settings):
    settings.BMS_ALARM_DISK_FREE_PCT = 0
    settings.BMS_FEED_DIR = "/nonexistent/feeds"  # the disk check fails; the others still run
    result = system_watchdog.apply().get()
    # not "workers": beat's thread checks them; on the control worker its 2 s inspect wait
    # delayed a control tick once a minute (tests/reliability/test_multihost.py found it)
    assert set(result) == {"backlog", "disk", "beat", "refused", "removed"}
    assert "error" in result["disk"] and "points" in result["backlog"]
    assert "celery-beat" in open_keys()  # no beat in this test


def test_the_watchdog_runs_every_minute_on_the_control_queue(settings):
    entry = settings.CELERY_BEAT_SCHEDULE["system-watchdog"]
    assert entry == {"task": "alarms.tasks.system_watchdog", "schedule": 60.0}
    from bms.celery import app

    assert app.amqp.router.route({}, "alarms.tasks.system_watchdog")["queue"].name == "control"
