"""The demo site's metering tree and a year of hourly meter history (docs/DEMO.md "Energy").

Two buildings, each with a gas and an electricity register on an hourly feed, and an hourly
outside temperature feed for the degree days. The Lecture block's heating switched to
booking-driven control SWITCH_DAYS_AGO days ago: before that its gas follows
30 + 60 x HDD kWh a day, after it 30 + 40 x HDD (only booked rooms are heated). That baseline
period is its performance line, so the energy page's CUSUM turns down on the switch day and
the kiosk panels show what it saved. The Visitor centre did not change (its heating was not
switched), which the CUSUM shows too: flat.

History is a pure function of the hour and the seed (each day's weather and noise come from
a generator seeded with the day), written in bulk with feeds.store.phpfina.write_points: running it
again writes the same values (idempotent), and a restart writes only what is new. The feeds'
own files are written here, never the live ones of the simulator.
"""

from __future__ import annotations

import math
import time
import zlib
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

import numpy as np
from django.db import transaction

from demo.weather import outside_temperature
from energy import refresh
from energy.benchmarks import GENERATION
from energy.models import HYDRO as HYDRO_GENERATOR
from energy.models import PV as PV_GENERATOR
from energy.models import EnergySite, FuelRate, Meter, MeterDay, MeterNode
from feeds.models import Feed
from feeds.store import phpfina
from feeds.store.service import feed_dir

HOUR = 3600
HISTORY_DAYS = 365
SWITCH_DAYS_AGO = 120
TAG = "energy-demo"
SEED = 17


@dataclass(frozen=True)
class BuildingSpec:
    name: str
    category: str
    area_m2: float
    gas_base: float  # kWh a day
    gas_slope: float  # kWh per degree day, before the switch
    gas_slope_after: float  # after it (the same when this building's heating did not change)
    elec_weekday: float
    elec_weekend: float
    rooms: tuple[str, ...] = ()
    occupancy_hours: int | None = None  # TM46's count a year; None: the standard hours


BUILDINGS = (
    BuildingSpec("Lecture block", "schools", 620.0, 30.0, 60.0, 40.0, 75.0, 25.0,
                 ("Lecture theatre", "Seminar room", "Workshop", "Straw bale room")),
    # open to the public every day 10:00-17:00: 7 h x 364 days, over the cultural category's
    # 2,040 standard hours, so its DEC benchmark is raised (docs/ENERGY.md, occupancy)
    BuildingSpec("Visitor centre", "cultural", 480.0, 20.0, 25.0, 25.0, 95.0, 80.0,
                 occupancy_hours=7 * 364),
)  # fmt: skip
PRICES = {"electricity": 0.27, "gas": 0.07}  # money a kWh, roughly UK 2024 business tariffs


def _midnight(d: date, tz: ZoneInfo) -> int:
    return int(datetime(d.year, d.month, d.day, tzinfo=tz).timestamp())


def switch_day(first: date) -> date:
    """The day booking-driven heating started: SWITCH_DAYS_AGO before the first run's today
    (fixed by the history's first day, so it does not move on a restart)."""
    return first + timedelta(days=HISTORY_DAYS - SWITCH_DAYS_AGO)


def _day_rng(d: date, salt: int) -> np.random.Generator:
    return np.random.default_rng([SEED, d.toordinal(), salt])


def hourly_temperature(hours: np.ndarray, tz: ZoneInfo) -> np.ndarray:
    """Outside °C per hour: demo.weather's typical day plus a weather anomaly per day
    (a few degrees, drawn per day so the degree days vary as real ones do)."""
    out = np.empty(len(hours))
    for i, t in enumerate(hours):
        local = datetime.fromtimestamp(int(t), tz)
        anomaly = _day_rng(local.date(), 0).normal(0.0, 2.5)
        out[i] = outside_temperature(local.timetuple().tm_yday, local.hour) + anomaly
    return out


def _hdd(day: date, tz: ZoneInfo) -> float:
    start = _midnight(day, tz)
    hours = np.arange(start, _midnight(day + timedelta(days=1), tz), HOUR)
    return max(0.0, 15.5 - float(hourly_temperature(hours, tz).mean()))


def daily_use(spec: BuildingSpec, fuel: str, day: date, first: date, tz: ZoneInfo) -> float:
    noise = _day_rng(day, zlib.crc32(f"{spec.name}/{fuel}".encode())).normal(1.0, 0.04)
    if fuel == "gas":
        slope = spec.gas_slope if day < switch_day(first) else spec.gas_slope_after
        return max(0.0, (spec.gas_base + slope * _hdd(day, tz)) * noise)
    weekday = day.weekday() < 5
    return (spec.elec_weekday if weekday else spec.elec_weekend) * noise


