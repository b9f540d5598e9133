"""What each kind of panel shows, computed from the feed store (feeds.store.service only).

One function per Panel.Kind. Each takes the panel's visible feeds (already filtered for
public access) and a Clock, and returns the plain JSON the kiosk page draws. Times go out as
milliseconds (Chart.js's linear x axis and JavaScript Dates use ms); values as floats or None.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from datetime import time as dtime
from zoneinfo import ZoneInfo

from displays import equivalents
from displays.models import Panel
from feeds.models import Feed
from feeds.store import service

DAY = 86400
FLOW_UNITS = {"l/s", "l/min", "m³/s", "m3/s", "m³/h", "m3/h"}
POWER_UNITS = {"W", "kW", "MW"}
ENERGY_UNITS = {"Wh", "kWh", "MWh"}


@dataclass(frozen=True)
class Clock:
    """The moment and place a display is computed for (tests pass a fixed `now`)."""

    now: int  # unix seconds
    tz_name: str
    grid_g_per_kwh: float

    @property
    def tz(self) -> ZoneInfo:
        return ZoneInfo(self.tz_name)

    def day_start(self, days_back: int = 0) -> int:
        """Unix time of local midnight `days_back` days before today, in the site's zone.

        Counted in calendar days, not 86400 s, so a 23- or 25-hour DST day starts right.
        """
        today = datetime.fromtimestamp(self.now, self.tz).date()
        day = today - timedelta(days=days_back)
        return int(datetime.combine(day, dtime(0), tzinfo=self.tz).timestamp())


def _ms(t: int | float | None) -> int | None:
    return None if t is None else int(t * 1000)


def _clean(value: float | None) -> float | None:
    # JSON has no NaN or infinity; a feed gap is None.
    if value is None or not math.isfinite(value):
        return None
    return float(value)


def _first(feeds: Sequence[Feed], units: set[str] | None = None) -> Feed | None:
    """The panel's feed with one of `units`, else its first feed."""
    if units:
        for feed in feeds:
            if feed.unit in units:
                return feed
    return feeds[0] if feeds else None


def feed_label(panel: Panel, feed: Feed) -> str:
    labels = panel.options.get("labels") or {}
    return labels.get(str(feed.id)) or feed.name


def _colour(panel: Panel, feed: Feed, index: int) -> str:
    colours = panel.options.get("colours") or {}
    palette = [panel.colour, "#ff5f5f", "#4fd1ff", "#9dff6a", "#d28cff"]
    return colours.get(str(feed.id)) or palette[index % len(palette)]


def _reading(feed: Feed, last: dict[int, tuple[int, float]]) -> dict:
    t, value = last.get(feed.id, (None, None))
    return {"value": _clean(value), "t": _ms(t)}


def _sample_interval(feed: Feed, span: int, points: int) -> int:
    """Seconds between points for about `points` over `span`, never finer than the feed."""
    return max(feed.interval, math.ceil(span / points))


def daily_kwh(feed: Feed, clock: Clock, days: int) -> list[list]:
    """[[local-midnight ms, kWh], ...] for the last `days` days including today, from a
    cumulative kWh feed using the feed store's daily delta in the site's time zone."""
    start = clock.day_start(days - 1)
    rows = service.read(feed.id, start, clock.now, "daily", delta=True, timezone=clock.tz_name)
    wanted = {clock.day_start(back) * 1000 for back in range(days)}
    by_day = {int(t): _clean(v) for t, v in rows if int(t) in wanted}
    return [[t, by_day.get(t)] for t in sorted(wanted)]


def energy_today_kwh(feed: Feed, clock: Clock) -> float | None:
    ((_t, kwh),) = daily_kwh(feed, clock, 1)
    return kwh


# --- one function per kind ------------------------------------------------------------------

PanelFn = Callable[[Panel, Sequence[Feed], Clock, dict], dict]


def live_value(panel: Panel, feeds: Sequence[Feed], clock: Clock, last: dict) -> dict:
    feed = _first(feeds, POWER_UNITS)
    return {"unit": panel.unit or feed.unit, **_reading(feed, last)}


def energy_today(panel: Panel, feeds: Sequence[Feed], clock: Clock, last: dict) -> dict:
    feed = _first(feeds, ENERGY_UNITS)
    return {"unit": "kWh", "value": energy_today_kwh(feed, clock), "t": _ms(clock.now)}


