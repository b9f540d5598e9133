"""End to end on real feed files: refresh reads feeds (hourly windows, London time), the API
shows days, the performance line, savings and the league against hand-computed values."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

import numpy as np
import pytest
from django.conf import settings

from energy import refresh
from energy.models import EnergySite, ExpectedUse, FuelRate, Meter, MeterDay, MeterNode
from feeds.models import Feed
from feeds.store import phpfina
from sensors.models import Site

API = "/api/v1/energy"
LONDON = ZoneInfo("Europe/London")
NOW = 2_000_000_000  # far after the data: nothing is "in the future"


def _midnight(d: date) -> int:
    return int(datetime(d.year, d.month, d.day, tzinfo=LONDON).timestamp())


def _write(feed: Feed, times, values) -> None:
    phpfina.write_points(settings.BMS_FEED_DIR, feed.pk, feed.interval, list(times), list(values),
                         now=NOW)  # fmt: skip


@pytest.fixture
def site(db) -> Site:
    return Site.objects.create(name="CAT", slug="cat", time_zone="Europe/London")


@pytest.fixture
def building(site) -> MeterNode:
    return MeterNode.objects.create(
        site=site, name="Office", kind="building", floor_area_m2=100,
        tm46_category="general_office",
    )  # fmt: skip


def test_power_feed_days_across_the_autumn_dst_day(building, redis_client):
    feed = Feed.objects.create(name="elec W", tag="t", interval=600)
    start, end = _midnight(date(2024, 10, 26)), _midnight(date(2024, 10, 29))
    times = np.arange(start, end, 600)
    _write(feed, times, [2000.0] * len(times))  # 2 kW steady
    meter = Meter.objects.create(node=building, name="Elec", fuel="electricity", source="power",
                                 feed=feed)  # fmt: skip
    refresh.refresh([meter], date(2024, 10, 26), date(2024, 10, 28), now=NOW)
    got = dict(MeterDay.objects.values_list("day", "value"))
    assert got == {date(2024, 10, 26): 48.0, date(2024, 10, 27): 50.0, date(2024, 10, 28): 48.0}


def test_cumulative_feed_with_reset_and_spring_dst(building, viewer_api, redis_client):
    feed = Feed.objects.create(name="gas kWh", tag="t", interval=600)
    # From the day before: the register at the first midnight must be known (a reading at the
    # end of an hour window), else the first day is a gap.
    start, end = _midnight(date(2024, 3, 29)), _midnight(date(2024, 4, 2))
    times = np.arange(start, end + 1, 600)
    # 1 kWh per 10 minutes (6 kWh/h); the meter is replaced at 2024-04-01 12:00 and restarts
    # from 0. A 10-minute feed is read reading by reading, so the step holding the reset
    # (11:50-12:00, whose change is negative) counts 0: the day is 144 - 1 = 143 kWh, never
    # negative.
    reset_at = _midnight(date(2024, 4, 1)) + 12 * 3600
    values = [
        float(i) if t < reset_at else float((t - reset_at) // 600) for i, t in enumerate(times)
    ]
    _write(feed, times, values)
    meter = Meter.objects.create(node=building, name="Gas", fuel="gas", source="cumulative",
                                 feed=feed)  # fmt: skip
    refresh.refresh([meter], date(2024, 3, 30), date(2024, 4, 1), now=NOW)
    got = dict(MeterDay.objects.values_list("day", "value"))
    assert got == {date(2024, 3, 30): 144.0, date(2024, 3, 31): 138.0, date(2024, 4, 1): 143.0}
    r = viewer_api.get(f"{API}/nodes/{building.pk}/consumption?fuel=gas&start=2024-03-30"
                       "&end=2024-04-01&period=day")  # fmt: skip
    assert r.status_code == 200
    assert [row["actual"] for row in r.json()["rows"]] == [144.0, 138.0, 143.0]
    assert r.json()["total"] == 425.0


@pytest.mark.parametrize("interval", [3600, 600, 300])
def test_cumulative_day_runs_from_midnight_register_to_midnight_register(
    building, redis_client, interval
):
    """A day is the register at its closing midnight minus the one at its opening midnight.

    Found by the outside tester: each day ran from 23:00 to 23:00, because a window's last
    reading (at 23:00 for an hourly feed) was taken as the register at the window's end. The
    use varies by hour here, so a shifted day shows; a steady rate would hide it.
    """
    feed = Feed.objects.create(name="gas kWh", tag="t", interval=interval)
    start, end = _midnight(date(2024, 10, 25)), _midnight(date(2024, 10, 29))
    times = np.arange(start, end + 1, interval)

    # Use per hour: the local hour of the day plus 1 (1 kWh at 00:00-01:00 … 24 at 23:00), and
    # in the last hour of the day 100 × the day of the month more: a day boundary one hour off
    # moves whole hundreds between days.
    def per_hour(t: int) -> float:
        local = datetime.fromtimestamp(t, LONDON)
        return local.hour + 1 + (100.0 * local.day if local.hour == 23 else 0.0)

    rate = [per_hour(int(t)) * interval / 3600 for t in times]
    register = np.concatenate(([1000.0], 1000.0 + np.cumsum(rate[:-1])))
    _write(feed, times, register.tolist())
    meter = Meter.objects.create(node=building, name="Gas", fuel="gas", source="cumulative",
                                 feed=feed)  # fmt: skip
    refresh.refresh([meter], date(2024, 10, 26), date(2024, 10, 28), now=NOW)
    got = dict(MeterDay.objects.values_list("day", "value"))
    by_time = dict(zip(times.tolist(), register.tolist(), strict=True))
    want = {
        day: by_time[_midnight(day + timedelta(days=1))] - by_time[_midnight(day)]
        for day in (date(2024, 10, 26), date(2024, 10, 27), date(2024, 10, 28))
    }
    # Hand check of one: a 24-hour day holds 1+2+…+24 = 300 and 2,600 in its last hour.
    assert want[date(2024, 10, 26)] == pytest.approx(2900.0)
    assert got == pytest.approx(want)


def test_gap_days_shown_as_gaps(building, viewer_api, redis_client):
    feed = Feed.objects.create(name="elec W", tag="t", interval=600)
    d0 = _midnight(date(2024, 6, 1))
    day1 = np.arange(d0, d0 + 86400, 600)
    day4 = np.arange(d0 + 3 * 86400, d0 + 4 * 86400, 600)
    _write(feed, day1, [1000.0] * len(day1))
    _write(feed, day4, [1000.0] * len(day4))
    meter = Meter.objects.create(node=building, name="Elec", fuel="electricity", source="power",
                                 feed=feed, max_fill_hours=6)  # fmt: skip
    refresh.refresh([meter], date(2024, 6, 1), date(2024, 6, 4), now=NOW)
    r = viewer_api.get(f"{API}/nodes/{building.pk}/consumption?start=2024-06-01&end=2024-06-04")
    rows = r.json()["rows"]
    assert [(x["actual"], x["status"]) for x in rows] == [
        (24.0, "measured"), (None, "gap"), (None, "gap"), (24.0, "measured")
    ]  # fmt: skip
    week = viewer_api.get(f"{API}/nodes/{building.pk}/consumption?start=2024-06-01"
                          "&end=2024-06-04&period=month").json()  # fmt: skip
    assert week["rows"][0]["actual"] is None and week["rows"][0]["missing_days"] == 2


def test_performance_line_savings_and_league(site, building, viewer_api, redis_client):
    """Baseline: gas = 10 + 2 x HDD per day exactly; after it, 20 % less. Temperatures 5.5,
    7.5, 9.5 ... °C so HDD = 10, 8, 6, 4, 2 (base 15.5) repeating."""
    temp = Feed.objects.create(name="outside", tag="t", interval=3600)
    gas = Feed.objects.create(name="gas W", tag="t", interval=3600)
    EnergySite.objects.create(site=site, outside_temperature_feed=temp)
    FuelRate.objects.create(site=site, fuel="gas", price_per_unit=0.10, kg_co2e_per_unit=0.2)
    first, last = date(2024, 1, 1), date(2024, 1, 20)
    t_times, t_vals, g_times, g_vals = [], [], [], []
    expected_saving = 0.0
    for i in range((last - first).days + 1):
        d = first + timedelta(days=i)
        hdd = [10, 8, 6, 4, 2][i % 5]
        use = 10 + 2 * hdd
        if d > date(2024, 1, 10):
            expected_saving += 0.2 * use
            use *= 0.8
        hours = range(_midnight(d), _midnight(d + timedelta(days=1)), 3600)
        for h in hours:
            t_times.append(h)
            t_vals.append(15.5 - hdd)
            g_times.append(h)
            g_vals.append(use * 1000 / 24)  # W that make `use` kWh in 24 h
    _write(temp, t_times, t_vals)
    _write(gas, g_times, g_vals)
    building.baseline_start, building.baseline_end = first, date(2024, 1, 10)
    building.save()
    meter = Meter.objects.create(node=building, name="Gas", fuel="gas", source="power", feed=gas)
    refresh.refresh([meter], first, last, now=NOW)

    perf = viewer_api.get(f"{API}/nodes/{building.pk}/performance?fuel=gas").json()["line"]
    assert perf["slope_per_hdd"] == pytest.approx(2.0, abs=1e-4)
    assert perf["base_load_per_day"] == pytest.approx(10.0, abs=1e-3)
    assert perf["r2"] == pytest.approx(1.0, abs=1e-6)
    assert perf["days"] == 10

    r = viewer_api.get(f"{API}/nodes/{building.pk}/consumption?fuel=gas&start=2024-01-11"
                       "&end=2024-01-20&period=day").json()  # fmt: skip
    # Days 11..20: HDD 10,8,6,4,2 twice -> baseline use 2 x (30+26+22+18+14) = 220, 20 % = 44.
    assert expected_saving == pytest.approx(44.0)
    assert r["savings"]["kwh"] == pytest.approx(44.0, abs=0.01)
    assert r["savings"]["money"] == pytest.approx(4.4, abs=0.01)
    assert r["savings"]["kg_co2e"] == pytest.approx(8.8, abs=0.01)
    assert r["rows"][-1]["cusum"] == pytest.approx(-44.0, abs=0.01)
    assert r["cusum"] == pytest.approx(-44.0, abs=0.01)  # the end of the range
    assert r["expected_total"] == pytest.approx(220.0, abs=0.01)  # the baseline line's days
    assert r["rows"][0]["hdd"] == pytest.approx(10.0)  # 11 Jan is day 10: HDD 10

    # Without a model the league's change is against the baseline line, as the API's expected.
    league = viewer_api.get(f"{API}/league?site={site.pk}&start=2024-01-11&end=2024-01-20").json()
    row = league["buildings"][0]
    assert row["expected_kwh"] == pytest.approx(220.0, abs=0.01)
    assert row["change_pct"] == pytest.approx(-20.0, abs=0.05)
    assert row["compared_days"] == 10

    # The imported model wins over the baseline line where it covers the days.
    ExpectedUse.objects.create(node=building, fuel="gas", start=date(2024, 1, 11),
                               end=date(2024, 1, 20), value=300.0)  # fmt: skip
    r = viewer_api.get(f"{API}/nodes/{building.pk}/consumption?fuel=gas&start=2024-01-11"
                       "&end=2024-01-20&period=month").json()  # fmt: skip
    assert r["rows"][0]["expected"] == pytest.approx(300.0)
    assert r["rows"][0]["actual"] == pytest.approx(176.0, abs=0.01)  # 0.8 x 220

    league = viewer_api.get(f"{API}/league?site={site.pk}&start=2024-01-11&end=2024-01-20").json()
    row = league["buildings"][0]
    assert row["kwh"] == pytest.approx(176.0, abs=0.01)
    assert row["kwh_per_m2"] == pytest.approx(1.76, abs=1e-3)
    assert row["change_pct"] == pytest.approx(100 * (176 - 300) / 300, abs=0.1)
    # DEC: annualised 176 x 36.5 = 6424 kWh gas on 100 m²: 64.24 x 0.2 = 12.85 kg/m². The
    # benchmark's weather share (0.55 of fossil) follows the range's degree days: 60 in 10 days
    # = 2,190 a year against TM46's 2,021. Typical 95 x 0.20707 + 120 x (0.45 + 0.55 x
    # 2190/2021) x 0.2 = 44.77 kg/m² -> 28.7, shown as 29.
    typical = 95 * 0.20707 + 120 * (0.45 + 0.55 * 2190 / 2021) * 0.2
    assert row["operational_rating"] == round(100 * 64.24 * 0.2 / typical)
    assert row["dec"]["hdd_year"] == 2190


def test_weekly_line_sums_away_the_weekday_rhythm(site, building, viewer_api, redis_client):
    """Four whole weeks from Monday 2024-01-01, HDD constant in a week: 4, 6, 8, 10. Gas per
    day = 10 + 2 x HDD + 5 on weekdays, - 12.5 on Saturday and Sunday (the rhythm sums to 0
    in a week). Weekly: 70 + 2 x HDD of the week exactly (R² 1, 4 weeks). Daily: the same
    slope and 10 a day, but the rhythm is unexplained: var(2 x HDD) = 4 x 5 = 20, var(rhythm)
    = (5 x 25 + 2 x 156.25) / 7 = 62.5, so R² = 20 / 82.5."""
    temp = Feed.objects.create(name="outside", tag="t", interval=3600)
    gas = Feed.objects.create(name="gas W", tag="t", interval=3600)
    EnergySite.objects.create(site=site, outside_temperature_feed=temp)
    first, last = date(2024, 1, 1), date(2024, 1, 30)  # 29-30 Jan: a part week, left out
    t_times, t_vals, g_vals = [], [], []
    for i in range((last - first).days + 1):
        d = first + timedelta(days=i)
        hdd = 4 + 2 * min(i // 7, 3)
        use = 10 + 2 * hdd + (5.0 if d.weekday() < 5 else -12.5)
        for h in range(_midnight(d), _midnight(d + timedelta(days=1)), 3600):
            t_times.append(h)
            t_vals.append(15.5 - hdd)
            g_vals.append(use * 1000 / 24)
    _write(temp, t_times, t_vals)
    _write(gas, t_times, g_vals)
    building.baseline_start, building.baseline_end = first, last
    building.save()
    meter = Meter.objects.create(node=building, name="Gas", fuel="gas", source="power", feed=gas)
    refresh.refresh([meter], first, last, now=NOW)

    r = viewer_api.get(f"{API}/nodes/{building.pk}/performance?fuel=gas").json()
    weekly, daily = r["weekly"], r["line"]
    assert weekly["weeks"] == 4
    assert weekly["slope_per_hdd"] == pytest.approx(2.0, abs=1e-3)
    assert weekly["base_load_per_week"] == pytest.approx(70.0, abs=1e-2)
    assert weekly["r2"] == pytest.approx(1.0, abs=1e-4)
    assert daily["days"] == 30
    # 29 and 30 Jan (HDD 10, weekdays) are in the daily fit too: recompute on the 30 days
    xs = [4 + 2 * min(i // 7, 3) for i in range(30)]
    ys = [10 + 2 * x + (5.0 if (first + timedelta(days=i)).weekday() < 5 else -12.5)
          for i, x in enumerate(xs)]  # fmt: skip
    slope, intercept = np.polyfit(xs, ys, 1)
    r2 = 1 - np.sum((np.array(ys) - (slope * np.array(xs) + intercept)) ** 2) / np.sum(
        (np.array(ys) - np.mean(ys)) ** 2
    )
    assert daily["r2"] == pytest.approx(r2, abs=1e-4)
    assert daily["r2"] < 0.5  # the weekday rhythm is most of the daily variance

    c = viewer_api.get(f"{API}/nodes/{building.pk}/consumption?fuel=gas&start=2024-01-01"
                       "&end=2024-01-28&period=week").json()  # fmt: skip
    assert c["performance_line_weekly"]["base_load_per_week"] == pytest.approx(70.0, abs=1e-2)


def test_cusum_and_savings_agree_when_the_model_covers_part_of_a_month(building, viewer_api):
    """Found by the outside tester: with model rows for October and 1-15 November only, the
    end CUSUM (-1512.95) and the savings (1411.10) disagreed, the CUSUM being summed per month
    and November, not wholly covered, left out. Both now run over the same days."""
    meter = Meter.objects.create(node=building, name="Gas", fuel="gas", source="cumulative")
    first = date(2026, 10, 1)
    days = [first + timedelta(days=i) for i in range(56)]  # 1 Oct .. 25 Nov
    MeterDay.objects.bulk_create(
        MeterDay(meter=meter, day=d, value=100.0, status="measured") for d in days
    )
    # October expected 110 a day (saved 10 a day); 1-15 November 90 a day (10 a day more used);
    # 16-25 November no model and no baseline line: nothing expected.
    ExpectedUse.objects.create(node=building, fuel="gas", start=date(2026, 10, 1),
                               end=date(2026, 10, 31), value=31 * 110.0)  # fmt: skip
    ExpectedUse.objects.create(node=building, fuel="gas", start=date(2026, 11, 1),
                               end=date(2026, 11, 15), value=15 * 90.0)  # fmt: skip
    r = viewer_api.get(f"{API}/nodes/{building.pk}/consumption?fuel=gas&start=2026-10-01"
                       "&end=2026-11-25&period=month")  # fmt: skip
    assert r.status_code == 200
    body = r.json()
    assert body["savings"]["kwh"] == pytest.approx(31 * 10 - 15 * 10)  # 160
    assert body["cusum"] == pytest.approx(-160.0)
    october, november = body["rows"]
    assert (october["expected"], october["cusum"]) == (pytest.approx(3410.0), pytest.approx(-310.0))
    # November is only half covered: no expected figure for the month (a whole month's use
    # against half a month's model would mislead), but its covered days move the CUSUM.
    assert november["expected"] is None
    assert november["cusum"] == pytest.approx(-160.0)


def test_negative_use_gets_no_dec_rating_and_a_warning(site, building, viewer, viewer_api, client):
    """Found by the outside tester: a virtual meter subtracting more than it adds gave -800 kWh
    and the league showed DEC "-68 (A)". Negative use is a metering mistake: no rating, and a
    sentence saying what to check, in the league, the consumption API and on the page."""
    meter = Meter.objects.create(node=building, name="Elec", fuel="electricity", source="power")
    first = date(2026, 10, 1)
    MeterDay.objects.bulk_create(
        MeterDay(meter=meter, day=first + timedelta(days=i), value=-20.0, status="measured")
        for i in range(10)
    )
    league = viewer_api.get(f"{API}/league?site={site.pk}&start=2026-10-01&end=2026-10-10")
    row = league.json()["buildings"][0]
    assert row["kwh"] == -200.0
    assert row["operational_rating"] is None and row["dec_grade"] is None
    assert row["warning"].startswith("negative electricity use: a virtual meter subtracts")
    use = viewer_api.get(f"{API}/nodes/{building.pk}/consumption?fuel=electricity"
                         "&start=2026-10-01&end=2026-10-10").json()  # fmt: skip
    assert use["negative_days"] == 10 and "no DEC rating" in use["warning"]
    client.force_login(viewer)
    page = client.get(f"/staff/energy/?site={site.pk}&node={building.pk}&fuel=electricity"
                          "&start=2026-10-01&end=2026-10-10")  # fmt: skip
    assert b"negative electricity use" in page.content
    assert b"(10 days below zero)" in page.content
