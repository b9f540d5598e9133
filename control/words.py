"""Plain words for the control strategies' names on the staff pages.

The names (`optimum_start`, `anti_short_cycle`, `heating_plant`) are identifiers: they stay in
the API, the audit rows and the engine (control/engine/specs.py), where scripts match on them.
A person reading plant status or a schematic gets words instead (#28 item 7).
"""

from __future__ import annotations

STRATEGY_WORDS: dict[str, str] = {
    "frost_protection": "frost protection",
    "over_temperature": "over-temperature limit",
    "sensor_fallback": "sensor lost: safe fallback",
    "manual_override": "manual override",
    "booking": "booking",
    "schedule": "schedule",
    "optimum_start": "warming up early",
    "optimum_stop": "switched off early before the end",
    "setback": "setback (unoccupied)",
    "off": "off",
    "heating_plant": "heating plant",
    "pump_overrun": "pump running on after the boiler",
    "pump_kick": "weekly pump exercise",
    "anti_short_cycle": "boiler minimum run or rest time",
    "solar_differential": "solar: collector warmer than the tank",
    "solar_emergency_stop": "solar: collector too hot, stopped",
    "solar_antifreeze": "solar: frost protection",
    "solar_tank_max": "solar: tank at its top temperature",
    "idle_state": "not controlled (idle state)",
    "no_bypass": "held open for the pump (no bypass)",
    "weather_compensation": "weather compensation",
    "no_open_circuit": "boiler held off: no circuit open",
    "disabled": "disabled",
    "waiting": "waiting for the first control tick",
    "open_window": "window open: heating paused",
    "heat_main": "heat main: sources staged on flow temperature",
    "thermal_store": "thermal store: charging or serving from the store",
}


def strategy_words(name: str | None) -> str:
    """The words for a strategy name; an unknown name with its underscores as spaces."""
    if not name:
        return ""
    return STRATEGY_WORDS.get(name, name.replace("_", " "))


# Modes that heat a room towards a target: once there (and not calling), say so, not the plan.
TOWARDS_TARGET = {"optimum_start", "booking", "schedule", "setback"}


def zone_words(
    mode: str | None, demand: bool, temperature: float | None, target: float | None
) -> str:
    """What a zone is doing, for a person: its strategy's words, or "at target" when a room
    already at its target is not calling (a room at 20.2 °C with its valve shut is not
    "warming up early", #27)."""
    if (
        mode in TOWARDS_TARGET
        and not demand
        and temperature is not None
        and target is not None
        and temperature >= target
    ):
        return "at target"
    return strategy_words(mode)
