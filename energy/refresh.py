"""Fill MeterDay from the feeds (read-only, through feeds.store.service.read) and virtual terms.

Reads hourly windows (quarter-hours in zones whose offset is not whole hours) so local
midnights, DST days included, fall on window edges: a cumulative feed is read as the change
per window (delta), a power feed as the mean W per window. energy/consumption.py turns those
into days. Run by the beat task energy.tasks.refresh_recent and `manage.py energy_refresh`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db import transaction

from energy import benchmarks, consumption, grid_carbon
from energy.models import EnergySite, Meter, MeterDay, VirtualTerm
from feeds.models import Feed
from feeds.store import service

HOUR = 3600
HALF_HOUR = 1800
QUARTER = 900
SLOTS_READ_ONE_BY_ONE = 12  # an hour of 5-minute slots
MAX_REFRESH_DAYS = 1100  # three years: bounds a request's CPU and memory


def site_zone(site) -> str:
    return getattr(site, "time_zone", None) or settings.TIME_ZONE


def window_step(tz_name: str, bounds: list[int]) -> int:
    """Whole hours when every local midnight is on a UTC hour, else quarter hours."""
    return HOUR if all(b % HOUR == 0 for b in bounds) else QUARTER


def read_windows(
    feed_id: int, start: int, end: int, step: int, *, average: bool, delta: bool, tz: str
) -> tuple[list[int], list[float | None]]:
    """Window starts (unix s) and values for [start, end), in chunks under the point limit."""
    chunk = max(1, min(10_000, settings.BMS_FEED_MAX_POINTS - 2)) * step
    times: list[int] = []
    values: list[float | None] = []
    t = start
    while t < end:
        stop = min(end, t + chunk) - step  # read() includes the window starting at `end`
        points = service.read(
            feed_id, t, stop, step, average=average, delta=delta, timezone=tz,
            feed_interval=None,
        )  # fmt: skip
        for t_ms, value in points:
            if t <= t_ms // 1000 < t + chunk:
                times.append(t_ms // 1000)
                values.append(value)
        t += chunk
    return times, values


def feed_days(meter: Meter, first: date, last: date, tz: str, now: float | None = None) -> list:
    """[(day, value, status)] for first..last from the meter's feed."""
    bounds = consumption.local_bounds(first, last, tz)
    days = [first + timedelta(days=i) for i in range(len(bounds) - 1)]
    if meter.feed_id is None:
        return [(d, None, consumption.GAP) for d in days]
    now = time.time() if now is None else now
    usage = feed_usage(meter, bounds, tz, now)
    future = int(now)
    out = []
    for day, u in zip(days, usage, strict=True):
        if u.start >= future:
            out.append((day, None, consumption.GAP))  # not yet: nothing to say
        else:
            out.append((day, u.value, u.status))
    return out


