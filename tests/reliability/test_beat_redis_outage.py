"""beat rides out Redis going away (bms/beat_scheduler.py): RedBeat as shipped ends `celery
beat` at the first Redis error, so one Redis restart stopped every commit and control tick on
a single host with no supervisor. Here beat starts while Redis is down, and Redis restarts
without persistence under it (its RedBeat lock gone with the data): beat still runs and its
heartbeat comes back each time."""

from __future__ import annotations

import time

import pytest
import redis as redis_lib

from alarms.heartbeat import BEAT_HEARTBEAT_KEY
from tests.reliability.harness import PrivateRedis, Site
from tests.wait import wait_for

pytestmark = pytest.mark.integration


def _ticking_since(redis: PrivateRedis, t: float) -> bool:
    """beat's heartbeat is newer than `t` and it has sent tasks (no worker takes them, so they
    wait in the broker's queues: this Redis was empty when it started)."""
    client = redis.client()
    try:
        beat = client.get(BEAT_HEARTBEAT_KEY)
        sent = sum(client.llen(q) for q in ("commit", "control", "ingest", "celery"))
    except redis_lib.RedisError:
        return False  # Redis still starting
    return beat is not None and int(beat) >= int(t) and sent > 0


def test_beat_started_with_redis_down_and_redis_restarted_empty_keeps_ticking(
    transactional_db, tmp_path
):
    from tests.conftest import test_database_url

    redis = PrivateRedis(appendonly=False)
    site = Site(redis=redis, database_url=test_database_url(), log_dir=tmp_path,
                extra_env={"BMS_DATA_DIR": str(tmp_path)})  # fmt: skip
    try:
        site.start_beat()  # Redis not started yet
        time.sleep(3)  # a real pause: proving beat does not exit while Redis is down
        assert site.procs["beat"].poll() is None, "beat exited while Redis was down"
        started = time.time()
        redis.start()
        wait_for(lambda: _ticking_since(redis, started), 60, "beat to tick")

        redis.stop(hard=True)  # lock, schedule and heartbeat gone with the data
        time.sleep(2)  # a real pause: proving beat does not exit when Redis goes away
        assert site.procs["beat"].poll() is None, "beat exited when Redis went away"
        restarted = time.time()
        redis.start()
        wait_for(lambda: _ticking_since(redis, restarted), 60, "beat to tick again")
        assert site.procs["beat"].poll() is None
    finally:
        site.close()
        redis.close()
