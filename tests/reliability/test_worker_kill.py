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
# loses it (150 posts answered 202, 149 tasks ever received). Fixed by the web's ingest outbox
# (sensors/publish.py): a batch in no queue, worker or retry is pushed again.
# Then found (1 run in 4): two batches of one node running out of order (the lost batch pushed
# again, or worker concurrency 2). The later batch's power_to_kwh went on without the earlier
# batch's points, which then counted as replays and were skipped: 20 kWh slots missing. Fixed
# by running each node's batches in the order they were accepted ("Per-node order" in
# sensors/publish.py; tests/integration/test_ingest_order.py).


def test_worker_killed_three_times_loses_and_doubles_nothing(fault_site):
    run_kills(fault_site, KILLS, READINGS, gap_s=(1.0, 3.0))