def _profile(fuel: str, hours_local: list[int]) -> np.ndarray:
    """Share of a day's use in each hour: heating 06-18, electricity mostly 08-18."""
    if fuel == "gas":
        w = np.array([3.0 if 6 <= h < 18 else 0.3 for h in hours_local])
    else:
        w = np.array([2.5 if 8 <= h < 18 else 0.6 for h in hours_local])
    return w / w.sum()


def register(
    spec: BuildingSpec, fuel: str, day: date, first: date, until: int, tz: ZoneInfo
) -> tuple[np.ndarray, np.ndarray]:
    """Hour starts from `day`'s midnight to `until` and the register (kWh) at each, counting
    from 0 at that midnight (`first`: the history's first day, which fixes the switch day)."""
    times, values, total = [], [], 0.0
    while _midnight(day, tz) <= until:
        start, end = _midnight(day, tz), _midnight(day + timedelta(days=1), tz)
        hours = list(range(start, end, HOUR))
        local = [datetime.fromtimestamp(h, tz).hour for h in hours]
        per_hour = daily_use(spec, fuel, day, first, tz) * _profile(fuel, local)
        for h, use in zip(hours, per_hour, strict=True):
            if h > until:
                break
            times.append(h)
            values.append(total)
            total += use
        day += timedelta(days=1)
    return np.array(times, dtype=np.int64), np.array(values)


@dataclass
class DemoEnergy:
    temperature_feed: Feed
    meters: list[Meter]
    lecture_block: MeterNode
    first: date


def _feed(name: str, unit: str) -> Feed:
    feed, _ = Feed.objects.get_or_create(
        tag=TAG, name=name, defaults={"unit": unit, "interval": HOUR, "public": False}
    )
    return feed


@transaction.atomic
def ensure_tree(site, today: date) -> DemoEnergy:
    """The buildings, rooms, meters, tariffs and outside temperature feed (by name, once)."""
    temperature = _feed("Outside temperature (hourly)", "°C")
    # The history's first day is fixed by the first run (the start of the feed's file), so a
    # restart days later continues the same registers rather than starting them anew.
    meta = phpfina.read_meta(feed_dir(temperature.pk), temperature.pk)
    tz = ZoneInfo(refresh.site_zone(site))
    first = (
        datetime.fromtimestamp(meta.start_time, tz).date()
        if meta is not None
        else today - timedelta(days=HISTORY_DAYS)
    )
    EnergySite.objects.get_or_create(site=site, defaults={"outside_temperature_feed": temperature})
    for fuel, price in PRICES.items():
        FuelRate.objects.get_or_create(site=site, fuel=fuel, defaults={"price_per_unit": price})
    meters, lecture = [], None
    for spec in BUILDINGS:
        node, created = MeterNode.objects.get_or_create(
            site=site, parent=None, name=spec.name,
            defaults={"kind": MeterNode.Kind.BUILDING, "floor_area_m2": spec.area_m2,
                      "tm46_category": spec.category,
                      "annual_occupancy_hours": spec.occupancy_hours},
        )  # fmt: skip
        if created and spec.gas_slope != spec.gas_slope_after:
            # the baseline: the days before the heating became booking-driven
            node.baseline_start = first + timedelta(days=1)
            node.baseline_end = switch_day(first) - timedelta(days=1)
            node.save(update_fields=["baseline_start", "baseline_end"])
        for room in spec.rooms:
            MeterNode.objects.get_or_create(site=site, parent=node, name=room,
                                            defaults={"kind": MeterNode.Kind.ROOM})  # fmt: skip
        for fuel in ("gas", "electricity"):
            feed = _feed(f"{spec.name} {fuel} (kWh register)", "kWh")
            meter, _ = Meter.objects.get_or_create(
                node=node, name=f"{spec.name} {fuel}",
                defaults={"fuel": fuel, "source": Meter.Source.CUMULATIVE, "feed": feed},
            )  # fmt: skip
            meters.append(meter)
        if spec.rooms:
            lecture = node
    return DemoEnergy(temperature, meters, lecture, first)


