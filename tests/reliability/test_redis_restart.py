"""Redis restarted during ingest (appendonly yes, appendfsync everysec, as in docker/): no
accepted reading is lost. Posts refused while Redis is down get 503 and are retried by the
gateway, like emonhub does; the worker reconnects by itself."""

from __future__ import annotations

import pytest

from sensors.ingest import input_budget
from tests.reliability.scenarios import make_gateway, run_with_faults, start_time

pytestmark = pytest.mark.integration


def run_restarts(fault_site, restarts: int, readings: int, down_s: float = 2.0):
    t0 = start_time(readings)
    gateways = [make_gateway(f"redis-{i}", readings, t0) for i in range(2)]
    fault_site.start_web()
    fault_site.start_worker()
    fault_site.start_beat(BMS_FEED_COMMIT_INTERVAL="1")

    def restart(_n: int) -> None:
        import time

        fault_site.redis.stop()  # SIGTERM: what `docker compose restart redis` sends
        time.sleep(down_s)  # a real pause: Redis stays down this long while ingest goes on
        fault_site.redis.start()

    result = run_with_faults(fault_site, gateways, restart, restarts, gap_s=(2.0, 4.0))
    print("redis restart:", result.summary())
    assert result.faults == restarts
    assert result.accepted == result.sent
    assert result.found == result.accepted and result.wrong == 0 and result.extra == 0
    assert result.kwh_wrong == 0
    return result


# Was intermittent on PostgreSQL in the full suite (xfail). A restart while the worker held a
# task stopped the worker for good (fixed by a patched kombu transport, since removed: ingest
# on streams no longer holds acks_late messages); one during a feed commit left the commit
# lock held for its 120 s TTL (feeds/store/buffer.py); either kept the site from settling. And a new
# feed's first points arriving during a commit were dropped as "no such feed" (commit_all).
def test_redis_restarted_twice_during_ingest_loses_nothing(fault_site):
    run_restarts(fault_site, restarts=2, readings=800)


def test_the_worker_outlives_a_redis_restart_while_it_holds_a_batch(fault_site):
    """Redis stopped while the worker drains a request (read from its stream, not acknowledged)
    and has a BRPOP in flight for its other slot: kombu's channel close once died with
    AttributeError there and the worker exited for good. The request is held running by the
    node's auto-create lock, which the test takes first (a batch with a new input key waits for
    it, sensors/ingest/processing.py); after the restart a new drain takes it over from the stream."""
    import time

    from tests.reliability.harness import drain_pending, queue_state, settled
    from tests.reliability.scenarios import Result, check_files
    from tests.wait import wait_for

    gateway = make_gateway("held", 1, start_time(1))
    client = fault_site.redis.client()
    # The lock the worker takes to create a site's inputs (sensors/ingest/input_budget.py).
    lock = input_budget.site_lock(gateway.node.site_id).name
    client.set(lock, "held by the test", ex=600)
    fault_site.start_web()
    fault_site.start_worker()  # no beat yet: nothing else takes the worker's second slot
    (t, values), log = gateway.rows[0], fault_site.log_dir / "worker.log"
    body = [{"node": gateway.node.name, "time": t, "values": {**values, "n": 5}}]
    assert fault_site.post("/api/v1/readings", body, gateway.key) == 202
    stream = f"sensors:ingest:stream:{gateway.node.pk}"
    wait_for(
        lambda: drain_pending(client, stream) == 1,
        30,
        "the worker to take the batch",
    )
    # A real pause: past the moment it takes the message, its other slot waits in BRPOP (no
    # outside sign of that to wait for).
    time.sleep(0.5)

    fault_site.redis.stop()
    time.sleep(2)  # a real pause: Redis stays down while the worker holds the batch
    fault_site.redis.start()
    client.delete(lock)  # kept by the AOF: the batch may run now
    fault_site.start_beat(BMS_FEED_COMMIT_INTERVAL="1")

    def state() -> dict:
        return {**queue_state(client), "exited": fault_site.exited()}

    wait_for(
        lambda: fault_site.exited() or settled(client),
        60,
        "the batch to run and be committed",
        state=state,
    )
    assert fault_site.exited() == {}, f"a process of the site died; state: {state()}"
    assert "Unrecoverable error" not in log.read_text(errors="replace")
    result = Result()
    check_files(gateway, gateway.rows, result)
    assert result.found == 1 and result.wrong == 0 and result.kwh_points == 1


def test_a_commit_cut_off_by_a_redis_restart_does_not_hold_the_next_for_the_lock_ttl(
    private_redis, tmp_path
):
    """Redis stopped (SIGTERM, AOF on) in the middle of a feed commit: the commit fails and
    cannot release its lock, which the AOF keeps. Every commit after the restart used to be
    skipped until the lock's 120 s TTL ran out (seen in a full-folder run: the site settled
    after ~110 s, just inside the test's 120 s)."""
    import numpy as np
    import redis

    from feeds.store import phpfina
    from feeds.store.buffer import FeedBuffer

    client = private_redis.client()
    points = [(1, 1_000_000 + 10 * i, float(i), False) for i in range(10)]
    FeedBuffer(client).add(points)

    def stop_redis(_feed_id: int, _records: int) -> None:
        private_redis.stop()  # written and fsync'd, not yet trimmed

    with pytest.raises(redis.ConnectionError):
        FeedBuffer(client).commit(tmp_path, {1: 10}, now=2_000_000_000, after_write=stop_redis)
    private_redis.start()
    assert client.ttl("feeds:commit:lock") > 60  # left behind for the rest of its TTL

    report = FeedBuffer(client).commit(tmp_path, {1: 10}, now=2_000_000_000)
    assert not report.skipped and report.synced
    assert client.smembers("feeds:dirty") == set() and client.get("feeds:buf:1") is None
    assert client.get("feeds:commit:lock") is None
    assert np.asarray(phpfina.open_data(tmp_path, 1)).tolist() == [float(i) for i in range(10)]


def test_ingest_answers_503_never_500_while_redis_is_down(fault_site):
    import time

    gateway = make_gateway("redis-down", 10, start_time(10))
    fault_site.start_web()
    body = [{"node": gateway.node.name, "time": t, "values": v} for t, v in gateway.rows]
    assert fault_site.post("/api/v1/readings", body, gateway.key) == 202  # key now cached
    fault_site.redis.stop()
    statuses = []
    deadline = time.monotonic() + 4
    while time.monotonic() < deadline:
        statuses.append(fault_site.post("/api/v1/readings", body, gateway.key))
        time.sleep(0.1)  # a real pause: a gateway posting through a 4 s outage
    fault_site.redis.start()
    print("statuses while Redis was down:", {s: statuses.count(s) for s in set(statuses)})
    assert set(statuses) == {503}


@pytest.mark.django_db
def test_a_control_tick_cut_off_by_a_redis_restart_does_not_hold_the_next(private_redis, settings):
    """The control tick's lock is kept by the AOF like the commit lock: frost protection must
    not wait out its TTL (up to two ticks) after a Redis restart."""
    from control import runtime
    from control.runner import run_tick

    settings.REDIS_URL = private_redis.url
    client = private_redis.client()
    assert runtime.acquire_tick_lock(ttl_s=120) is not None  # a tick that never released it
    assert run_tick() == {"skipped": "another control tick is still running"}
    private_redis.stop()
    private_redis.start()
    assert client.ttl(runtime.TICK_LOCK_KEY) > 60  # kept by the AOF

    report = run_tick()
    assert "skipped" not in report
    assert client.get(runtime.TICK_LOCK_KEY) is None  # released by the tick that took it over
