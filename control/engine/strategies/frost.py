"""Room frost protection: heat below `on` (5 °C), keep heating until `off` (7 °C)."""

from __future__ import annotations


def active(temperature: float, on: float, off: float, was_active: bool) -> bool:
    if temperature < on:
        return True
    if temperature >= off:
        return False
    return was_active
