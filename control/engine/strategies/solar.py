"""Solar thermal differential controller (RESOL DeltaSol defaults).

Pump on when collector − tank ≥ ΔT on (6 K), off at ≤ ΔT off (4 K); tank max 60 °C
(2 K hysteresis); collector emergency stop at 130 °C until 10 K below (steam in the collector
must not be pumped); collector antifreeze below 4 °C circulates tank heat until 5 °C.
"""

from __future__ import annotations

from dataclasses import dataclass

from control.engine.specs import (
    SOLAR_ANTIFREEZE,
    SOLAR_DIFFERENTIAL,
    SOLAR_EMERGENCY,
    SOLAR_TANK_MAX,
    SolarSpec,
)


@dataclass(frozen=True)
class SolarDecision:
    pump_on: bool
    strategy: str
    reason: str
    emergency: bool
    antifreeze: bool
    tank_full: bool


def decide(
    circuit: SolarSpec,
    collector: float,
    tank: float,
    pump_on: bool,
    was_emergency: bool,
    was_antifreeze: bool,
    was_tank_full: bool,
) -> SolarDecision:
    emergency = collector >= circuit.collector_emergency or (
        was_emergency and collector > circuit.collector_emergency - circuit.emergency_hysteresis
    )
    antifreeze = collector < circuit.antifreeze_on or (
        was_antifreeze and collector < circuit.antifreeze_off
    )
    tank_full = tank >= circuit.tank_max or (
        was_tank_full and tank > circuit.tank_max - circuit.tank_hysteresis
    )
    temps = f"collector {collector:.1f} °C, tank {tank:.1f} °C"
    if emergency:
        return SolarDecision(
            False,
            SOLAR_EMERGENCY,
            f"Collector emergency stop ≥ {circuit.collector_emergency:.0f} °C "
            f"(resumes below {circuit.collector_emergency - circuit.emergency_hysteresis:.0f} °C): {temps}",
            True,
            False,
            tank_full,
        )
    if antifreeze:
        return SolarDecision(
            True,
            SOLAR_ANTIFREEZE,
            f"Collector antifreeze below {circuit.antifreeze_on:.0f} °C: {temps}",
            False,
            True,
            tank_full,
        )
    if tank_full:
        return SolarDecision(
            False,
            SOLAR_TANK_MAX,
            f"Tank at maximum {circuit.tank_max:.0f} °C: {temps}",
            False,
            False,
            True,
        )
    delta = collector - tank
    if delta >= circuit.delta_on:
        on = True
    elif delta <= circuit.delta_off:
        on = False
    else:
        on = pump_on
    verdict = "gain" if on else "no gain"
    return SolarDecision(
        on,
        SOLAR_DIFFERENTIAL,
        f"ΔT {delta:.1f} K ({verdict}; on ≥ {circuit.delta_on:g} K, off ≤ {circuit.delta_off:g} K): {temps}",
        False,
        False,
        False,
    )
