"""Grid electricity's CO2 weighted hour by hour on real feed files (phpfina, London time):
refresh reads a power meter and a half-hourly grid carbon feed, the consumption API's kg CO2e
is each window's use x that window's intensity, not the day's use x the day's mean.

Hand-computed day, 2024-06-14 (BST): the office draws 1 kW all day and 7 kW from 17:00 to
19:00 local: 22 x 1 + 2 x 7 = 36 kWh. The grid is at 100 g/kWh all day and 400 g/kWh from
17:00 to 19:00: daily mean (22 x 100 + 2 x 400) / 24 = 125 g/kWh.
- daily mean: 36 kWh x 0.125 = 4.5 kg
- hour by hour: 22 x 1 x 0.1 + 2 x 7 x 0.4 = 2.2 + 5.6 = 7.8 kg
"""

from __future__ import annotations

from datetime import date, datetime

import numpy as np
import pytest
from django.conf import settings

from energy import refresh, report
from energy.models import EnergySite, GridCarbonPeriod, Meter, MeterDay, MeterNode, VirtualTerm
from feeds.models import Feed
from feeds.store import phpfina
from sensors.models import Site

from .test_from_feeds import LONDON, NOW

API = "/api/v1/energy"
DAY = date(2024, 6, 14)


def _midnight(d: date) -> int:
    return int(datetime(d.year, d.month, d.day, tzinfo=LONDON).timestamp())


def _write(feed: Feed, times, values) -> None:
    phpfina.write_points(settings.BMS_FEED_DIR, feed.pk, feed.interval, list(times), list(values),
                         now=NOW)  # fmt: skip


def _local_hour(t: int) -> float:
    return (t - _midnight(DAY)) / 3600.0


@pytest.fixture
def office(db):
    site = Site.objects.create(name="CAT", slug="cat", time_zone="Europe/London")
    building = MeterNode.objects.create(site=site, name="Office", kind="building",
                                        floor_area_m2=100)  # fmt: skip
    return site, building


def _power_meter(node, name: str, watts) -> Meter:
    """A power feed (5-minute points) from the day before to the day after DAY."""
    feed = Feed.objects.create(name=name, tag="t", interval=300)
    times = np.arange(_midnight(date(2024, 6, 13)), _midnight(date(2024, 6, 16)), 300)
    _write(feed, times, [watts(_local_hour(int(t))) for t in times])
    return Meter.objects.create(node=node, name=name, fuel="electricity", source="power",
                                feed=feed)  # fmt: skip


def _peak_watts(h: float) -> float:
    return 7000.0 if 17 <= h < 19 else 1000.0


def _carbon_feed(site, g_per_kwh, skip=lambda h: False, interval: int = 1800) -> Feed:
    """A grid carbon feed in g/kWh over DAY, half-hourly by default (hours for which skip()
    is true left out)."""
    feed = Feed.objects.create(name="grid", tag="t", interval=interval, unit="gCO2/kWh")
    times = [t for t in range(_midnight(DAY), _midnight(date(2024, 6, 15)), interval)
             if not skip(_local_hour(t))]  # fmt: skip
    _write(feed, times, [g_per_kwh(_local_hour(t)) for t in times])
    EnergySite.objects.update_or_create(site=site, defaults={"grid_carbon_feed": feed})
    return feed


def _evening_peak_g(h: float) -> float:
    return 400.0 if 17 <= h < 19 else 100.0


def _kg(viewer_api, building) -> float:
    r = viewer_api.get(f"{API}/nodes/{building.pk}/consumption?fuel=electricity"
                       f"&start={DAY}&end={DAY}&period=day")  # fmt: skip
    assert r.status_code == 200
    return r.json()["kg_co2e"]


@pytest.mark.parametrize("interval", [1800, 3600])
def test_each_hours_use_is_weighted_by_that_hours_intensity(
    office, viewer_api, redis_client, interval
):
    site, building = office
    meter = _power_meter(building, "Elec", _peak_watts)
    _carbon_feed(site, _evening_peak_g, interval=interval)
    refresh.refresh([meter], DAY, DAY, now=NOW)
    (row,) = MeterDay.objects.filter(meter=meter)
    assert row.value == pytest.approx(36.0)
    assert row.grid_kg_co2e == pytest.approx(7.8)
    # the daily mean the figures used before: 125 g/kWh, 4.5 kg for the same day
    daily = report.electricity_factors(site, DAY, DAY, 0.5)[DAY]
    assert daily == pytest.approx(0.125)
    assert 36.0 * daily == pytest.approx(4.5)
    assert _kg(viewer_api, building) == pytest.approx(7.8)


