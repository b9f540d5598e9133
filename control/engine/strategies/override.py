"""Manual override with expiry: an engineer's explicit state until a time."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

from control.engine.specs import OverrideSpec
from control.engine.timefmt import when_text


def active(override: OverrideSpec | None, now: datetime) -> OverrideSpec | None:
    if override is None or now >= override.expires:
        return None
    return override


def describe(override: OverrideSpec, tz: ZoneInfo) -> str:
    who = f" by {override.user_name}" if override.user_name else ""
    until = when_text(override.expires, tz)
    if override.setpoint is not None:
        state = f"to {override.setpoint:g} °C"
    else:
        state = "ON" if override.state else "OFF"
    return f"Manual override {state}{who} until {until}: {override.reason}"
