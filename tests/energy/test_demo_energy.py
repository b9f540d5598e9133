"""The demo's metering tree and year of history: the Lecture block's CUSUM turns down on the
day booking-driven heating started, the Visitor centre's stays flat; quick on first run;
idempotent on restart (nothing rewritten, registers continue)."""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from demo import energy as demo
from energy import report
from energy.models import MeterDay, MeterNode
from sensors.models import Site

LONDON = ZoneInfo("Europe/London")
NOW = int(datetime(2026, 3, 10, 14, 20, tzinfo=LONDON).timestamp())


@pytest.fixture
def site(db, redis_client, settings):
    settings.BMS_FEED_MAX_BACKFILL_DAYS = 100_000
    return Site.objects.create(name="CAT demo", slug="cat-demo", time_zone="Europe/London")


def test_a_year_of_history_with_savings_after_the_switch(site):
    built, points, days = demo.ensure_demo_energy(site, now=NOW)
    print(f"demo energy: {points} points, {days} meter-days")  # how fast: a bench question (#24)
    assert days == 4 * 366  # four meters, first day .. today
    today = datetime.fromtimestamp(NOW, LONDON).date()
    switch = demo.switch_day(built.first)
    assert switch == today - timedelta(days=demo.SWITCH_DAYS_AGO)

    tree = report.Tree.load(site)
    lecture = MeterNode.objects.get(site=site, name="Lecture block")
    line = report.performance_line(tree, lecture, "gas")
    assert line.slope == pytest.approx(60, rel=0.1) and line.r2 > 0.9
    assert line.base_load == pytest.approx(30, abs=15)
    before = report.node_report(tree, lecture, "gas", switch - timedelta(days=60),
                                switch - timedelta(days=1), "day")  # fmt: skip
    after = report.node_report(tree, lecture, "gas", switch, today - timedelta(days=1), "day")
    assert abs(before["cusum"]) < 0.05 * before["total"]  # on the line before the switch
    assert after["cusum"] < -0.15 * after["expected_total"]  # well below it after
    assert after["savings"]["kg_co2e"] > 0

    centre = MeterNode.objects.get(site=site, name="Visitor centre")
    centre.baseline_start, centre.baseline_end = lecture.baseline_start, lecture.baseline_end
    centre.save()
    flat = report.node_report(report.Tree.load(site), centre, "gas", switch,
                              today - timedelta(days=1), "day")  # fmt: skip
    assert abs(flat["cusum"]) < 0.05 * flat["expected_total"]  # its heating did not change
    assert [n.name for n in tree.buildings()] == ["Lecture block", "Visitor centre"]
    assert MeterNode.objects.filter(parent=lecture, kind="room").count() == 4


def test_a_restart_writes_only_the_new_hours_and_the_registers_continue(site):
    demo.ensure_demo_energy(site, now=NOW)
    stored = dict(MeterDay.objects.values_list("pk", "value")[:50])
    _built, points, _days = demo.ensure_demo_energy(site, now=NOW)
    assert points == 0
    _built, points, _days = demo.ensure_demo_energy(site, now=NOW + 2 * 3600)
    assert points == 5 * 2  # temperature and four registers, two more hours each
    yesterday = datetime.fromtimestamp(NOW, LONDON).date() - timedelta(days=1)
    assert MeterDay.objects.filter(day=yesterday, status="measured").count() == 4
    assert all(MeterDay.objects.get(pk=pk).value == v for pk, v in stored.items() if pk)
    assert MeterNode.objects.filter(site=site).count() == 6
