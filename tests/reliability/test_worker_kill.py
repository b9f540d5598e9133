"""Kill -9 the Celery worker at random moments during sustained ingest and commits: every
accepted reading ends up in its feed exactly once, no file is torn, kWh is not double-counted.

Real processes: the web site (runserver), a Celery worker on the ingest and commit queues,
beat committing every second, a private redis-server with appendonly. The soak variant
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


# Found by this test (in most runs with kills, none without): after a kill, one batch of 20
# readings is missing from the plain log_to_feed feed, while the power_to_kwh feed of the same
# batch is complete; its task was redelivered and "succeeded" (rows 20, items 40). Reported to
# the feeds/ingest engineer; see docs/RELIABILITY.md.
LOSS = "after a worker kill, one redelivered batch's log_to_feed points are missing (feeds/ingest)"


@pytest.mark.xfail(strict=False, reason=LOSS)  # intermittent: most runs with kills, not all
def test_worker_killed_three_times_loses_and_doubles_nothing(fault_site):
    run_kills(fault_site, KILLS, READINGS, gap_s=(1.0, 3.0))
