"""/healthz against the real Redis and database; a closed port means Redis is reported down.
A worker that consumes only some of the required queues: tests/foundation/test_healthz_queues.py."""

import socket
import time
from datetime import UTC, datetime

import pytest

from alarms.heartbeat import BEAT_HEARTBEAT_KEY
from bms import health
from control import runtime


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the socket goes


@pytest.mark.django_db
def test_reports_redis_down_on_a_closed_port_with_503(client, settings, viewer):
    client.force_login(viewer)  # the details are for staff
    settings.REDIS_URL = f"redis://127.0.0.1:{_closed_port()}/0"
    response = client.get("/healthz")
    assert response.status_code == 503
    body = response.json()
    assert body["ok"] is False
    assert body["checks"]["redis"]["ok"] is False
    assert "Connection" in body["checks"]["redis"]["error"]
    assert body["checks"]["database"]["ok"] is True
    assert body["checks"]["data_dir"]["ok"] is True


@pytest.mark.django_db
def test_reports_beat_and_worker_down_when_nothing_runs(client, redis_client):
    body = client.get("/healthz").json()
    assert body["checks"]["redis"]["ok"] is True
    assert body["checks"]["beat"]["ok"] is False


@pytest.mark.django_db
def test_a_fresh_beat_heartbeat_counts_as_alive(client, redis_client):
    import time

    redis_client.set(BEAT_HEARTBEAT_KEY, int(time.time()))
    assert client.get("/healthz").json()["checks"]["beat"]["ok"] is True


@pytest.mark.django_db
def test_unwritable_data_dir_is_reported(client, settings, tmp_path):
    settings.BMS_FEED_DIR = tmp_path / "does-not-exist"
    body = client.get("/healthz").json()
    assert body["checks"]["data_dir"]["ok"] is False


def _ticked(seconds_ago: float, now: float | None = None) -> None:
    """Record a control tick as control/runner.py does, `seconds_ago` before `now`."""
    at = (time.time() if now is None else now) - seconds_ago
    runtime.save_last_tick({"at": datetime.fromtimestamp(at, UTC).isoformat(), "zones": 0})


@pytest.mark.django_db(transaction=True)
def test_all_green_with_a_real_worker_a_real_tick_and_beat_heartbeat(
    client, celery_worker, redis_client, engineer
):
    from control.tasks import control_tick

    client.force_login(engineer)
    redis_client.set(BEAT_HEARTBEAT_KEY, int(time.time()))
    control_tick.delay().get(timeout=60)  # the control worker ticks and records it
    response = client.get("/healthz")
    assert response.status_code == 200, response.json()
    worker = response.json()["checks"]["worker"]
    assert worker["no_consumer"] == []
    assert set(worker["consumers"]) == {"control", "ingest", "commit"}
    assert worker["consumers"]["control"] == worker["workers"]  # the one worker, by name


@pytest.mark.django_db(transaction=True)
def test_a_stale_control_tick_is_a_503_though_every_queue_has_its_worker(
    client, celery_worker, redis_client, engineer, settings
):
    """The control worker consumes its queue but its tick stopped: no relay is switched."""
    client.force_login(engineer)
    redis_client.set(BEAT_HEARTBEAT_KEY, int(time.time()))
    stale_after = 3 * settings.BMS_CONTROL_TICK + health.CONTROL_TICK_GRACE_S
    _ticked(stale_after + 60)
    response = client.get("/healthz")
    assert response.status_code == 503
    checks = response.json()["checks"]
    assert checks["worker"]["ok"] is True
    assert checks["control_tick"]["ok"] is False
    assert checks["control_tick"]["last_tick_s_ago"] > stale_after
    assert [name for name, check in checks.items() if not check["ok"]] == ["control_tick"]


@pytest.mark.django_db
def test_the_tick_is_stale_after_three_ticks_and_the_grace(redis_client, settings):
    settings.BMS_CONTROL_TICK = 30
    now = 1_900_000_000.0
    stale_after = 90 + health.CONTROL_TICK_GRACE_S
    _ticked(stale_after, now)
    assert health.check_control_tick(now) == {
        "ok": True,
        "last_tick_s_ago": stale_after,
        "stale_after_s": stale_after,
    }
    _ticked(stale_after + 1, now)
    assert health.check_control_tick(now)["ok"] is False


@pytest.mark.django_db
def test_no_tick_recorded_is_a_failure(redis_client, settings):
    settings.BMS_CONTROL_TICK = 30
    assert health.check_control_tick(1_900_000_000.0) == {
        "ok": False,
        "error": "no control tick recorded",
        "stale_after_s": 3 * 30 + health.CONTROL_TICK_GRACE_S,
    }


@pytest.mark.django_db
def test_anonymous_callers_see_only_ok_or_fail_per_part(client, settings, tmp_path):
    """Host names, the data path and error texts were shown to anyone."""
    settings.REDIS_URL = f"redis://127.0.0.1:{_closed_port()}/0"
    settings.BMS_FEED_DIR = tmp_path / "does-not-exist"
    response = client.get("/healthz")
    assert response.status_code == 503
    body = response.json()
    assert set(body["checks"]) == {
        "database",
        "redis",
        "worker",
        "control_tick",
        "beat",
        "data_dir",
        "ingest",
    }
    assert all(set(check) == {"ok"} for check in body["checks"].values()), body
    assert body["checks"]["redis"] == {"ok": False}
    assert body["checks"]["data_dir"] == {"ok": False}
    assert body["checks"]["database"] == {"ok": True}
    assert "does-not-exist" not in response.content.decode()
    assert str(settings.BMS_DATA_DIR) not in response.content.decode()


@pytest.mark.django_db
def test_a_user_without_a_role_sees_no_details_and_staff_do(client, settings, viewer):
    from django.contrib.auth.models import User

    settings.REDIS_URL = f"redis://127.0.0.1:{_closed_port()}/0"
    client.force_login(User.objects.create_user("norole", is_staff=True))
    assert client.get("/healthz").json()["checks"]["data_dir"] == {"ok": True}
    client.force_login(viewer)
    checks = client.get("/healthz").json()["checks"]
    assert checks["data_dir"]["path"] == str(settings.BMS_DATA_DIR)
    assert "Connection" in checks["redis"]["error"]


@pytest.mark.django_db
def test_the_ingest_backlog_is_reported_and_fails_above_its_bound(
    client, redis_client, settings, viewer
):
    from sensors.ingest import stream as ingest_stream

    client.force_login(viewer)  # the figures are for staff; anonymous callers see ok/fail

    settings.BMS_INGEST_BACKLOG_ALARM = 2
    for t in range(2):
        ingest_stream.append(5, [[1_700_000_000 + t, {"p": 1.0}]])
    check = client.get("/healthz").json()["checks"]["ingest"]
    assert check == {"ok": True, "waiting": 2, "alarm_above": 2}
    ingest_stream.append(5, [[1_700_000_002, {"p": 1.0}]])
    check = client.get("/healthz").json()["checks"]["ingest"]
    assert check == {"ok": False, "waiting": 3, "alarm_above": 2}
