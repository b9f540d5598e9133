"""Thermostat with hysteresis (Heatmiser / generic_thermostat default: 0.3 K each side).

On at or below setpoint − hysteresis, off at or above setpoint + hysteresis; in between it
keeps what it was doing, so the valve does not chatter around the setpoint.
"""

from __future__ import annotations


def calls_for_heat(temperature: float, setpoint: float, hysteresis: float, was_on: bool) -> bool:
    if temperature <= setpoint - hysteresis:
        return True
    if temperature >= setpoint + hysteresis:
        return False
    return was_on
