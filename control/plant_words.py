"""The plant's fields in plain words: the labels of the staff plant pages (staff/plant_forms.py)
and of the change history written by those pages, the API and the admin
(control/change_audit.py), so a change reads the same wherever it was made."""

from __future__ import annotations

PLANT_WORDS: dict[str, str] = {
    "site": "Site",
    "name": "Name",
    "enabled": "In use (the control tick drives it)",
    "boiler": "Boiler (its relay)",
    "pump": "Circulation pump (its relay)",
    "zones": "Rooms it heats",
    "index_zone": "Index room (its valves stay open when there is no bypass)",
    "has_bypass": "The circuit has a bypass: the pump may run with every room valve closed",
    "pump_overrun_s": "Pump runs on after the boiler stops (s)",
    "pump_kick": "Exercise the pump when it stands idle",
    "pump_kick_idle_days": "Exercise it after this many idle days",
    "pump_kick_s": "Exercise it for (s)",
    "outside_sensor": "Outside temperature sensor",
    "frost_outside_c": "Frost protection below this outside temperature (°C)",
    "flow_sensor": "Flow temperature sensor",
    "flow_frost_c": "Frost protection below this flow temperature (°C)",
    "return_sensor": "Return temperature sensor (optional: its flow-return ΔT is judged)",
    "sensor_stale_after_s": "A reading older than this counts as lost (s)",
}
# The boiler's own minimum run and rest times (anti-short-cycle) live on its actuator.
BOILER_WORDS: dict[str, str] = {
    "min_on_s": "Boiler minimum run time (s)",
    "min_off_s": "Boiler minimum rest time between runs (s)",
}
WEATHER_WORDS: dict[str, str] = {
    "enabled": "Weather compensation in use",
    "mode": "What it drives",
    "slope": "Curve slope (K of flow per K colder outside)",
    "shift_k": "Curve shift, up or down (K)",
    "room_influence": "Room influence (K of flow per K the index room is cold; 0: none)",
    "flow_min_c": "Lowest flow temperature (°C)",
    "flow_max_c": "Highest flow temperature (°C)",
    "flow_limit_c": "Flow over-temperature limit: the valve closes (°C)",
    "kp": "Mixing valve gain (% per K)",
    "ti_s": "Mixing valve integral time (s)",
    "output": "Output",
    "register_host": "Output module address",
    "register_port": "Output module port",
    "register_device_id": "Output module unit number",
    "register_address": "Output register (counted from 0)",
    "raw_min": "Raw counts at 0 V / 4 mA",
    "raw_max": "Raw counts at 10 V / 20 mA",
    "scale_low": "Value at the bottom of the scale (% or °C)",
    "scale_high": "Value at the top of the scale (% or °C)",
    "open_actuator": "Valve open relay",
    "close_actuator": "Valve close relay",
    "run_time_s": "Valve full stroke time (s)",
    "min_pulse_s": "Shortest valve pulse (s)",
    "bacnet_device": "BACnet controller",
    "bacnet_object": "BACnet object (analog-output,N or analog-value,N)",
    "bacnet_priority": "BACnet priority we write (1-16; 8 is manual operator)",
}
SOLAR_WORDS: dict[str, str] = {
    "site": "Site",
    "name": "Name",
    "enabled": "In use (the control tick drives it)",
    "collector_sensor": "Collector temperature sensor",
    "tank_sensor": "Tank temperature sensor",
    "pump": "Solar pump (its relay)",
    "delta_on": "Pump on when the collector is this much warmer than the tank (K)",
    "delta_off": "Pump off when the difference falls to (K)",
    "tank_max": "Tank top temperature: the pump stops (°C)",
    "tank_hysteresis": "It restarts this far below the tank top (K)",
    "collector_emergency": "Collector emergency stop (°C)",
    "emergency_hysteresis": "It restarts this far below the emergency stop (K)",
    "antifreeze_on": "Collector frost protection below (°C): tank heat is circulated",
    "antifreeze_off": "Collector frost protection ends at (°C)",
    "sensor_stale_after_s": "A reading older than this counts as lost (s)",
    "pump_kick": "Exercise the pump when it stands idle",
    "pump_kick_idle_days": "Exercise it after this many idle days",
    "pump_kick_s": "Exercise it for (s)",
}

# Weather compensation fields that mean something only in one mode or with one output: the
# tick reads the over-temperature limit and the PI loop only for a mixing valve
# (control/engine/weather_output.py), a register's fields only for a register output, the
# valve relays only for a three-point valve. The page shows, and the audit compares, only
# the fields of the chosen mode and output.
MIXING_VALVE_ONLY = ("flow_limit_c", "kp", "ti_s")
REGISTER_ONLY = ("register_host", "register_port", "register_device_id", "register_address",
                 "raw_min", "raw_max", "scale_low", "scale_high")  # fmt: skip
THREE_POINT_ONLY = ("open_actuator", "close_actuator", "run_time_s", "min_pulse_s")
BACNET_ONLY = ("bacnet_device", "bacnet_object", "bacnet_priority")
SHOWN_FOR: dict[str, str] = {
    **{name: "mixing-valve-only" for name in MIXING_VALVE_ONLY},
    **{name: "register-only" for name in REGISTER_ONLY},
    **{name: "three-point-only" for name in THREE_POINT_ONLY},
    **{name: "bacnet-only" for name in BACNET_ONLY},
}
_OUTPUT_FIELDS = {"register": REGISTER_ONLY, "three_point": THREE_POINT_ONLY, "bacnet": BACNET_ONLY}


def weather_words_for(mode: str, output: str) -> dict[str, str]:
    """WEATHER_WORDS without the fields the chosen mode and output do not use."""
    unused = {n for kind, names in _OUTPUT_FIELDS.items() if kind != output for n in names}
    if mode != "mixing_valve":
        unused |= set(MIXING_VALVE_ONLY) | set(THREE_POINT_ONLY)
    return {name: label for name, label in WEATHER_WORDS.items() if name not in unused}
