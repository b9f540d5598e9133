"""What a run may judge (fresh-eyes tester, #30): readings off the 5-minute grid, hours that
have not happened, and a range too short to say a finding stopped recurring."""

from __future__ import annotations

from datetime import timedelta

from findings import rules
from findings.evaluate import evaluate, evaluate_range
from findings.models import Finding
from tests.findings.conftest import MONDAY, WEEK, record

H = timedelta(hours=1)


def out_of_range() -> list[Finding]:
    return list(Finding.objects.filter(rule=rules.SENSOR_RANGE))


def test_a_sensor_posting_off_the_five_minute_grid_is_judged(site_model):
    # A 10 s feed with a reading every 60 s at :17 past for 4 h: no reading falls on a
    # window's first slot, so a sampled read saw none of them; the windows' means are 85 °C.
    feed = site_model["feed"]
    feed.interval = 10
    feed.save()
    record(feed.pk, MONDAY + 6 * H + timedelta(seconds=17), 4, lambda m: 85.0, 1)
    evaluate(MONDAY, MONDAY + WEEK)
    (finding,) = out_of_range()
    assert finding.period_start - (MONDAY + 6 * H) < timedelta(minutes=5)


def test_hours_after_now_are_not_judged_and_nothing_lasts_past_now(site_model):
    now = MONDAY + 8 * H
    record(site_model["feed"].pk, MONDAY + 5 * H, 3, lambda m: 85.0)
    summary = evaluate(MONDAY, MONDAY + WEEK, now=now)
    (finding,) = out_of_range()
    assert summary.opened == 1 and finding.closed_at is None
    assert finding.period_end <= now and finding.last_seen <= now
    # A range wholly in the future judges nothing and closes nothing.
    assert evaluate(now + H, now + 2 * H, now=now).keys == []
    assert evaluate_range(now + H, now + WEEK, now=now) == []
    finding.refresh_from_db()
    assert finding.closed_at is None


def test_only_a_whole_weeks_range_closes_a_finding_that_stopped(site_model):
    record(site_model["feed"].pk, MONDAY + 5 * H, 3, lambda m: 85.0)
    evaluate(MONDAY, MONDAY + WEEK)
    (finding,) = out_of_range()
    later = MONDAY + WEEK + 2 * 24 * H
    evaluate(later, later + 24 * H)  # a day without it says nothing of a week
    finding.refresh_from_db()
    assert finding.closed_at is None
    evaluate(MONDAY + WEEK + 9 * H, MONDAY + 2 * WEEK + 9 * H)  # a whole week without it
    finding.refresh_from_db()
    assert finding.closed_at == MONDAY + 2 * WEEK + 9 * H
