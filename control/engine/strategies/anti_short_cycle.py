"""Anti-short-cycle: minimum on and off times (boiler default 10 min / 10 min).

The minimum burner run beats the setpoint: a boiler that has just fired keeps running until
its minimum on time even if the thermostat is satisfied.
"""

from __future__ import annotations

from control.engine.timefmt import minutes


def hold(
    wanted: bool,
    is_on: bool | None,
    changed_at: float | None,
    now_s: float,
    min_on_s: int,
    min_off_s: int,
) -> str:
    """Why the actuator must stay as it is despite `wanted`, or "" if it may switch."""
    if is_on is None or changed_at is None or wanted == is_on:
        return ""
    elapsed = now_s - changed_at
    if is_on and elapsed < min_on_s:
        return f"Minimum run {minutes(min_on_s)}: on for {minutes(elapsed)}"
    if not is_on and elapsed < min_off_s:
        return f"Minimum off time {minutes(min_off_s)}: off for {minutes(elapsed)}"
    return ""
