"""An independent reference for emoncms's /feed/data.json semantics, written from the rules in
docs/FEEDS.md ("emoncms read semantics"), not from feeds/emoncms/read.py: one window at a
time, the file read with `struct`, calendar edges walked with datetime one day at a time.
Slow and obvious on purpose; tests/feeds/test_emoncms_differential.py compares the two.
"""

from __future__ import annotations

import math
import struct
from datetime import date, datetime, time, timedelta
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from zoneinfo import ZoneInfo


class Feed:
    def __init__(self, directory: Path, feed_id: int) -> None:
        _, _, self.interval, self.start_time = struct.unpack(
            "<4I", (directory / f"{feed_id}.meta").read_bytes()
        )
        raw = (directory / f"{feed_id}.dat").read_bytes()
        self.values = [v for (v,) in struct.iter_unpack("<f", raw)]

    def slot(self, t: int) -> int:
        return math.floor((t - self.start_time) / self.interval)

    def at(self, pos: int) -> float | None:
        if 0 <= pos < len(self.values) and not math.isnan(self.values[pos]):
            return self.values[pos]
        return None


def php_round(x: float, places: int = 0) -> float:
    return float(Decimal(repr(x)).quantize(Decimal(1).scaleb(-places), rounding=ROUND_HALF_UP))


def midnight(d: date, tz: ZoneInfo) -> int:
    return int(datetime.combine(d, time(0), tzinfo=tz).timestamp())


def first_day(start: int, mode: str, tz: ZoneInfo) -> date:
    d = datetime.fromtimestamp(start, tz).date()
    if mode == "weekly":
        while d.weekday() != 0:  # "this monday": forwards to a Monday
            d += timedelta(days=1)
    elif mode == "monthly":
        d = d.replace(day=1)
    elif mode == "annual":
        d = d.replace(month=1, day=1)
    return d


def next_day(d: date, mode: str) -> date:
    if mode == "daily":
        return d + timedelta(days=1)
    if mode == "weekly":
        return d + timedelta(days=7)
    if mode == "monthly":
        return date(d.year + (d.month == 12), d.month % 12 + 1, 1)
    return date(d.year + 1, 1, 1)


def delta_end(end: int, interval, tz: ZoneInfo) -> int:
    if isinstance(interval, int):
        return (end // interval) * interval + interval
    d = datetime.fromtimestamp(end, tz).date() + timedelta(days=1)  # tomorrow's midnight
    if interval == "weekly":
        d += timedelta(days=1)
        while d.weekday() != 0:  # the next Monday after it
            d += timedelta(days=1)
    elif interval == "monthly":
        d = next_day(d.replace(day=1), "monthly")
    elif interval == "annual":
        d = date(d.year + 1, 1, 1)
    return midnight(d, tz)


def windows(feed: Feed, start: int, end: int, interval, limitinterval: bool, average: bool,
            tz: ZoneInfo):  # fmt: skip
    """(window start, window end, averaging on?) for each window."""
    out = []
    if isinstance(interval, str):
        d = first_day(start, interval, tz)
        t = midnight(d, tz)
        while t <= end:
            d = next_day(d, interval)
            nxt = midnight(d, tz)
            out.append((t, nxt))
            t = nxt
        return out, average
    step = interval
    if limitinterval:
        step = max(step, feed.interval)
        step = int(php_round(step / feed.interval)) * feed.interval
    if step <= feed.interval:
        average = False
    t = start
    while t <= end:
        out.append((t, t + step))
        t += step
    return out, average


def data(feed: Feed, start: int, end: int, interval, *, average=False, delta=False,
         skipmissing=False, limitinterval=False, timezone="UTC", last=None) -> list:  # fmt: skip
    """[[t_seconds, value or None], ...] before the time format."""
    tz = ZoneInfo(timezone)
    if delta:
        end = delta_end(end, interval, tz)
    wins, average = windows(feed, start, end, interval, limitinterval, average, tz)
    points = []
    for a, b in wins:
        if average:
            recorded = [feed.at(p) for p in range(max(feed.slot(a), 0), feed.slot(b))]
            recorded = [v for v in recorded if v is not None]
            value = sum(recorded) / len(recorded) if recorded else None
        else:
            value = feed.at(feed.slot(a))
        points.append([a, value])
    if delta:
        for i in range(len(points) - 1):
            nxt = points[i + 1]
            if nxt[1] is None and last is not None and points[i][0] < last[0] <= nxt[0]:
                nxt[1] = last[1]
            here = points[i][1]
            points[i][1] = None if here is None or nxt[1] is None else nxt[1] - here
        points = points[:-1]
    if skipmissing:
        points = [p for p in points if p[1] is not None]
    return points
