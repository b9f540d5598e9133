"""Optimum start / stop: begin heating just early enough, stop early when the room will coast.

Pre-heat minutes = temperature deficit (K) × the zone's learned heating rate (min/K), bounded
by its max pre-heat (default 3 h). The rate is learned from the zone's own recorded feed
(control/optimum.py) after each occupancy start.
"""

from __future__ import annotations


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