def write_history(demo: DemoEnergy, tz_name: str, now: float) -> int:
    """Write every hour from the first day to the last whole hour. What a feed's file holds
    already is not computed again: each register carries on from its stored value (the values
    are the same as a first run's). Returns points written."""
    tz = ZoneInfo(tz_name)
    until = int(now) // HOUR * HOUR
    written = 0
    held = _held_until(demo.temperature_feed)
    start = _midnight(_resume_day(demo, held, tz), tz)
    hours = np.arange(start, until + 1, HOUR, dtype=np.int64)
    temperature = np.round(hourly_temperature(hours, tz), 2)
    written += _write(demo.temperature_feed, hours, temperature, held, now)
    specs = {s.name: s for s in BUILDINGS}
    for meter in demo.meters:
        held = _held_until(meter.feed)
        day = _resume_day(demo, held, tz)
        t, v = register(specs[meter.node.name], meter.fuel, day, demo.first, until, tz)
        if day > demo.first and len(t):
            offset = _stored_value(meter.feed, int(t[0]))
            if offset is None:  # the file lost its slot: start the register again
                day = demo.first
                t, v = register(specs[meter.node.name], meter.fuel, day, day, until, tz)
            else:
                v = v + offset
        written += _write(meter.feed, t, np.round(v, 3), held, now)
    return written


def _resume_day(demo: DemoEnergy, held: int | None, tz: ZoneInfo) -> date:
    if held is None:
        return demo.first
    return max(demo.first, datetime.fromtimestamp(held, tz).date())


def _held_until(feed: Feed) -> int | None:
    """The time of the last slot the feed's file holds, or None without a file."""
    meta = phpfina.read_meta(feed_dir(feed.pk), feed.pk)
    n = phpfina.npoints(feed_dir(feed.pk), feed.pk) if meta is not None else 0
    return None if not n else meta.start_time + (n - 1) * HOUR


def _stored_value(feed: Feed, t: int) -> float | None:
    meta, data = phpfina.open_feed(feed_dir(feed.pk), feed.pk)
    i = (t - meta.start_time) // HOUR if meta is not None else -1
    if not 0 <= i < len(data) or not math.isfinite(float(data[i])):
        return None
    return float(data[i])


def _write(feed: Feed, times: np.ndarray, values: np.ndarray, held: int | None, now: float) -> int:
    if held is not None:  # only what the file does not hold yet
        keep = times > held
        times, values = times[keep], values[keep]
    if not len(times):
        return 0
    report = phpfina.write_points(feed_dir(feed.pk), feed.pk, HOUR, times, values, now=now)
    return report.written


def ensure_demo_energy(site, now: float | None = None) -> tuple[DemoEnergy, int, int]:
    """Tree, history up to the last whole hour, and MeterDay for the days not yet computed.
    Returns the demo, points written and meter-days computed."""
    now = time.time() if now is None else now
    tz = refresh.site_zone(site)
    today = datetime.fromtimestamp(now, ZoneInfo(tz)).date()
    demo = ensure_tree(site, today)
    points = write_history(demo, tz, now)
    done = MeterDay.objects.filter(meter__in=demo.meters).order_by("-day").first()
    # recompute from the last day already stored (it may have been partial) to today
    first = demo.first if done is None else min(done.day, today)
    meters = Meter.objects.filter(pk__in=[m.pk for m in demo.meters]).select_related(
        "node__site", "feed"
    )
    days = refresh.refresh(meters, first, today, now=now)
    return demo, points, days


def hourly_extender(demo: DemoEnergy, tz_name: str):
    """For the running simulator: a callable that writes the hours since the last call (file
    writes only, no database), so "today" on the kiosk keeps going while the demo runs."""

    def extend(now: float) -> int:
        return write_history(demo, tz_name, now)

    return extend


GENERATION_NODE = "Renewables"


@transaction.atomic
def ensure_generation_meters(site, feeds_by_role: dict[str, Feed]) -> list[Meter]:
    """The PV array and the hydro turbine as generation meters on their live power feeds (by
    name, once), marked with what generates and, for the turbine, the river's flow feed: so
    the findings rules pv_low_yield and hydro_no_output judge the demo's own plant
    (docs/FINDINGS.md). Left out while a feed is missing (an older demo site)."""
    pv, hydro = feeds_by_role.get("pv_power"), feeds_by_role.get("hydro_power")
    flow = feeds_by_role.get("hydro_flow")
    wanted = [
        ("PV array", pv, PV_GENERATOR, None),
        ("Hydro turbine", hydro, HYDRO_GENERATOR, flow),
    ]
    if not any(feed for _n, feed, _g, _f in wanted):
        return []
    node, _ = MeterNode.objects.get_or_create(
        site=site, parent=None, name=GENERATION_NODE, defaults={"kind": MeterNode.Kind.PLANT}
    )
    meters = []
    for name, feed, generator, flow_feed in wanted:
        if feed is None:
            continue
        meter, _ = Meter.objects.get_or_create(
            node=node, name=name,
            defaults={"fuel": GENERATION, "source": Meter.Source.POWER, "feed": feed,
                      "generator": generator, "flow_feed": flow_feed},
        )  # fmt: skip
        meters.append(meter)
    return meters
