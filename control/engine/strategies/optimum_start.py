"""Optimum start / stop: begin heating just early enough, stop early when the room will coast.

Pre-heat minutes = temperature deficit (K) × the zone's learned heating rate (min/K), bounded
by its max pre-heat (default 3 h). The rate is learned from the zone's own recorded feed
after each occupancy start: `corrected_rate` here is the arithmetic, control/optimum.py reads
the feed and stores the result.

Learning: a zone that was short of its setpoint at occupancy start heated slower than
predicted: its measured rate is the pre-heat time over the rise it achieved. A zone that
reached setpoint early is measured by when it got there. The step is damped (half way to the
measurement) so one odd day — a door left open — does not swing it, and bounded to the model's
limits. Self-tuning in this way is what Siemens SSTO, Johnson Controls OST and Niagara's
optimum start do.
"""

from __future__ import annotations

from dataclasses import dataclass


def preheat_minutes(
    temperature: float, setpoint: float, rate_min_per_k: float, max_preheat_min: float
) -> float:
    deficit = setpoint - temperature
    if deficit <= 0:
        return 0.0
    return min(deficit * rate_min_per_k, float(max_preheat_min))


def rate_c_per_h(rate_min_per_k: float) -> float:
    return 60.0 / rate_min_per_k if rate_min_per_k > 0 else 0.0


def may_stop_early(
    temperature: float,
    setpoint: float,
    minutes_left: float,
    cooling_rate_min_per_k: float,
    coast_allowance_k: float,
) -> bool:
    """True when the zone, already at setpoint, would lose no more than the allowance
    before the occupancy ends if heating stopped now."""
    if temperature < setpoint:
        return False
    allowed_drop = temperature - (setpoint - coast_allowance_k)
    return minutes_left <= allowed_drop * cooling_rate_min_per_k


MIN_RATE = 0.5
MAX_RATE = 600.0
DAMPING = 0.5  # fraction of the way from the old rate to the measured one
MIN_RISE_K = 0.2  # below this the rise is noise: no measurement


@dataclass(frozen=True)
class Learning:
    rate_after: float
    miss_k: float
    note: str


def corrected_rate(
    rate_before: float,
    preheat_run_min: float,
    temp_at_preheat: float,
    temp_at_start: float,
    setpoint: float,
    reached_after_min: float | None = None,
) -> Learning:
    """The new min/K rate after one pre-heated occupancy start (pure)."""
    miss = setpoint - temp_at_start
    if reached_after_min is not None and setpoint - temp_at_preheat >= MIN_RISE_K:
        measured = reached_after_min / (setpoint - temp_at_preheat)
        note = f"reached {setpoint:.1f} °C after {reached_after_min:.0f} min"
    elif temp_at_start - temp_at_preheat >= MIN_RISE_K:
        measured = preheat_run_min / (temp_at_start - temp_at_preheat)
        note = f"rose {temp_at_start - temp_at_preheat:.1f} K in {preheat_run_min:.0f} min"
    elif miss > 0:
        # Heated and did not warm: slower than thought (or a plant fault; see alarms).
        measured = rate_before * 1.5
        note = "no measurable rise: rate raised by half"
    else:
        return Learning(rate_before, miss, "already warm: nothing to learn")
    new = rate_before + DAMPING * (measured - rate_before)
    new = min(MAX_RATE, max(MIN_RATE, new))
    return Learning(round(new, 2), round(miss, 2), f"{note}; measured {measured:.1f} min/K")


def first_reached(points: list[list], setpoint: float, start_s: float) -> float | None:
    """Minutes from start_s to the first recorded value at or above setpoint."""
    for t_ms, value in points:
        if value is not None and value >= setpoint:
            return max(0.0, (t_ms / 1000 - start_s) / 60)
    return None