def feed_usage(meter: Meter, bounds: list[int], tz: str, now: float) -> list:
    """consumption.Usage per period between `bounds` (on the window grid) from the feed."""
    step = window_step(tz, bounds)
    fill = meter.max_fill_hours * HOUR
    margin = (fill // step + 1) * step
    start = bounds[0] - margin
    end = min(bounds[-1] + margin, (int(now) // step + 1) * step)
    scale = meter.feed_scale  # a feed in Wh or kW (energy/models.py Meter.feed_unit_error)
    if meter.source == Meter.Source.POWER:
        t, v = read_windows(meter.feed_id, start, end, step, average=True, delta=False, tz=tz)
        if scale != 1.0:
            v = [None if x is None else x * scale for x in v]
        return consumption.power_usage(t, v, step, bounds, max_fill_s=fill)
    interval = meter.feed.interval if meter.feed else step
    # delta = last reading of the window minus the last one before it: a running sum of
    # the deltas is the register (less its first value). That last reading is the window's
    # last slot, `interval` before the window's end (the 23:00 reading of an hourly feed for
    # 23:00-24:00), not the end itself: taking it as the register at the end put every day
    # one reading early (23:00 to 23:00), found by the outside tester. Feeds of 5 minutes
    # or more are read slot by slot, so the register at midnight is the midnight reading
    # itself; finer feeds by the window, the midnight register interpolated between the last
    # slots of the hours either side (off by at most a minute's use; a year of 10 s slots
    # read slot by slot would be 3 million points).
    fine = interval < step and step % interval == 0 and step // interval <= SLOTS_READ_ONE_BY_ONE
    read_step = interval if fine else step
    t, d = read_windows(meter.feed_id, start, end, read_step, average=False, delta=True, tz=tz)
    if scale != 1.0:
        d = [None if x is None else x * scale for x in d]
    step = read_step
    lag = max(0, step - interval)  # from window start to its last slot
    times, regs, total = [], [], 0.0
    for i, (ws, dv) in enumerate(zip(t, d, strict=True)):
        if dv is None:
            continue
        if not times and i == 0:
            times.append(ws - step + lag)  # the previous window's last slot
            regs.append(0.0)
        total += dv
        times.append(ws + lag)
        regs.append(total)
    return consumption.cumulative_usage(
        times, regs, bounds, resolution_s=max(step, interval), max_fill_s=fill
    )


def dependency_order(meters: Iterable[Meter]) -> list[Meter]:
    """Physical meters first, then each virtual after the meters it adds."""
    meters = list(meters)
    by_id = {m.pk: m for m in meters}
    deps: dict[int, set[int]] = {m.pk: set() for m in meters}
    for owner, src in VirtualTerm.objects.filter(meter__in=by_id).values_list("meter", "source"):
        if src in by_id:
            deps[owner].add(src)
    out, done = [], set()
    while len(out) < len(meters):
        ready = [by_id[i] for i, d in deps.items() if i not in done and d <= done]
        if not ready:  # a cycle slipped past validation: leave those meters out, never loop
            break
        for m in ready:
            out.append(m)
            done.add(m.pk)
    return out


def refresh(meters: Iterable[Meter], first: date, last: date, now: float | None = None) -> int:
    """Recompute MeterDay rows first..last for the meters; returns the rows written."""
    if (last - first).days + 1 > MAX_REFRESH_DAYS:
        raise ValueError(f"at most {MAX_REFRESH_DAYS} days per refresh")
    if first < consumption.FIRST_DATE or last > consumption.LAST_DATE:
        # never write empty day rows for years no feed can hold
        raise ValueError(f"days must be within {consumption.FIRST_DATE}..{consumption.LAST_DATE}")
    written = 0
    series: dict[int, list] = {}
    kg_series: dict[int, list[float | None]] = {}
    carbon: dict[int, Feed | None] = {}  # site -> its grid carbon feed, read once
    intensities: dict[tuple, object] = {}  # the carbon feed's windows, read once per site
    now = time.time() if now is None else now
    n_days = (last - first).days + 1
    for meter in dependency_order(meters):
        site = meter.node.site
        tz = site_zone(site)
        weighted = benchmarks.QUANTITY[meter.fuel] == benchmarks.ELECTRICITY
        if weighted and site.pk not in carbon:
            carbon[site.pk] = grid_carbon_feed(site)
        if meter.source == Meter.Source.VIRTUAL:
            terms = list(meter.terms.all())
            parts, kg_parts = [], []
            for term in terms:
                src = series.get(term.source_id)
                if src is None:
                    src = stored_days(term.source_id, first, last)
                parts.append((term.sign, [(v, s) for _d, v, s in src]))
                kg = kg_series.get(term.source_id)
                if kg is None:
                    kg = stored_grid_kg(term.source_id, first, last)
                kg_parts.append((term.sign, kg))
            combined = consumption.combine(parts)
            days = [first + timedelta(days=i) for i in range(n_days)]
            rows = [(d, v, s) for d, (v, s) in zip(days, combined, strict=True)] if parts else []
            # CO2 is linear in use: a virtual meter's weighted kg is the signed sum of its terms'
            kgs = _signed_sum(kg_parts, n_days) if parts else []
        else:
            rows = feed_days(meter, first, last, tz, now=now)
            feed = carbon.get(site.pk) if weighted else None
            kgs = [None] * len(rows)
            if feed is not None and meter.feed_id is not None:
                kgs = grid_kg_days(meter, rows, tz, now, feed, intensities)
        series[meter.pk] = rows
        kg_series[meter.pk] = kgs
        with transaction.atomic():
            MeterDay.objects.filter(meter=meter, day__gte=first, day__lte=last).delete()
            MeterDay.objects.bulk_create(
                [
                    MeterDay(meter=meter, day=d, value=v, status=s, grid_kg_co2e=kg)
                    for (d, v, s), kg in zip(rows, kgs, strict=True)
                ],
                batch_size=1000,
            )
        written += len(rows)
    return written


def grid_carbon_feed(site) -> Feed | None:
    row = EnergySite.objects.filter(site=site).select_related("grid_carbon_feed").first()
    return row.grid_carbon_feed if row else None


def weighting_step(tz: str, day_bounds: list[int], carbon_interval: int) -> int:
    """The windows CO2 is weighted over: the carbon feed's own interval when it is a half or
    quarter hour (a half-hourly national feed), else hours; quarter hours in zones whose
    midnights are not on a UTC hour (their windows must hold the local midnights)."""
    if window_step(tz, day_bounds) == QUARTER:
        return QUARTER
    return carbon_interval if carbon_interval in (HALF_HOUR, QUARTER) else HOUR


def grid_kg_days(
    meter: Meter, rows: list, tz: str, now: float, feed: Feed, intensities: dict
) -> list[float | None]:
    """kg CO2e per day of `rows` (the meter's days as computed): each window's use x that
    window's grid intensity (energy/grid_carbon.py for the gaps)."""
    first, last = rows[0][0], rows[-1][0]
    day_bounds = consumption.local_bounds(first, last, tz)
    wstep = weighting_step(tz, day_bounds, feed.interval)
    grid = list(range(day_bounds[0], day_bounds[-1], wstep))
    key = (feed.pk, wstep, day_bounds[0], day_bounds[-1])
    if key not in intensities:
        t, v = read_windows(feed.pk, day_bounds[0], day_bounds[-1], wstep, average=True,
                            delta=False, tz=tz)  # fmt: skip
        intensities[key] = grid_carbon.intensity_grid(t, v, grid)
    intensity = intensities[key]
    usage = feed_usage(meter, [*grid, day_bounds[-1]], tz, now)
    out: list[float | None] = []
    for k, (_day, value, _status) in enumerate(rows):
        lo = (day_bounds[k] - day_bounds[0]) // wstep
        hi = (day_bounds[k + 1] - day_bounds[0]) // wstep
        uses = [u.value if u.start < now else None for u in usage[lo:hi]]
        out.append(grid_carbon.day_kg(uses, intensity[lo:hi], value))
    return out


def _signed_sum(parts: list[tuple[int, list[float | None]]], n: int) -> list[float | None]:
    out: list[float | None] = []
    for k in range(n):
        total: float | None = 0.0
        for sign, kg in parts:
            if kg[k] is None:
                total = None
                break
            total += sign * kg[k]
        out.append(total)
    return out


def stored_grid_kg(meter_id: int, first: date, last: date) -> list[float | None]:
    have = dict(
        MeterDay.objects.filter(meter_id=meter_id, day__gte=first, day__lte=last).values_list(
            "day", "grid_kg_co2e"
        )
    )
    return [have.get(first + timedelta(days=i)) for i in range((last - first).days + 1)]


def stored_days(meter_id: int, first: date, last: date) -> list:
    have = {
        d: (v, s)
        for d, v, s in MeterDay.objects.filter(
            meter_id=meter_id, day__gte=first, day__lte=last
        ).values_list("day", "value", "status")
    }
    out = []
    day = first
    while day <= last:
        v, s = have.get(day, (None, consumption.GAP))
        out.append((day, v, s))
        day += timedelta(days=1)
    return out


def local_today(tz: str, now: float | None = None) -> date:
    return datetime.fromtimestamp(time.time() if now is None else now, ZoneInfo(tz)).date()