def chart_24h(panel: Panel, feeds: Sequence[Feed], clock: Clock, last: dict) -> dict:
    step = int(panel.options.get("interval", 300))
    # Snap to the step so successive polls read the same slots and the line does not wobble.
    end = clock.now - clock.now % step
    start = end - DAY
    series = []
    for index, feed in enumerate(feeds):
        interval = max(step, feed.interval)
        rows = service.read(feed.id, start, end, interval, average=True)
        series.append(
            {
                "feed": feed.id,
                "label": feed_label(panel, feed),
                "unit": panel.unit or feed.unit,
                "colour": _colour(panel, feed, index),
                "points": [[int(t), _clean(v)] for t, v in rows],
            }
        )
    return {"start": start * 1000, "end": end * 1000, "series": series}


def _daily_bars(days: int) -> PanelFn:
    def bars(panel: Panel, feeds: Sequence[Feed], clock: Clock, last: dict) -> dict:
        feed = _first(feeds, ENERGY_UNITS)
        rows = daily_kwh(feed, clock, days)
        known = [v for _t, v in rows if v is not None]
        return {"unit": "kWh", "bars": rows, "total": sum(known) if known else None}

    return bars


def peak_today(panel: Panel, feeds: Sequence[Feed], clock: Clock, last: dict) -> dict:
    feed = _first(feeds, POWER_UNITS)
    start = clock.day_start()
    span = max(clock.now - start, feed.interval)
    step = _sample_interval(feed, span, 4000)
    rows = service.read(feed.id, start - start % step, clock.now, step)
    best_t, best = None, None
    for t, value in rows:
        value = _clean(value)
        if value is not None and (best is None or value > best):
            best_t, best = int(t), value
    return {"unit": panel.unit or feed.unit, "value": best, "t": best_t}


def co2_saved(panel: Panel, feeds: Sequence[Feed], clock: Clock, last: dict) -> dict:
    feed = _first(feeds, ENERGY_UNITS)
    options = panel.options
    period = options.get("period", "today")
    if period == "total":
        kwh = _reading(feed, last)["value"]
    else:
        days = {"today": 1, "7d": 7, "30d": 30}[period]
        known = [v for _t, v in daily_kwh(feed, clock, days) if v is not None]
        kwh = sum(known) if known else None
    factor = float(options.get("grid_intensity_g_per_kwh", clock.grid_g_per_kwh))
    if kwh is None:
        return {"unit": "kg", "value": None, "kwh": None, "period": period,
                "grid_g_per_kwh": factor, "equivalents": []}  # fmt: skip
    return {
        "unit": "kg",
        "value": equivalents.co2_grams(kwh, factor) / 1000,
        "kwh": kwh,
        "period": period,
        "grid_g_per_kwh": factor,
        "equivalents": [e.as_dict() for e in equivalents.equivalents(kwh, factor, options)],
    }


def _items(panel: Panel, feeds: Sequence[Feed], last: dict) -> list[dict]:
    return [
        {
            "feed": feed.id,
            "label": feed_label(panel, feed),
            "unit": feed.unit or panel.unit,
            "colour": _colour(panel, feed, index),
            **_reading(feed, last),
        }
        for index, feed in enumerate(feeds)
    ]


def temperatures(panel: Panel, feeds: Sequence[Feed], clock: Clock, last: dict) -> dict:
    return {"items": _items(panel, feeds, last)}


def hydro(panel: Panel, feeds: Sequence[Feed], clock: Clock, last: dict) -> dict:
    # Flow first, then output, whatever order the feeds were attached in.
    def rank(feed: Feed) -> int:
        return 0 if feed.unit in FLOW_UNITS else 1 if feed.unit in POWER_UNITS else 2

    ordered = sorted(feeds, key=rank)
    items = _items(panel, [f for f in ordered if f.unit not in ENERGY_UNITS], last)
    return {"items": items}


KINDS: dict[str, PanelFn] = {
    Panel.Kind.LIVE_VALUE: live_value,
    Panel.Kind.ENERGY_TODAY: energy_today,
    Panel.Kind.CHART_24H: chart_24h,
    Panel.Kind.DAILY_7: _daily_bars(7),
    Panel.Kind.DAILY_30: _daily_bars(30),
    Panel.Kind.PEAK_TODAY: peak_today,
    Panel.Kind.CO2_SAVED: co2_saved,
    Panel.Kind.TEMPERATURES: temperatures,
    Panel.Kind.HYDRO: hydro,
}
CHART_KINDS = {Panel.Kind.CHART_24H, Panel.Kind.DAILY_7, Panel.Kind.DAILY_30}
MULTI_KINDS = {Panel.Kind.TEMPERATURES, Panel.Kind.HYDRO}


def default_span(kind: str) -> int:
    """Cells a panel takes in the grid: charts and multi-value panels are two cells wide."""
    if kind == Panel.Kind.ENERGY_FLOW:
        return 4  # the whole width: a row of its own (kiosk_data.pack keeps it in bounds)
    return 2 if kind in CHART_KINDS or kind in MULTI_KINDS else 1