def test_a_hole_in_the_carbon_feed_is_filled_on_a_line_never_as_zero(
    office, viewer_api, redis_client
):
    # The feed misses 18:00-19:00 (two half hours, 22 of 24 hours known): filled on the line
    # between 17:30 (400) and 19:00 (100): 18:00 -> 300, 18:30 -> 200, a mean of 250 over
    # the hour. 22 x 1 x 0.1 + 7 x 0.4 + 7 x 0.25 = 6.75 kg (5.0 if the hole counted as 0).
    site, building = office
    meter = _power_meter(building, "Elec", _peak_watts)
    _carbon_feed(site, _evening_peak_g, skip=lambda h: 18 <= h < 19)
    refresh.refresh([meter], DAY, DAY, now=NOW)
    assert _kg(viewer_api, building) == pytest.approx(6.75)


def test_a_day_the_feed_mostly_misses_uses_the_period_table(office, viewer_api, redis_client):
    # Only 12 of 24 hours of intensity (under 75 %): no weighted figure; the table's 200 g/kWh.
    site, building = office
    meter = _power_meter(building, "Elec", _peak_watts)
    _carbon_feed(site, _evening_peak_g, skip=lambda h: h < 12)
    GridCarbonPeriod.objects.create(site=site, start=DAY, end=DAY, g_per_kwh=200.0)
    refresh.refresh([meter], DAY, DAY, now=NOW)
    assert MeterDay.objects.get(meter=meter).grid_kg_co2e is None
    assert _kg(viewer_api, building) == pytest.approx(36 * 0.2)


def test_windows_follow_the_feeds_half_hours(office, viewer_api, redis_client):
    # 1 kW all day and 8 kW 17:00-17:30 (27.5 kWh); the grid is at 400 only 17:30-18:00. By
    # the feed's own half hours the peak's 4 kWh meet 100 g: 46 x 0.5 x 0.1 + 4 x 0.1 +
    # 0.5 x 0.4 = 2.9 kg. By whole hours 17:00-18:00 (4.5 kWh) would meet the hour's mean of
    # 250: 23 x 1 x 0.1 + 4.5 x 0.25 = 3.425 kg.
    site, building = office
    meter = _power_meter(building, "Elec", lambda h: 8000.0 if 17 <= h < 17.5 else 1000.0)
    _carbon_feed(site, lambda h: 400.0 if 17.5 <= h < 18 else 100.0)
    refresh.refresh([meter], DAY, DAY, now=NOW)
    (row,) = MeterDay.objects.filter(meter=meter)
    assert row.value == pytest.approx(27.5)
    assert row.grid_kg_co2e == pytest.approx(46 * 0.5 * 0.1 + 4 * 0.1 + 0.5 * 0.4)
    assert _kg(viewer_api, building) == pytest.approx(2.3 + 0.4 + 0.2)


def test_a_virtual_meters_weighted_co2_is_the_signed_sum_of_its_terms(
    office, viewer_api, redis_client
):
    # Building's own = main - a tenant's sub-meter that draws 1 kW flat: 36 - 24 = 12 kWh.
    site, building = office
    main = _power_meter(building, "Main", _peak_watts)
    tenant = _power_meter(building, "Tenant", lambda h: 1000.0)
    tenant.counts_to_node = False
    tenant.save()
    main.counts_to_node = False
    main.save()
    own = Meter.objects.create(node=building, name="Own", fuel="electricity", source="virtual")
    VirtualTerm.objects.create(meter=own, source=main, sign=1)
    VirtualTerm.objects.create(meter=own, source=tenant, sign=-1)
    _carbon_feed(site, _evening_peak_g)
    refresh.refresh([main, tenant, own], DAY, DAY, now=NOW)
    got = MeterDay.objects.get(meter=own)
    assert got.value == pytest.approx(12.0)
    # tenant: 24 kWh at 22 x 0.1 + 2 x 0.4 = 3.0 kg; own = 7.8 - 3.0 = 4.8 kg
    assert got.grid_kg_co2e == pytest.approx(4.8)
    assert _kg(viewer_api, building) == pytest.approx(4.8)
