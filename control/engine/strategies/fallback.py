"""What a zone does when its temperature sensor is lost (stale, missing, not a number).

Leaving the heating off is no frost protection at all without a reading, and leaves an
occupied room cold. Commercial controllers fall back instead (Siemens RVD/Synco: the plant
runs when the outside temperature is below 1.5 °C; a zone without its room sensor runs
weather-compensated or at a fixed duty):

1. plant frost protection: a fresh outside reading of one of the zone's heating plants below
   the plant's frost threshold (default 1.5 °C) -> heat, continuously (FROST, a safety
   decision: it beats an OFF override and the minimum on/off times);
2. occupied (booking or schedule) -> a fixed duty cycle, by default 50 % of a 20 min period
   (10 min on, 10 min off), aligned to the clock so every tick agrees without memory;
3. otherwise off: unoccupied and no frost risk known.

An alarm is raised on the point in every case (the runner emails it when it opens).
"""

from __future__ import annotations


def duty_on(now_s: float, duty_pct: float, period_s: int) -> tuple[bool, float]:
    """Whether the fixed duty cycle is in its on part now, and the seconds left of that part."""
    period = max(1, int(period_s))
    on_s = period * max(0.0, min(100.0, duty_pct)) / 100.0
    phase = now_s % period
    if phase < on_s:
        return True, on_s - phase
    return False, period - phase
