"""emoncms's read semantics over our PHPFina files: what emoncms's /feed/data.json answers.

Written from emoncms's Modules/feed/feed_model.php (get_data, delta_mode_*) and
Modules/feed/engine/PHPFina.php (get_data_combined), so a client moving from emoncms gets the
same points from the same file (docs/FEEDS.md, "emoncms read semantics"):

- Windows start at `start` itself (`$time = $start`), every `interval` seconds while the
  window's start is at or before `end`; not at multiples of the interval.
- Window k covers the slots floor((t_k - start_time) / fi) .. floor((t_k + I - start_time) / fi)
  (end exclusive). average: the mean of its recorded slots; otherwise the slot of t_k itself.
- limitinterval=1 raises the interval to the feed's and rounds it to whole slots; with
  limitinterval=0 (emoncms's default on HTTP) the interval is used as given. An interval equal
  to or below the feed's turns averaging off (each point is then one slot).
- daily / weekly / monthly / annual: windows from local midnight of `start` (weekly: the first
  Monday on or AFTER it, as PHP's "this monday"; monthly: the 1st; annual: 1 January), each the
  next local midnight in `timezone`, so the 23- and 25-hour DST days are whole days.
- delta: `end` moves to the end of its interval, the samples are taken at each window start,
  the last window's missing sample is the feed's last value when that falls inside it, and each
  point is the next sample minus this one.

Like feeds/store/phpfina.py this module knows nothing of Django: the caller passes the directory, the
buffered points, the last value and the limits.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal

import numpy as np

from feeds.store import phpfina

CALENDAR = ("daily", "weekly", "monthly", "annual")
AUTO_POINTS = 800  # interval=0: about this many points (emoncms's default)


@dataclass(frozen=True)
class Request:
    start: int  # unix seconds
    end: int  # unix seconds, after start
    interval: int | str  # seconds (0: auto), "original", or one of CALENDAR
    average: bool = False
    delta: bool = False
    skipmissing: bool = False
    limitinterval: bool = False
    timezone: str = "UTC"


def php_round(value: float, places: int = 0) -> float:
    """PHP's round(): half away from zero on the shortest decimal form (round(1.005, 2) is
    1.01 in PHP, 1.0 with Python's round)."""
    if not math.isfinite(value):
        return value
    quantum = Decimal(1).scaleb(-places)
    return float(Decimal(repr(value)).quantize(quantum, rounding=ROUND_HALF_UP))


def auto_interval(start: int, end: int) -> int:
    return int(php_round((end - start) / AUTO_POINTS))


def _local_midnight(day: datetime, tz) -> int:
    return int(day.replace(tzinfo=tz).timestamp())


def calendar_starts(start: int, end: int, interval: str, timezone: str) -> np.ndarray:
    """Window edges as emoncms's PHP DateTime walk makes them: the first at local midnight of
    `start` (moved to its Monday on or after / the 1st / 1 January), then one per local day /
    week / month / year while the edge is <= end, plus the edge that closes the last window."""
    tz = phpfina._zone(timezone)
    day = datetime.fromtimestamp(start, tz).replace(
        hour=0, minute=0, second=0, microsecond=0, tzinfo=None
    )
    if interval == "weekly":
        day += timedelta(days=(7 - day.weekday()) % 7)  # PHP "this monday": forwards
    elif interval == "monthly":
        day = day.replace(day=1)
    elif interval == "annual":
        day = day.replace(month=1, day=1)
    out = []
    while True:
        t = _local_midnight(day, tz)
        out.append(t)
        if t > end:
            break
        day = _next(day, interval)
    return np.asarray(out, dtype=np.int64)


def _next(day: datetime, interval: str) -> datetime:
    if interval == "daily":
        return day + timedelta(days=1)
    if interval == "weekly":
        return day + timedelta(days=7)
    if interval == "monthly":
        return (day.replace(day=28) + timedelta(days=4)).replace(day=1)
    return day.replace(year=day.year + 1)


def delta_end(end: int, interval: int | str, timezone: str) -> int:
    """emoncms's delta_mode_next_interval: the end of the interval that holds `end`, so the
    current day (week, ...) gets its figure too."""
    if interval in CALENDAR:
        tz = phpfina._zone(timezone)
        day = datetime.fromtimestamp(end, tz).replace(
            hour=0, minute=0, second=0, microsecond=0, tzinfo=None
        ) + timedelta(days=1)  # "tomorrow midnight"
        if interval == "weekly":
            day += timedelta(days=(7 - day.weekday()) % 7 or 7)  # "next monday"
        elif interval == "monthly":
            day = _next(day.replace(day=1), "monthly")
        elif interval == "annual":
            day = day.replace(year=day.year + 1, month=1, day=1)
        return _local_midnight(day, tz)
    return end // int(interval) * int(interval) + int(interval)


