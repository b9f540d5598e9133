"""/healthz with a real Celery worker that consumes only `ingest,commit`: the control worker is
dead, and /healthz says so (issue #27 item 4: it answered 200 `worker: ok`, since it pinged for
any worker). Its own module: the all-queue worker of tests/conftest.py must not run beside it."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from alarms import watchdog
from alarms.heartbeat import BEAT_HEARTBEAT_KEY
from alarms.models import Alarm
from bms import health
from control import runtime
from tests.conftest import running_worker, test_database_url

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def ingest_commit_worker(django_db_setup, django_db_blocker):
    with django_db_blocker.unblock():
        db_url = test_database_url()
    with running_worker("ingest,commit", "no-control", db_url) as worker:
        yield worker


@pytest.fixture
def alive_otherwise(redis_client):
    """Beat and the control tick fresh: only the worker check can fail."""
    health.forget()
    redis_client.set(BEAT_HEARTBEAT_KEY, int(time.time()))
    runtime.save_last_tick({"at": datetime.now(UTC).isoformat(), "zones": 0})
    yield
    health.forget()


def test_staff_see_the_control_queue_named_without_a_consumer(
    client, ingest_commit_worker, alive_otherwise, engineer
):
    client.force_login(engineer)
    response = client.get("/healthz")
    assert response.status_code == 503
    worker = response.json()["checks"]["worker"]
    assert worker["ok"] is False
    assert worker["no_consumer"] == ["control"]
    assert worker["consumers"]["control"] == []
    assert worker["consumers"]["ingest"] == worker["consumers"]["commit"] == worker["workers"]
    others = {k: v["ok"] for k, v in response.json()["checks"].items() if k != "worker"}
    assert all(others.values()), others


def test_the_public_answer_fails_the_worker_part_without_names(
    client, ingest_commit_worker, alive_otherwise
):
    response = client.get("/healthz", REMOTE_ADDR="192.0.2.10")
    assert response.status_code == 503
    assert response.json()["checks"]["worker"] == {"ok": False}
    assert "no-control" not in response.content.decode()


def test_with_feed_shards_each_shard_queue_needs_its_worker(
    client, ingest_commit_worker, alive_otherwise, engineer, settings
):
    settings.BMS_FEED_SHARDS = 2
    client.force_login(engineer)
    worker = client.get("/healthz").json()["checks"]["worker"]
    assert worker["no_consumer"] == ["control", "commit-0", "commit-1"]


def test_the_watchdog_gives_the_same_answer_and_raises_its_alarm(
    ingest_commit_worker, alive_otherwise
):
    consumers = watchdog.queue_consumers(timeout_s=1.0)
    assert watchdog.unserved_queues(consumers) == ["control"]
    assert watchdog.check_workers() == {"checked": True, "missing": ["control"]}
    assert Alarm.objects.filter(key="celery-worker:control", cleared_at__isnull=True).exists()
