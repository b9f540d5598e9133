"""Over-temperature cut-off: heating off while the zone is above its maximum."""

from __future__ import annotations


def cut_off(temperature: float, max_temperature: float) -> bool:
    return temperature >= max_temperature