# The longest a calendar window can be (a 25-hour day, a leap year): a lower bound on how many
# windows a range holds, so a request for too many is refused before their edges are built.
LONGEST = {"daily": 25 * 3600, "weekly": 7 * 86_400 + 3600,
           "monthly": 31 * 86_400 + 3600, "annual": 366 * 86_400 + 3600}  # fmt: skip


def read(
    directory: str | os.PathLike,
    feed_id: int,
    req: Request,
    *,
    feed_interval: int | None = None,
    overlay: tuple[np.ndarray, ...] | None = None,
    last: tuple[int, float] | None = None,
    max_points: int = phpfina.DEFAULT_MAX_POINTS,
) -> tuple[np.ndarray, np.ndarray]:
    """(times in unix seconds, values with NaN for null) as emoncms's get_data answers before
    its time format and `dp` are applied. `last`: the feed's last (time, value), used by delta.
    `interval` must already be resolved: seconds >= 1, "original" or a calendar name."""
    if req.end <= req.start:
        raise phpfina.BadReadRequest("end", "must be after start")
    view = phpfina.open_view(directory, feed_id, feed_interval=feed_interval, overlay=overlay)
    if view is None:  # no files and no interval: emoncms answers false; we answer no points
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float64)
    fi, st = view.interval, view.start_time
    interval = fi if req.interval == "original" else req.interval
    end = delta_end(req.end, interval, req.timezone) if req.delta else req.end
    average = req.average

    if interval in CALENDAR:
        if (end - req.start) // LONGEST[interval] > max_points:
            raise phpfina.TooManyPoints(f"over {max_points} {interval} points requested")
        edges = calendar_starts(req.start, end, interval, req.timezone)
        if len(edges) - 1 > max_points:
            raise phpfina.TooManyPoints(f"{len(edges) - 1} points requested, at most {max_points}")
    else:
        step = max(int(interval), 1)
        if req.limitinterval:
            step = max(step, fi)
            step = int(php_round(step / fi)) * fi
        if step <= fi:  # one slot per point: nothing to average (emoncms's "fullres")
            average = False
        count = (end - req.start) // step + 1
        if count > max_points:
            raise phpfina.TooManyPoints(f"{count} points requested, at most {max_points}")
        edges = req.start + step * np.arange(count + 1, dtype=np.int64)
    times = edges[:-1]
    slots = (edges - st) // fi  # floor, as PHPFina.php's pos_start / pos_end

    if average:
        values = phpfina.window_values(view, slots, "average")
    else:
        values = _samples(view, slots[:-1])

    if req.delta:
        times, values = _delta(times, values, last)
    if req.skipmissing:
        keep = ~np.isnan(values)
        times, values = times[keep], values[keep]
    return times, values


def _samples(view: phpfina.View, slots: np.ndarray) -> np.ndarray:
    """The value of each slot (NaN outside the file), buffered points merged: "sample" windows
    over the distinct slots, [u_j, u_j+1), give exactly the slot's own value."""
    out = np.full(len(slots), np.nan, dtype=np.float64)
    if len(slots) == 0:
        return out
    unique, index = np.unique(slots, return_inverse=True)
    edges = np.append(unique, unique[-1] + 1)
    out[:] = phpfina.window_values(view, edges, "sample")[index]
    return out


def _delta(
    times: np.ndarray, values: np.ndarray, last: tuple[int, float] | None
) -> tuple[np.ndarray, np.ndarray]:
    """emoncms's delta_mode_convert: point i = sample i+1 - sample i; a missing sample i+1 is
    the feed's last value when its time falls in (t_i, t_i+1]. The last sample only closes the
    window before it."""
    values = values.copy()
    if last is not None and last[1] is not None and len(times) > 1:
        lt, lv = last
        fill = np.isnan(values[1:]) & (lt > times[:-1]) & (lt <= times[1:])
        values[1:][fill] = lv
    if len(values) == 0:
        return times, values
    return times[:-1], values[1:] - values[:-1]


def file_last(directory: str | os.PathLike, feed_id: int) -> tuple[int, float | None] | None:
    """emoncms's PHPFina::lastvalue: the time of the file's last slot and its value (None when
    NaN); None when the feed has no data. emoncms answers this when Redis holds no last value
    (an imported feed, a lost Redis)."""
    meta, data = phpfina.open_feed(directory, feed_id)
    if meta is None or len(data) == 0:
        return None
    value = float(data[-1])
    return meta.start_time + meta.interval * (len(data) - 1), None if math.isnan(value) else value


def round_values(values: np.ndarray, places: int) -> list[float | None]:
    """`dp`: PHP round() of each value to `places` decimals; None for missing ones."""
    return [None if math.isnan(v) else php_round(v, places) for v in values.tolist()]
