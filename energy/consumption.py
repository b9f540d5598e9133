"""Consumption per period from meter readings: pure functions, no Django (docs/ENERGY.md).

Two kinds of meter feed:

- cumulative (a register in kWh or m³ that only counts up): the use in [a, b) is the register
  at b minus the register at a. A drop is a meter reset (replaced meter, rollover): we count on
  from the new value, so the increment across the drop is taken as 0 (at most one reading
  interval of use is lost; see docs/ENERGY.md). A register value at a period edge between two
  readings is interpolated on a straight line: "measured" when the readings either side are at
  most `resolution_s` apart, "estimated" when further apart but within `max_fill_s`, a gap
  beyond that.
- power (W): mean power per fixed window times the window's length, summed over the period
  (the integral of W over time). A missing window is filled on a straight line between the
  windows either side when the hole is at most `max_fill_s` long ("estimated"), else the
  period is a gap.

Periods are given as unix-second bounds: period i is [bounds[i], bounds[i+1]). Local calendar
bounds (DST-correct: 23- and 25-hour days) come from `local_bounds`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

import numpy as np

MEASURED = "measured"
ESTIMATED = "estimated"
GAP = "gap"
_RANK = {MEASURED: 0, ESTIMATED: 1, GAP: 2}
PERIODS = ("day", "week", "month", "year")
# The days the figures can hold: feeds keep unix seconds from 1970, and a day at the edge of
# Python's calendar (0001-01-01, 9999-12-31) has no midnight before or after it.
FIRST_DATE, LAST_DATE = date(1970, 1, 1), date(2100, 12, 31)


@dataclass(frozen=True)
class Usage:
    """Use in one period: `value` None exactly when `status` is GAP."""

    start: int  # unix seconds, inclusive
    end: int  # unix seconds, exclusive
    value: float | None
    status: str


def worst(*statuses: str) -> str:
    return max(statuses, key=_RANK.__getitem__) if statuses else MEASURED


def local_bounds(first: date, last: date, tz_name: str) -> list[int]:
    """Unix times of the local midnights starting each day first..last, and the one ending last."""
    tz = ZoneInfo(tz_name)
    out = []
    day = first
    while day <= last + timedelta(days=1):
        # A wall-clock midnight, localised: never inside a DST jump in zones that jump at 01:00+.
        out.append(int(datetime(day.year, day.month, day.day, tzinfo=tz).timestamp()))
        day += timedelta(days=1)
    return out


def cumulative_usage(
    times: Sequence[float] | np.ndarray,
    values: Sequence[float | None] | np.ndarray,
    bounds: Sequence[int],
    *,
    resolution_s: int,
    max_fill_s: int,
) -> list[Usage]:
    """Use per period from register readings (`times` ascending, unix s; None/NaN skipped)."""
    t = np.asarray(times, dtype=np.float64)
    v = np.asarray([np.nan if x is None else x for x in values], dtype=np.float64)
    ok = np.isfinite(v) & np.isfinite(t)
    t, v = t[ok], v[ok]
    b = np.asarray(bounds, dtype=np.float64)
    at = np.full(len(b), np.nan)
    status = [GAP] * len(b)
    if len(t):
        inc = np.diff(v)
        inc[inc < 0] = 0.0  # a drop is a reset: count on from the new value
        c = np.concatenate(([0.0], np.cumsum(inc)))
        idx = np.searchsorted(t, b, side="left")
        for k, (edge, i) in enumerate(zip(b, idx, strict=True)):
            if i < len(t) and t[i] == edge:
                at[k], status[k] = c[i], MEASURED
            elif 0 < i < len(t):
                t0, t1 = t[i - 1], t[i]
                span = t1 - t0
                if span <= max_fill_s:
                    at[k] = c[i - 1] + (c[i] - c[i - 1]) * (edge - t0) / span
                    status[k] = MEASURED if span <= resolution_s else ESTIMATED
    out = []
    for k in range(len(b) - 1):
        s = worst(status[k], status[k + 1])
        value = None if s == GAP else float(at[k + 1] - at[k])
        out.append(Usage(int(b[k]), int(b[k + 1]), value, s))
    return out


def power_usage(
    window_starts: Sequence[int] | np.ndarray,
    mean_watts: Sequence[float | None] | np.ndarray,
    step_s: int,
    bounds: Sequence[int],
    *,
    max_fill_s: int,
) -> list[Usage]:
    """kWh per period from mean power (W) per window of `step_s` seconds.

    Windows must be contiguous (window_starts[i] = window_starts[0] + i*step_s) and the bounds
    on the same grid; windows not given count as missing.
    """
    ts = np.asarray(window_starts, dtype=np.int64)
    w = np.asarray([np.nan if x is None else x for x in mean_watts], dtype=np.float64)
    b = np.asarray(bounds, dtype=np.int64)
    if len(b) < 2:
        return []
    grid = np.arange(b[0], b[-1], step_s, dtype=np.int64)
    full = np.full(len(grid), np.nan)
    if len(ts):
        pos = (ts - b[0]) // step_s
        inside = (pos >= 0) & (pos < len(grid))
        full[pos[inside]] = w[inside]
    valid = np.flatnonzero(np.isfinite(full))
    filled = np.zeros(len(grid), dtype=bool)
    missing = np.flatnonzero(~np.isfinite(full))
    if len(valid) >= 2 and len(missing):
        nxt = np.searchsorted(valid, missing)
        interior = (nxt > 0) & (nxt < len(valid))
        m, nx = missing[interior], nxt[interior]
        hole = (valid[nx] - valid[nx - 1] - 1) * step_s
        fill = hole <= max_fill_s
        m = m[fill]
        full[m] = np.interp(m, valid, full[valid])
        filled[m] = True
    kwh = full * step_s / 3_600_000.0
    edges = np.searchsorted(grid, b)
    out = []
    for k in range(len(b) - 1):
        lo, hi = edges[k], edges[k + 1]
        seg = kwh[lo:hi]
        if hi <= lo or not np.all(np.isfinite(seg)):
            out.append(Usage(int(b[k]), int(b[k + 1]), None, GAP))
        else:
            s = ESTIMATED if filled[lo:hi].any() else MEASURED
            out.append(Usage(int(b[k]), int(b[k + 1]), float(seg.sum()), s))
    return out


def period_key(day: date, period: str) -> date:
    """The first day of the local calendar period holding `day` (weeks start on Monday)."""
    if period == "day":
        return day
    if period == "week":
        return day - timedelta(days=day.weekday())
    if period == "month":
        return day.replace(day=1)
    if period == "year":
        return day.replace(month=1, day=1)
    raise ValueError(f"period must be one of {', '.join(PERIODS)}")


def group_days(
    days: Sequence[tuple[date, float | None, str]], period: str
) -> list[tuple[date, float | None, str, int]]:
    """Sum daily (day, value, status) into periods: (first day, value, status, days missing).

    A period with any gap day is a gap (value None) and says how many days are missing.
    """
    groups: dict[date, list] = {}
    for day, value, status in days:
        g = groups.setdefault(period_key(day, period), [0.0, MEASURED, 0])
        if status == GAP or value is None:
            g[1], g[2] = GAP, g[2] + 1
        else:
            g[0] += value
            g[1] = worst(g[1], status)
    return [(key, None if g[1] == GAP else g[0], g[1], g[2]) for key, g in sorted(groups.items())]


def combine(terms: Sequence[tuple[int, Sequence[tuple[float | None, str]]]]) -> list:
    """A virtual meter's days: sum of sign x each term's (value, status), day by day."""
    if not terms:
        return []
    n = len(terms[0][1])
    out = []
    for k in range(n):
        total, status = 0.0, MEASURED
        for sign, series in terms:
            value, s = series[k]
            if s == GAP or value is None:
                total, status = None, GAP
                break
            total += sign * value
            status = worst(status, s)
        out.append((total, status))
    return out
