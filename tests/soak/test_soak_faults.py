"""Soak variants of the fault tests (minutes each): `bash scripts/run-tests.sh -m soak`.

Same scenarios as tests/reliability, with more faults and more readings: 20 worker kills,
5 Redis restarts, a full minute without the database."""

from __future__ import annotations

import pytest

from tests.reliability.test_database_outage import run_outage
from tests.reliability.test_redis_restart import run_restarts
from tests.reliability.test_worker_kill import run_kills

pytestmark = [pytest.mark.soak, pytest.mark.integration]


def test_worker_killed_twenty_times(fault_site):
    run_kills(fault_site, kills=20, readings=6000, gap_s=(1.0, 4.0))


@pytest.mark.xfail(
    strict=False,
    reason="the first run timed out after 120 s waiting for the queues to drain and the buffer "
    "to commit, probably the worker exit and the commit lock fixed since (bms/broker.py, "
    "feeds/buffer.py); one run passed after the fixes, kept until more do (docs/RELIABILITY.md)",
)
def test_redis_restarted_five_times(fault_site):
    run_restarts(fault_site, restarts=5, readings=4000)


@pytest.mark.xfail(
    strict=False,
    reason="not diagnosed yet: after 60 s without the database, 560 power slots held wrong "
    "values and kWh was 8.55 of 59.98 (307 redeliveries: ingest retries with countdowns "
    "longer than the tests' 8 s visibility timeout); see docs/RELIABILITY.md",
)
def test_database_away_for_a_minute(fault_site):
    run_outage(fault_site, outage_s=60, readings=3000)
