"""What a rule needs, named by Brick class (docs/FINDINGS.md, docs/BRICK.md).

A rule says what it is about (its subject: a Brick class, e.g. brick:HVAC_Zone) and the points
it needs, each a path from the subject through Brick relations to an entity of a Brick class
("a brick:Air_Temperature_Sensor that isPointOf the zone"). findings/site_model.py follows the
paths in the site's Brick model (findings/brick.py), matching a class or any of its subclasses
in the Brick ontology, so a rule finds its points on any site described in Brick, whatever
the site calls them: a valve an engineer classed by hand as a brick:Hot_Water_Valve is a
brick:Valve to a rule that needs one.

No Django, no rdflib here: plain data, shared by the rules, the resolver and the docs.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Step:
    """One relation to follow: from the entity reached so far to those related to it by
    `relation` (a Brick relation), kept when of one of `classes` or a subclass. `inverse`: the
    found entity is the relation's subject (a sensor isPointOf the zone reached so far)."""

    relation: str
    classes: tuple[str, ...]
    inverse: bool = False


@dataclass(frozen=True)
class Need:
    """A point a rule needs: its name in the check, the path to it, and what it is in words.
    A subject without every need that is not `optional` is not judged by the rule."""

    name: str
    path: tuple[Step, ...]
    words: str
    optional: bool = False
    absent: bool = False  # the subject must NOT have it (a meter of a generator is no use meter)

    def brick(self) -> str:
        """The path in Brick's words, for the docs ("brick:Valve brick:feeds it, then that
        brick:hasPoint brick:On_Off_Command")."""
        parts = []
        for i, step in enumerate(self.path):
            classes = " or ".join(f"brick:{c}" for c in step.classes)
            this = "it" if i == 0 else "that"  # the subject, then what the step before found
            if step.inverse:
                parts.append(f"{classes} brick:{step.relation} {this}")
            else:
                parts.append(f"{this} brick:{step.relation} {classes}")
        words = ", then ".join(parts)
        return f"not: {words}" if self.absent else words


COMMAND = Step("hasPoint", ("On_Off_Command",))  # a relay's command: the audit log's rows

# --- A zone: what heats it, what reads it ---
ZONE = ("HVAC_Zone",)
ZONE_TEMPERATURE = Need(
    "temperature",
    (Step("isPointOf", ("Air_Temperature_Sensor",), inverse=True),),
    "the zone's air temperature sensor, recorded in a feed",
)
# What switches a room's heat: a valve, a radiator's own actuator, or a circuit pump; never a
# boiler (which feeds the zone too, through its plant), never a fan.
ZONE_VALVES = Need(
    "valves",
    (Step("feeds", ("Valve", "Radiator", "Pump"), inverse=True), COMMAND),
    "the valves (or radiators, circuit pumps) that feed the zone, by their relay commands",
)
ZONE_BOILERS = Need(
    "boilers",
    (Step("feeds", ("Boiler",), inverse=True), COMMAND),
    "the boilers that feed the zone, by their relay commands",
)

# --- A heating plant (a brick:Hot_Water_System with a boiler) ---
PLANT = ("Hot_Water_System",)
_BOILER = Step("hasPart", ("Boiler",))
PLANT_BOILER = Need("boiler", (_BOILER, COMMAND), "the plant's boiler, by its relay commands")
PLANT_FLOW = Need(
    "flow",
    (_BOILER, Step("isPointOf", ("Leaving_Hot_Water_Temperature_Sensor",), inverse=True)),
    "the boiler's flow (leaving hot water) temperature sensor, recorded",
)
PLANT_RETURN = Need(
    "return",
    (_BOILER, Step("isPointOf", ("Entering_Hot_Water_Temperature_Sensor",), inverse=True)),
    "the boiler's return (entering hot water) temperature sensor, recorded",
)

# --- A solar thermal circuit: its collector, the tank it feeds, its pump ---
COLLECTOR = ("Solar_Thermal_Collector",)
COLLECTOR_TEMPERATURE = Need(
    "collector",
    (Step("isPointOf", ("Temperature_Sensor",), inverse=True),),
    "the collector's temperature sensor, recorded",
)
TANK_TEMPERATURE = Need(
    "tank",
    (
        Step("feeds", ("Hot_Water_Storage_Tank",)),
        Step("isPointOf", ("Water_Temperature_Sensor",), inverse=True),
    ),
    "the temperature sensor of the tank the collector feeds, recorded",
)
SOLAR_PUMP = Need(
    "pump",
    (Step("hasPart", ("Pump",)), COMMAND),
    "the collector's pump, by its relay commands",
)

# --- Meters, generators and buildings ---
ELECTRICITY_METER = ("Electrical_Meter",)
_READING = Step("isPointOf", ("Electric_Power_Sensor", "Electric_Energy_Sensor"), inverse=True)
METER_READING = Need("reading", (_READING,), "the meter's power or energy point, recorded")
GENERATORS = ("PV_Array", "Energy_Generation_System")
NOT_GENERATION = Need(
    "generates",
    (Step("meters", GENERATORS),),
    "a meter of what generates is not a meter of use",
    absent=True,
)
PV_ARRAY = ("PV_Array",)
GENERATION_SYSTEM = ("Energy_Generation_System",)
GENERATED = Need(
    "meter",
    (Step("meters", ("Electrical_Meter",), inverse=True), _READING),
    "the electricity meter of what it generates, with its power or energy point, recorded",
)
WATER_FLOW = Need(
    "flow",
    (Step("isPointOf", ("Water_Flow_Sensor",), inverse=True),),
    "the flow of the water that drives it, recorded",
)
BUILDING = ("Building",)
