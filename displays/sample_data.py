"""Believable synthetic history for the demo feeds: PV, solar thermal and hydro.

Used by the kiosk browser tests (tests/displays/test_kiosk_browser.py) so the kiosk is seen with
realistic days with passing cloud, a tank warming through the day, a river after rain), written through the
real feed store. Seeded, so the same `now` gives the same data.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from datetime import datetime
from zoneinfo import ZoneInfo

from core.dates import DEFAULT_TIME_ZONE
from feeds.models import Feed
from feeds.store import service

PV_PEAK_W = 10_000.0  # a 10 kWp roof
HYDRO_HEAD_M = 12.0
HYDRO_EFFICIENCY = 0.7
HYDRO_MAX_W = 15_000.0
COLLECTOR_W_PER_K = 120.0  # heat carried to the tank per kelvin above it, pump running


def _sun(t: int, tz: ZoneInfo, latitude: float, day_of_year: int | None = None) -> float:
    """0..1: how high the sun is, from the day of year and the local solar time."""
    local = datetime.fromtimestamp(t, tz)
    doy = day_of_year or local.timetuple().tm_yday
    declination = math.radians(23.44) * math.sin(2 * math.pi * (doy - 81) / 365)
    solar_hour = local.hour + local.minute / 60 - (local.dst().total_seconds() / 3600)
    hour_angle = math.radians(15 * (solar_hour - 12))
    lat = math.radians(latitude)
    elevation = math.sin(lat) * math.sin(declination) + math.cos(lat) * math.cos(
        declination
    ) * math.cos(hour_angle)
    return max(0.0, elevation)


class _Clouds:
    """Smooth passing cloud: a few slow waves per day, different each day, seeded."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.days: dict[int, list[tuple[float, float, float]]] = {}

    def __call__(self, t: int) -> float:
        day = t // 86400
        waves = self.days.get(day)
        if waves is None:
            rnd = random.Random(self.seed * 100_003 + day)
            overcast = rnd.random() < 0.2
            depth = 0.6 if overcast else rnd.uniform(0.05, 0.35)
            waves = [(rnd.uniform(1200, 7200), rnd.uniform(0, 6.3), depth) for _ in range(3)]
            self.days[day] = waves
        cover = sum(d * (0.5 + 0.5 * math.sin(2 * math.pi * t / p + ph)) for p, ph, d in waves)
        return max(0.15, 1 - cover / len(waves) * 1.6)


def _times(start: int, end: int, step: int, fine_step: int, fine_from: int) -> Iterator[int]:
    """Coarse steps for the old days (daily bars), fine ones for the last day (the chart)."""
    t = start - start % step
    while t <= end:
        yield t
        t += fine_step if t >= fine_from else step


def write_sample_history(
    feeds: dict[str, Feed],
    now: int,
    *,
    days: int = 30,
    step: int = 600,
    fine_step: int = 60,
    fine_hours: int = 26,
    tz_name: str = DEFAULT_TIME_ZONE,
    latitude: float = 52.6,
    seed: int = 7,
    sun_day_of_year: int | None = None,
) -> int:
    """Write `days` of history up to `now` into the feeds by role; returns points written.

    sun_day_of_year: shine a fixed season's sun (172: midsummer) whatever the date, so a
    screenshot taken in November still shows the plant working.
    """
    tz = ZoneInfo(tz_name)
    clouds = _Clouds(seed)
    rain = random.Random(seed)
    start = now - days * 86400
    points: list[tuple[int, int, float]] = []

    def add(role: str, t: int, value: float) -> None:
        if role in feeds:
            points.append((feeds[role].id, t, round(value, 3)))

    pv_kwh, heat_kwh, hydro_kwh = 18_250.0, 6_420.0, 141_900.0  # meters with a past
    tank = 38.0
    flow = 70.0
    storm = 0.0
    previous = start - step
    for t in _times(start, now, step, fine_step, now - fine_hours * 3600):
        step_s, previous = t - previous, t
        sun = _sun(t, tz, latitude, sun_day_of_year)
        pv = PV_PEAK_W * sun * clouds(t) * 0.92
        add("pv_power", t, pv)
        pv_kwh += pv * step_s / 3.6e6
        add("pv_kwh", t, pv_kwh)

        # Solar thermal: the collector warms with the sun; the pump runs when it beats the tank.
        collector = 9.0 + 75.0 * sun * clouds(t + 1800)
        heat = max(0.0, (collector - tank - 4.0) * COLLECTOR_W_PER_K)
        tank += (heat * step_s / 3.6e6) * 1.4 - 0.00012 * (tank - 15.0) * step_s / 60
        tank = min(tank, 75.0)
        add("thermal_collector", t, collector)
        add("thermal_tank", t, tank)
        add("thermal_power", t, heat)
        heat_kwh += heat * step_s / 3.6e6
        add("thermal_kwh", t, heat_kwh)

        # Hydro: a base flow, storms that arrive now and then and drain away over a day or two.
        if rain.random() < step_s / (4 * 86400):
            storm += rain.uniform(60, 220)
        storm *= math.exp(-step_s / (20 * 3600))
        flow = 65.0 + storm + 6.0 * math.sin(2 * math.pi * t / 86400)
        power = min(HYDRO_MAX_W, 1000 * 9.81 * flow / 1000 * HYDRO_HEAD_M * HYDRO_EFFICIENCY)
        add("hydro_flow", t, flow)
        add("hydro_power", t, power)
        hydro_kwh += power * step_s / 3.6e6
        add("hydro_kwh", t, hydro_kwh)
    service.log_points(points)
    service.commit_all()
    return len(points)
