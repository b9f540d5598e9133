"""Stale or missing sensor: say why the reading cannot be trusted (the evaluator then falls
back: see control/engine/strategies/fallback.py)."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from control.engine.specs import Reading
from control.engine.timefmt import hhmm


def problem(
    reading: Reading | None,
    has_sensor: bool,
    now_s: float,
    stale_after_s: int,
    name: str = "",
    tz: ZoneInfo | None = None,
) -> str:
    """Why the reading cannot be trusted, or "" when it can. With the sensor's `name` and the
    site's `tz` the text names the point and the time its readings stopped."""
    what = f"Temperature sensor '{name}'" if name else "Temperature sensor"
    if not has_sensor:
        return "No temperature sensor configured"
    if reading is None:
        return f"No reading from the temperature sensor{f' {name!r}' if name else ''}"
    if reading.value is None or math.isnan(reading.value):
        return f"{what} reading is not a number"
    age = now_s - reading.t
    if age > stale_after_s:
        since = ""
        if tz is not None:
            since = f" since {hhmm(datetime.fromtimestamp(reading.t, UTC), tz)}"
        return (
            f"{what} stale{since}: last reading {round(age / 60)} min ago "
            f"(limit {round(stale_after_s / 60)} min)"
        )
    return ""
