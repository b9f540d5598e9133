"""Kill -9 the Celery worker at random moments during sustained ingest and commits: every
accepted reading ends up in its feed exactly once, no file is torn, kWh is not double-counted.

Real processes: the web site (runserver), a Celery worker on the ingest and commit queues,
beat committing every second with an fsync every 3 s (so kills also land between a commit's
write and the sync that releases its points from Redis), a private redis-server with
appendonly. The soak variant
(tests/soak/test_soak_faults.py) does the same with 20 kills and more readings.
"""

from __future__ import annotations

import pytest

from sensors.ingest import input_budget
from tests.reliability.scenarios import make_gateway, run_with_faults, start_time

pytestmark = pytest.mark.integration

KILLS = 3
READINGS = 1500  # per gateway, two gateways


def run_kills(fault_site, kills: int, readings: int, gap_s: tuple[float, float]):
    t0 = start_time(readings)
    gateways = [make_gateway(f"crash-{i}", readings, t0) for i in range(2)]
    fault_site.extra_env["BMS_FEED_SYNC_INTERVAL"] = "3"  # every process, restarted ones too
    fault_site.start_web()
    fault_site.start_worker()
    fault_site.start_beat(BMS_FEED_COMMIT_INTERVAL="1")

    def kill_and_restart(_n: int) -> None:
        fault_site.kill("worker")  # the whole process group: main process and pool children
        fault_site.start_worker()

    result = run_with_faults(fault_site, gateways, kill_and_restart, kills, gap_s)
    print("worker kill -9:", result.summary())
    assert result.faults == kills
    assert result.accepted == result.sent  # the sender retries until accepted
    assert result.found == result.accepted, "accepted readings missing from their feed"
    assert result.wrong == 0 and result.extra == 0
    assert result.kwh_wrong == 0, "an accumulating feed was double-counted"
    assert result.kwh_final == pytest.approx(result.kwh_expected, abs=1e-3)
    return result


# Found by this test (most runs with kills lost one batch of 20): kombu's Redis transport takes
# a message with BRPOP before it records it as unacknowledged, so a worker killed in between
# loses it (150 posts answered 202, 149 tasks ever received). Fixed then by an ingest outbox in
# the web's publisher: a batch in no queue, worker or retry was pushed again.
# Then found (1 run in 4): two batches of one node running out of order (the lost batch pushed
# again, or worker concurrency 2). The later batch's power_to_kwh went on without the earlier
# batch's points, which then counted as replays and were skipped: 20 kWh slots missing. Fixed
# by running each node's batches in the order they were accepted (park/wake scripts).
# Both were replaced, publisher and scripts, by node streams drained one drain per shard
# at a time (sensors/ingest/stream.py, sensors/ingest/drain.py): a request stays in its stream
# until processed, and a node's requests are processed in order by one drain.


def test_worker_killed_three_times_loses_and_doubles_nothing(fault_site):
    run_kills(fault_site, KILLS, READINGS, gap_s=(1.0, 3.0))


# A drain killed mid-batch leaves its requests pending in the node's stream, under
# the shard's lease. Once the lease runs out (BMS_INGEST_LEASE_S: 2 s here, 5 s by default)
# beat's safety net (every 1 s here, 2 s by default) queues a drain that takes them over with
# XAUTOCLAIM: within seconds, not kombu's 300 s visibility timeout. The test waits up to a
# generous minute for it: an upper bound on waiting that still tells the two apart.
TAKEOVER_WITHIN_S = 60.0


def test_a_drain_killed_mid_batch_is_taken_over_within_seconds(fault_site):
    from tests.reliability.harness import drain_pending, queue_state, settled
    from tests.reliability.scenarios import Result, check_files
    from tests.wait import wait_for

    gateway = make_gateway("killed-mid-batch", 1, start_time(1))
    client = fault_site.redis.client()
    # The batch carries a new input key ("n"), so the drain waits for the site's auto-create
    # lock, which the test holds: the worker is killed with the request read and not acknowledged.
    # The lock the worker takes to create a site's inputs (sensors/ingest/input_budget.py).
    lock = input_budget.site_lock(gateway.node.site_id).name
    client.set(lock, "held by the test", ex=600)
    fault_site.start_web()
    fault_site.start_worker()
    fault_site.start_beat(BMS_FEED_COMMIT_INTERVAL="1")
    (t, values) = gateway.rows[0]
    body = [{"node": gateway.node.name, "time": t, "values": {**values, "n": 5}}]
    assert fault_site.post("/api/v1/readings", body, gateway.key) == 202
    stream = f"sensors:ingest:stream:{gateway.node.pk}"
    wait_for(
        lambda: drain_pending(client, stream) == 1,
        30,
        "a drain to read the request",
    )
    killed_consumer = client.xpending_range(stream, "drain", "-", "+", 1)[0]["consumer"]

    fault_site.kill("worker")
    client.delete(lock)
    fault_site.start_worker()  # a replacement, as docker's restart policy starts one
    # The wait's bound, not an assertion on speed: far inside kombu's 300 s (how soon is
    # bench/'s question).
    wait_for(lambda: client.xlen(stream) == 0, TAKEOVER_WITHIN_S, "the request to be taken over")
    consumers = {c["name"] for c in client.xinfo_consumers(stream, "drain")}
    assert len(consumers - {killed_consumer}) >= 1  # another consumer claimed it

    wait_for(lambda: settled(client), 60, "the site to settle", state=lambda: queue_state(client))
    result = Result()
    check_files(gateway, gateway.rows, result)
    assert result.found == 1 and result.wrong == 0 and result.kwh_points == 1
