"""The database becomes unavailable during ingest: the web keeps accepting (or answers 503,
never 500), the worker retries the batches, and once the database is back every accepted
reading is in its feed, without anyone stepping in.

On SQLite the database file is replaced by a directory of the same name for the outage (every
new connection then fails with "unable to open database file"). The PostgreSQL variant
(a TCP proxy we cut) is not written yet: the test is skipped there, saying so."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from django.db import connection

from tests.reliability.scenarios import make_gateway, run_with_faults, start_time

pytestmark = pytest.mark.integration


def run_outage(fault_site, outage_s: float, readings: int):
    if connection.vendor != "sqlite":
        pytest.skip("database outage is injected on SQLite only so far (PostgreSQL: TODO proxy)")
    db_file = Path(connection.settings_dict["NAME"])
    t0 = start_time(readings)
    gateways = [make_gateway(f"db-{i}", readings, t0) for i in range(2)]
    fault_site.start_web()
    fault_site.start_worker()
    fault_site.start_beat(BMS_FEED_COMMIT_INTERVAL="1")
    away = db_file.with_name(db_file.name + ".away")

    def outage(_n: int) -> None:
        os.rename(db_file, away)
        db_file.mkdir()
        try:
            time.sleep(outage_s)
        finally:
            db_file.rmdir()
            os.rename(away, db_file)

    result = run_with_faults(
        fault_site, gateways, outage, 1, gap_s=(2.0, 2.0), settle_s=180 + outage_s
    )
    print(f"database outage {outage_s:.0f} s:", result.summary())
    assert 500 not in result.refused, "a 500 while the database was away"
    assert result.accepted == result.sent
    assert result.found == result.accepted and result.wrong == 0 and result.extra == 0
    assert result.kwh_wrong == 0
    return result


# Once seen in a full-folder run: a batch delayed by retries whose feed file was meanwhile
# created by a later batch was refused as "before the feed's start". The engine now prepends
# such points (up to 31 days back), so the xfail is gone; see docs/RELIABILITY.md.
def test_ingest_survives_a_database_outage(fault_site):
    run_outage(fault_site, outage_s=10, readings=600)
