"""What the demo site is made of, as plain data: nodes, their inputs and feeds, the relay
board's coils, the energy meter's registers, the rooms. No Django.

site.py turns this into database rows; simulator.py posts values under these same keys, so
the two can never disagree about a name.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from core.dates import DEFAULT_TIME_ZONE

SITE_NAME = "Centre for Alternative Technology (demo)"
SITE_SLUG = "cat-demo"
LATITUDE = 52.62
LONGITUDE = -3.84
TIME_ZONE = DEFAULT_TIME_ZONE  # the demo is CAT, in the default zone
BOOKED_BY = "demo-site"  # marks the bookings the simulator made, so it makes them once a day


@dataclass(frozen=True)
class Input:
    """One input key of a node and where it goes.

    `feed` is the feed logged with log_to_feed; `kwh_feed` (optional) is the cumulative kWh
    feed integrated from it with power_to_kwh; `role`/`kwh_role` name them for the kiosk
    displays (contracts.md "Demo feeds by role"). `radio_scale` is for radio nodes: the
    gateway multiplies the int16 it received by it (emonhub-style), e.g. 0.01 for
    hundredths of a degree.
    """

    key: str
    name: str
    kind: str
    unit: str
    feed: str
    role: str = ""
    kwh_feed: str = ""
    kwh_role: str = ""
    radio_scale: float = 1.0
    params: dict = field(default_factory=dict)


@dataclass(frozen=True)
class NodeSpec:
    name: str
    protocol: str  # sensors.models.Node.Protocol value
    location: str
    inputs: tuple[Input, ...]
    node_id: int | None = None
    description: str = ""
    datacodes: str = "h"  # radio nodes: struct codes of the packet's values


@dataclass(frozen=True)
class RoomSpec:
    slug: str
    name: str
    coil: int  # radiator valve on the relay board
    schedule: str = ""  # name of a demo schedule, or "" for bookings only
    start_c: float = 16.0
    # Someone airs the room: its window opens daily at this local (hour, minute) for
    # `airing_min`, so open-window detection can be seen stopping and resuming its heating.
    airing_at: tuple[int, int] | None = None
    airing_min: int = 10


@dataclass(frozen=True)
class Register:
    """An Eastron SDM630-style input register (float32, high word first)."""

    key: str
    address: int
    name: str
    unit: str


INTERVAL_S = 10

ROOMS: tuple[RoomSpec, ...] = (
    RoomSpec("lecture-theatre", "Lecture theatre", coil=3),
    # Aired at lunchtime, while its office-hours schedule heats it on weekdays.
    RoomSpec(
        "seminar-room", "Seminar room", coil=4, schedule="Weekday office hours", airing_at=(12, 30)
    ),
    RoomSpec("workshop", "Workshop", coil=5, schedule="Evening classes"),
    RoomSpec("straw-bale-room", "Straw bale room", coil=6),
)

# The relay board (a Modbus TCP server the control loop switches): coil per actuator.
COIL_BOILER = 0
COIL_HEATING_PUMP = 1
COIL_SOLAR_PUMP = 2
# The site heat main's own sources, beside the boiler house's boiler (docs/DEMO.md).
COIL_BIOMASS = 7
COIL_GAS_BOILER_2 = 8
COIL_STORE_CHARGE = 9  # the heat main's thermal store pumps
COIL_STORE_DISCHARGE = 10
RELAY_DEVICE_ID = 1
RELAY_COIL_COUNT = 16
# Its analogue output: holding register 0 sets the boiler house's mixing valve (0-10000 raw =
# 0-100 % open), written by the plant's weather compensation (docs/DEMO.md).
REG_MIXING_VALVE = 0
MIXING_VALVE_RAW_MAX = 10000
RELAY_HOLDING_COUNT = 8

# The site's grid-connection meter, polled over Modbus TCP (SDM630 addresses, 0-based).
METER_DEVICE_ID = 1
METER_REGISTERS: tuple[Register, ...] = (
    Register("voltage", 0, "Voltage L1", "V"),
    Register("current", 6, "Current L1", "A"),
    Register("power", 12, "Grid import power (export negative)", "W"),
    Register("frequency", 70, "Frequency", "Hz"),
    Register("import_kwh", 72, "Imported energy", "kWh"),
)


def _room_node(room: RoomSpec) -> NodeSpec:
    return NodeSpec(
        name=f"emonth-{room.slug}",
        protocol="emoncms",
        location=room.name,
        description="emonTH room sensor, forwarded by emonhub to /input/bulk",
        inputs=(
            Input("temperature", f"{room.name} temperature", "temperature", "°C",
                  feed=f"{room.name} temperature"),
            Input("humidity", f"{room.name} humidity", "humidity", "%",
                  feed=f"{room.name} humidity"),
        ),
    )  # fmt: skip


# Nodes that post over HTTP to /input/bulk (emonTx / emonhub style).
HTTP_NODES: tuple[NodeSpec, ...] = (
    NodeSpec(
        name="emontx-pv",
        protocol="emoncms",
        location="Visitor centre roof",
        description="emonTx on the 10 kWp PV array inverter output, with a pyranometer",
        inputs=(
            Input("power", "PV power", "power", "W", feed="PV power", role="pv_power",
                  kwh_feed="PV energy", kwh_role="pv_kwh"),
            Input("irradiance", "Irradiance", "generic", "W/m²", feed="Solar irradiance"),
        ),
    ),
    NodeSpec(
        name="emontx-solarthermal",
        protocol="emoncms",
        location="Visitor centre plant room",
        description="Solar thermal collector, tank and loop heat meter",
        inputs=(
            Input("collector", "Collector temperature", "temperature", "°C",
                  feed="Collector temperature", role="thermal_collector"),
            Input("tank", "Tank temperature", "temperature", "°C",
                  feed="Tank temperature", role="thermal_tank"),
            Input("heat", "Solar heat into tank", "power", "W", feed="Solar heat",
                  role="thermal_power", kwh_feed="Solar heat energy", kwh_role="thermal_kwh"),
        ),
    ),
    NodeSpec(
        name="emontx-store",
        protocol="emoncms",
        location="Boiler house",
        description="The site heat main's thermal store: top and bottom temperatures",
        inputs=(
            Input("top", "Store top temperature", "temperature", "°C", feed="Store top"),
            Input("bottom", "Store bottom temperature", "temperature", "°C",
                  feed="Store bottom"),
        ),
    ),
    NodeSpec(
        name="emontx-hydro",
        protocol="emoncms",
        location="Turbine house",
        description="Hydro turbine output and river flow",
        inputs=(
            Input("power", "Hydro power", "power", "W", feed="Hydro power", role="hydro_power",
                  kwh_feed="Hydro energy", kwh_role="hydro_kwh"),
            Input("flow", "River flow", "flow", "l/s", feed="River flow", role="hydro_flow"),
        ),
    ),
    *(_room_node(room) for room in ROOMS),
)  # fmt: skip

# Nodes heard by radio (JeeLib RFM69) and forwarded by `manage.py bms_gateway`, whose config
# (written by the simulator) names and scales the packet's int16 values, as emonhub's does.
JEELIB_NODES: tuple[NodeSpec, ...] = (
    NodeSpec(
        name="boilerhouse",
        protocol="jeelib",
        node_id=10,
        location="Boiler house",
        description="JeeNode with DS18B20s on the boiler flow pipe, the outside wall and the "
        "heating flow after the mixing valve",
        inputs=(
            Input("flow", "Boiler flow temperature", "temperature", "°C",
                  feed="Boiler flow temperature", radio_scale=0.01),
            Input("outside", "Outside temperature", "temperature", "°C",
                  feed="Outside temperature", radio_scale=0.01),
            Input("heating", "Heating flow temperature", "temperature", "°C",
                  feed="Heating flow temperature", radio_scale=0.01),
        ),
    ),
    NodeSpec(
        name="anemometer",
        protocol="jeelib",
        node_id=11,
        location="Wind mast",
        description="Cup anemometer pulse counter (16-bit, counts since boot)",
        datacodes="H",  # an unsigned counter
        inputs=(
            Input("pulses", "Wind speed", "pulse", "m/s", feed="Wind speed",
                  params={"pulses_per_unit": 1.4908, "counter_bits": 16, "output": "rate"}),
        ),
    ),
)  # fmt: skip

METER_NODE = NodeSpec(
    name="grid-meter",
    protocol="modbus",
    location="Visitor centre intake",
    description="Eastron SDM630-style meter on the grid connection, polled over Modbus TCP",
    inputs=tuple(
        # the grid power is the site energy flow display's grid (demo/displays.py)
        Input(
            r.key,
            r.name,
            "power" if r.unit == "W" else "generic",
            r.unit,
            feed=r.name,
            role="grid_power" if r.key == "power" else "",
        )
        for r in METER_REGISTERS
    ),
)

ALL_NODES: tuple[NodeSpec, ...] = (*HTTP_NODES, *JEELIB_NODES, METER_NODE)

# Weekly schedules: (name, description, [(weekday, "HH:MM", "HH:MM", setpoint), ...]).
SCHEDULES: tuple[tuple[str, str, tuple[tuple[int, str, str, float], ...]], ...] = (
    ("Weekday office hours", "Monday to Friday, 08:30–17:30",
     tuple((day, "08:30", "17:30", 20.0) for day in range(5))),
    ("Evening classes", "Tuesday and Thursday evenings",
     ((1, "18:00", "21:00", 19.0), (3, "18:00", "21:00", 19.0))),
)  # fmt: skip

# Bookings made for today, relative to the time the site is set up: (room slug, title,
# minutes from now to start, duration in minutes).
BOOKINGS: tuple[tuple[str, str, int, int], ...] = (
    ("straw-bale-room", "Yoga for volunteers", 20, 60),
    ("lecture-theatre", "Renewable energy short course", 60, 120),
    ("seminar-room", "Trustees' meeting", 120, 60),
)
