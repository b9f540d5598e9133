"""Circulation pump follows the boiler, and overruns after it stops (default 6 min) to
carry the residual heat out of the heat exchanger."""

from __future__ import annotations

from control.engine.timefmt import minutes


def overrun_left_s(
    boiler_on: bool, boiler_last_off_at: float | None, now_s: float, overrun_s: int
) -> float:
    """Seconds of overrun still due (0 when the boiler runs or the overrun is over)."""
    if boiler_on or boiler_last_off_at is None:
        return 0.0
    return max(0.0, overrun_s - (now_s - boiler_last_off_at))


def overrun_reason(left_s: float, overrun_s: int) -> str:
    return f"Overrun {minutes(overrun_s)} after the boiler stopped ({minutes(left_s)} left)"
