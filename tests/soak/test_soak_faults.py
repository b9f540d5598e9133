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


# Both were xfail until repeated runs passed: the Redis soak after the worker-exit and
# commit-lock fixes (a patched kombu transport since removed with ingest on streams, and
# core/redis_lock.py), the database soak after the prepend and
# per-node order fixes (docs/RELIABILITY.md has the runs).
def test_redis_restarted_five_times(fault_site):
    run_restarts(fault_site, restarts=5, readings=4000)


def test_database_away_for_a_minute(fault_site):
    run_outage(fault_site, outage_s=60, readings=3000)
