"""Stale or missing sensor: the zone falls back to safe mode and says why."""

from __future__ import annotations

import math

from control.state import Reading


def problem(reading: Reading | None, has_sensor: bool, now_s: float, stale_after_s: int) -> str:
    """Why the reading cannot be trusted, or "" when it can."""
    if not has_sensor:
        return "No temperature sensor configured"
    if reading is None:
        return "No reading from the temperature sensor"
    if reading.value is None or math.isnan(reading.value):
        return "Temperature sensor reading is not a number"
    age = now_s - reading.t
    if age > stale_after_s:
        return (
            f"Temperature sensor stale: last reading {round(age / 60)} min ago "
            f"(limit {round(stale_after_s / 60)} min)"
        )
    return ""
