"""The demo's own meters (demo/energy.py's year of history, what `run-site.sh` shows every new
user) are fault-free: no energy rule finds anything in them, whatever hour the findings run
ends at. The Lecture block's weekday nights draw three times its weekend nights' (1.35 against
0.45 kW); a night judged against the weeks' base (a weekend's quietest hours) put the building
itself at the top of the findings page, above the fault week's injected faults."""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from demo import energy as demo
from findings import energy_checks, points
from sensors.models import Site

LONDON = ZoneInfo("Europe/London")
END = datetime(2026, 3, 10, 14, 0, tzinfo=LONDON)
STEP = timedelta(hours=3)
DAYS = 28


@pytest.fixture
def demo_site(db, redis_client, settings):
    settings.BMS_FEED_MAX_BACKFILL_DAYS = 100_000
    settings.TIME_ZONE = "Europe/London"
    site = Site.objects.create(name="CAT demo", slug="cat-demo", time_zone="Europe/London")
    demo.ensure_demo_energy(site, now=END.timestamp())
    return site


def test_the_demos_own_meters_give_no_finding_at_any_hour_of_four_weeks(demo_site):
    ends = [END - i * STEP for i in range(DAYS * 24 // 3)]
    # one log for every range: the rules read the meters themselves, the log is their model
    log = points.CommandLog(ends[-1] - timedelta(days=7), END)
    judged = {
        m.name
        for m in energy_checks._meters(
            energy_checks.rules.RULES[energy_checks.rules.BASE_LOAD_RISING], log, "meter"
        )
    }
    assert judged == {"Lecture block electricity", "Visitor centre electricity"}
    found = {
        (end.isoformat(), trip.subject)
        for end in ends
        for trip in energy_checks.base_load_rising(end - timedelta(days=7), end, log)
    }
    assert found == set()
