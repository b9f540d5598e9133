"""The Brick class a sensor or actuator is by what it says of itself (docs/BRICK.md).

Brick (brickschema.org) names what a point measures or switches with a class from one shared
vocabulary, so a rule written for one site finds its points on another. Most of ours follow
from the model: a sensor's kind says what it measures, an actuator's kind what it switches.
Its role in the site model (the temperature sensor *of a zone*, the boiler *of a plant*) says
more, and findings/brick.py adds that. Only where neither says enough (a generic scale/offset
sensor, a pulse counter, a generic relay) does an engineer pick a class by hand, from the
short lists below: a bounded choice of real Brick 1.5 classes, each checked against the
ontology in tests/findings/test_brick.py.

No Django here: plain names, so the model, the admin and the export share them.
"""

from __future__ import annotations

# Sensor kind -> Brick class. The temperature kinds differ in how the value is converted,
# not in what is measured.
SENSOR_BY_KIND: dict[str, str] = {
    "generic": "Sensor",
    "temperature": "Temperature_Sensor",
    "rtd_pt100": "Temperature_Sensor",
    "rtd_pt1000": "Temperature_Sensor",
    "ntc_beta": "Temperature_Sensor",
    "ntc_steinhart": "Temperature_Sensor",
    "thermocouple_k": "Temperature_Sensor",
    "power": "Electric_Power_Sensor",
    "energy": "Energy_Sensor",
    "pulse": "Sensor",  # counts of what the pulses mean: gas, water, wind ... only a person knows
    "voltage": "Voltage_Sensor",
    "current": "Current_Sensor",
    "flow": "Flow_Sensor",
    "humidity": "Relative_Humidity_Sensor",
    "wind_speed": "Wind_Speed_Sensor",
}

# Actuator kind -> the Brick class of the equipment it switches.
ACTUATOR_BY_KIND: dict[str, str] = {
    "boiler": "Boiler",
    "pump": "Pump",
    "valve": "Heating_Valve",
    "radiator": "Heating_Valve",
    "relay": "Relay",
}

# What a person may choose where the kind does not say enough: a bounded list, not free text,
# so a typing slip never exports a class Brick does not have.
SENSOR_CHOICES: tuple[str, ...] = (
    "Air_Temperature_Sensor",
    "Outside_Air_Temperature_Sensor",
    "Zone_Air_Temperature_Sensor",
    "Water_Temperature_Sensor",
    "Leaving_Hot_Water_Temperature_Sensor",
    "Entering_Hot_Water_Temperature_Sensor",
    "Electric_Power_Sensor",
    "Electric_Energy_Sensor",
    "Energy_Sensor",
    "Thermal_Power_Sensor",
    "Water_Flow_Sensor",
    "Flow_Sensor",
    "Relative_Humidity_Sensor",
    "Solar_Irradiance_Sensor",
    "Wind_Speed_Sensor",
    "Pressure_Sensor",
    "CO2_Sensor",
    "Occupancy_Sensor",
    "Contact_Sensor",
    "Sensor",
)
ACTUATOR_CHOICES: tuple[str, ...] = (
    "Boiler",
    "Natural_Gas_Boiler",
    "Electric_Boiler",
    "Pump",
    "Hot_Water_Pump",
    "Heating_Valve",
    "Hot_Water_Valve",
    "Radiator",
    "Fan",
    "Relay",
)


def sensor_class(kind: str, chosen: str = "") -> str:
    """The class a person chose, else the one its kind says."""
    return chosen or SENSOR_BY_KIND.get(kind, "Sensor")


def actuator_class(kind: str, chosen: str = "") -> str:
    return chosen or ACTUATOR_BY_KIND.get(kind, "Relay")
