"""The site as a Brick model (docs/BRICK.md): every site, building, zone, plant, meter, sensor
and actuator with its Brick class and how they relate, written as Turtle.

    site_graph(site) -> rdflib.Graph      export(site) -> str (Turtle)

A class is derived, never typed twice: a sensor's or actuator's kind gives its class
(sensors/brick.py), its role in the site model refines it (the temperature sensor of a zone
is a Zone_Air_Temperature_Sensor, the flow sensor of a plant a Leaving_Hot_Water_Temperature_
Sensor, the pump of a plant a Hot_Water_Pump), and a class an engineer chose by hand (the
`brick_class` field, for what neither says) wins. Each point recorded in a feed carries a
ref:TimeseriesReference naming the feed, so a tool reading the model finds its data.

Entities are named `urn:bms:<kind>-<id>`: stable across exports, unique across sites.
"""

from __future__ import annotations

from collections.abc import Iterable

from rdflib import RDF, RDFS, BNode, Graph, Literal, Namespace, URIRef

from control.models import HeatingPlant, HeatMain, SolarCircuit, WindowDetection, Zone
from energy.models import Meter, MeterNode
from sensors import brick as kinds
from sensors.models import Actuator, Sensor, Site

BRICK = Namespace("https://brickschema.org/schema/Brick#")
REF = Namespace("https://brickschema.org/schema/Brick/ref#")
BMS = Namespace("urn:bms:")

# Meter node kinds that are places; the others (a circuit, a plant, "other") group meters
# and are not locations: their meters meter the nearest place above them.
LOCATION_BY_KIND = {"building": "Building", "floor": "Floor", "room": "Room"}
METER_BY_FUEL = {
    "electricity": "Electrical_Meter",
    "generation": "Electrical_Meter",
    # Brick 1.3's Gas_Meter fails its own shapes (brickschema finds every instance "conforms to
    # a shape it must not"): a gas meter is exported as a plain Meter until that is mended.
    "gas": "Meter",
    "water": "Water_Meter",
    "heat": "Thermal_Power_Meter",
    "oil": "Meter",
}
# What a generation meter meters (Meter.generator): a PV array, else a generating system.
GENERATION = "Energy_Generation_System"
GENERATOR_BY_KIND = {"pv": "PV_Array"}
WATER_FLOW = "Water_Flow_Sensor"
# A building's meter of another fuel is its fuel's meter that brick:meters the building.
BUILDING_METER_BY_FUEL = {"electricity": "Building_Electrical_Meter"}
# A meter's own point: what its feed holds, by its source and fuel.
METER_POINT = {
    ("power", True): "Electric_Power_Sensor",
    ("power", False): "Thermal_Power_Sensor",
    ("cumulative", True): "Electric_Energy_Sensor",
    ("cumulative", False): "Energy_Sensor",
}

# Roles that refine a sensor's class: the strongest first (a sensor with two roles takes the
# first one listed here).
ZONE_AIR = "Zone_Air_Temperature_Sensor"
SUPPLY_WATER = "Leaving_Hot_Water_Temperature_Sensor"
RETURN_WATER = "Entering_Hot_Water_Temperature_Sensor"
OUTSIDE_AIR = "Outside_Air_Temperature_Sensor"
WATER = "Water_Temperature_Sensor"
CONTACT = "Contact_Sensor"
COLLECTOR = "Temperature_Sensor"  # a solar circuit's collector sensor reads its temperature
# A zone's actuator switches its heat (Zone.actuators: radiator valves, circuit pumps): one
# of the generic relay kind is a heating valve; a pump or a valve keeps its kind's class.
ZONE_VALVE = "Heating_Valve"
COMMAND = "On_Off_Command"  # each actuator's relay command, the audit log's rows


def _node(kind: str, pk: int) -> URIRef:
    return BMS[f"{kind}-{pk}"]


class _Builder:
    """Collects the triples; sensors and actuators are written once, at the end, with the
    class their strongest role gave them."""

    def __init__(self) -> None:
        self.g = Graph()
        self.g.bind("brick", BRICK)
        self.g.bind("ref", REF)
        self.g.bind("bms", BMS)
        self.sensor_roles: dict[int, str] = {}
        self.sensors: dict[int, Sensor] = {}
        self.actuator_roles: dict[int, str] = {}
        self.actuators: dict[int, Actuator] = {}

    def entity(self, uri: URIRef, cls: str, label: str) -> URIRef:
        self.g.add((uri, RDF.type, BRICK[cls]))
        self.g.add((uri, RDFS.label, Literal(label)))
        return uri

    def link(self, a: URIRef, rel: str, b: URIRef) -> None:
        self.g.add((a, BRICK[rel], b))

    def sensor(self, sensor: Sensor | None, role: str = "") -> URIRef | None:
        if sensor is None:
            return None
        self.sensors[sensor.pk] = sensor
        if role and sensor.pk not in self.sensor_roles:
            self.sensor_roles[sensor.pk] = role
        return _node("sensor", sensor.pk)

    def actuator(self, actuator: Actuator | None, role: str = "") -> URIRef | None:
        if actuator is None:
            return None
        self.actuators[actuator.pk] = actuator
        if role and actuator.pk not in self.actuator_roles:
            self.actuator_roles[actuator.pk] = role
        return _node("actuator", actuator.pk)

    def timeseries(self, point: URIRef, feed_id: int | None) -> None:
        if feed_id is None:
            return
        ref = BNode()
        self.g.add((point, REF.hasExternalReference, ref))
        self.g.add((ref, RDF.type, REF.TimeseriesReference))
        self.g.add((ref, REF.hasTimeseriesId, Literal(f"feed:{feed_id}")))

    def finish(self) -> Graph:
        for pk, s in sorted(self.sensors.items()):
            cls = sensor_class(s, self.sensor_roles.get(pk, ""))
            uri = self.entity(_node("sensor", pk), cls, s.name or f"{s.node.name}:{s.key}")
            self.timeseries(uri, s.feed_id)
        for pk, a in sorted(self.actuators.items()):
            uri = self.entity(
                _node("actuator", pk), actuator_class(a, self.actuator_roles.get(pk)), a.name
            )
            command = self.entity(_node("command", pk), COMMAND, f"{a.name}: relay command")
            self.link(uri, "hasPoint", command)
        return self.g


def sensor_class(sensor: Sensor, role: str = "") -> str:
    """A class chosen by hand, else its role's, else its kind's."""
    return sensor.brick_class or role or kinds.sensor_class(sensor.kind)


def actuator_class(actuator: Actuator, role: str | None = "") -> str:
    """A class chosen by hand, else its role's (a plant's pump is a Hot_Water_Pump), else its
    kind's."""
    return actuator.brick_class or role or kinds.actuator_class(actuator.kind)


def _of_site(queryset, site: Site | None):
    return queryset if site is None else queryset.filter(site=site)


def site_graph(site: Site | None = None) -> Graph:
    """One site's Brick model; None: every site (and what belongs to none)."""
    b = _Builder()
    sites = [site] if site is not None else list(Site.objects.order_by("pk"))
    for s in sites:
        b.entity(_node("site", s.pk), "Site", s.name)
    _meters(b, site)
    _zones(b, site)
    _plants(b, site)
    _solar(b, site)
    _heat_mains(b, site)
    # The site's other sensors and its other actuators: classed by kind, placed at their site.
    nodes_sensors = Sensor.objects.select_related("node")
    if site is not None:
        nodes_sensors = nodes_sensors.filter(node__site=site)
    for sensor in nodes_sensors.order_by("pk"):
        uri = b.sensor(sensor)
        if sensor.pk not in b.sensor_roles and sensor.node.site_id is not None:
            b.link(uri, "isPointOf", _node("site", sensor.node.site_id))
    for actuator in _of_site(Actuator.objects.all(), site).order_by("pk"):
        uri = b.actuator(actuator)
        if actuator.site_id is not None:
            b.link(uri, "hasLocation", _node("site", actuator.site_id))
    return b.finish()


def export(site: Site | None = None) -> str:
    """The model as Turtle."""
    return site_graph(site).serialize(format="turtle")


def _meters(b: _Builder, site: Site | None) -> None:
    nodes = {n.pk: n for n in _of_site(MeterNode.objects.all(), site)}
    place: dict[int, URIRef] = {}
    for n in nodes.values():
        cls = LOCATION_BY_KIND.get(n.kind)
        if cls is not None:
            place[n.pk] = b.entity(_node("place", n.pk), cls, n.name)

    def nearest(pk: int | None) -> URIRef | None:
        seen = 0
        while pk is not None and pk in nodes and seen <= 8:  # energy.models.MAX_TREE_DEPTH
            if pk in place:
                return place[pk]
            pk, seen = nodes[pk].parent_id, seen + 1
        return None

    for n in nodes.values():
        if n.pk not in place:
            continue
        above = nearest(n.parent_id)
        b.link(above if above is not None else _node("site", n.site_id), "hasPart", place[n.pk])
    meters = Meter.objects.filter(node_id__in=list(nodes)).order_by("pk")
    for m in meters:
        metered = nearest(m.node_id)
        in_building = metered is not None and nodes[m.node_id].kind == "building"
        cls = (BUILDING_METER_BY_FUEL if in_building else METER_BY_FUEL).get(m.fuel)
        uri = b.entity(_node("meter", m.pk), cls or METER_BY_FUEL.get(m.fuel, "Meter"), m.name)
        if metered is not None:
            b.link(uri, "meters", metered)
        point_cls = METER_POINT.get((m.source, m.fuel in ("electricity", "generation")))
        if point_cls is not None and m.feed_id is not None:
            point = b.entity(_node("meter-point", m.pk), point_cls, f"{m.name}: {m.source}")
            b.link(point, "isPointOf", uri)
            b.timeseries(point, m.feed_id)
        if m.fuel == "generation":
            _generator(b, m, uri)


def _generator(b: _Builder, meter: Meter, meter_uri: URIRef) -> None:
    """What a generation meter meters: a PV array, or another generating system (a hydro
    turbine: Brick 1.3 has no class of its own for one) with the flow of its water as a point
    where a feed records it."""
    cls = GENERATOR_BY_KIND.get(meter.generator, GENERATION)
    uri = b.entity(_node("generator", meter.pk), cls, f"{meter.name}: what it meters")
    b.link(meter_uri, "meters", uri)
    if meter.flow_feed_id is not None:
        flow = b.entity(_node("flow", meter.pk), WATER_FLOW, f"{meter.name}: water flow")
        b.link(flow, "isPointOf", uri)
        b.timeseries(flow, meter.flow_feed_id)


def _zones(b: _Builder, site: Site | None) -> None:
    zones = _of_site(Zone.objects.select_related("temperature_sensor__node"), site)
    for zone in zones.prefetch_related("actuators").order_by("pk"):
        uri = b.entity(_node("zone", zone.pk), "HVAC_Zone", zone.name)
        if (sensor := b.sensor(zone.temperature_sensor, ZONE_AIR)) is not None:
            b.link(sensor, "isPointOf", uri)
        for valve in zone.actuators.all():
            role = ZONE_VALVE if valve.kind == Actuator.Kind.RELAY else ""
            b.link(b.actuator(valve, role), "feeds", uri)
    windows = WindowDetection.objects.select_related("contact_sensor__node")
    if site is not None:
        windows = windows.filter(zone__site=site)
    for w in windows:
        if (sensor := b.sensor(w.contact_sensor, CONTACT)) is not None:
            b.link(sensor, "isPointOf", _node("zone", w.zone_id))


def _pump_role(actuator: Actuator | None) -> str:
    """A pump moving heating water is a Hot_Water_Pump; another kind keeps its own class."""
    return "Hot_Water_Pump" if actuator is not None and actuator.kind == "pump" else ""


def _plants(b: _Builder, site: Site | None) -> None:
    plants = _of_site(
        HeatingPlant.objects.select_related("boiler", "pump", "flow_sensor", "return_sensor"), site
    )
    for plant in plants.prefetch_related("zones").order_by("pk"):
        uri = b.entity(_node("plant", plant.pk), "Hot_Water_System", plant.name)
        boiler = b.actuator(plant.boiler, "Boiler")
        b.link(uri, "hasPart", boiler)
        if (pump := b.actuator(plant.pump, _pump_role(plant.pump))) is not None:
            b.link(uri, "hasPart", pump)
        for zone in plant.zones.all():
            b.link(boiler, "feeds", _node("zone", zone.pk))
        # Brick gives a System no points: the plant's sensors are points of its boiler.
        if (flow := b.sensor(plant.flow_sensor, SUPPLY_WATER)) is not None:
            b.link(flow, "isPointOf", boiler)
        if (back := b.sensor(plant.return_sensor, RETURN_WATER)) is not None:
            b.link(back, "isPointOf", boiler)
        if (outside := b.sensor(plant.outside_sensor, OUTSIDE_AIR)) is not None:
            b.link(outside, "isPointOf", boiler)


def _solar(b: _Builder, site: Site | None) -> None:
    circuits = SolarCircuit.objects.select_related("collector_sensor", "tank_sensor", "pump")
    for c in _of_site(circuits, site).order_by("pk"):
        collector = b.entity(_node("collector", c.pk), "Solar_Thermal_Collector", c.name)
        tank = b.entity(_node("tank", c.pk), "Hot_Water_Storage_Tank", f"{c.name}: tank")
        b.link(collector, "feeds", tank)
        b.link(b.sensor(c.collector_sensor, COLLECTOR), "isPointOf", collector)
        b.link(b.sensor(c.tank_sensor, WATER), "isPointOf", tank)
        b.link(collector, "hasPart", b.actuator(c.pump))


def _heat_mains(b: _Builder, site: Site | None) -> None:
    mains = _of_site(HeatMain.objects.select_related("flow_sensor"), site)
    for main in mains.prefetch_related("sources__actuator", "zones").order_by("pk"):
        uri = b.entity(_node("heat-main", main.pk), "Hot_Water_System", main.name)
        zones = [_node("zone", z.pk) for z in main.zones.all()]
        boilers = []
        for source in main.sources.all():
            boilers.append(boiler := b.actuator(source.actuator, "Boiler"))
            b.link(uri, "hasPart", boiler)
            for zone in zones:
                b.link(boiler, "feeds", zone)
        store = getattr(main, "store", None)
        tank = None
        if store is not None:
            tank = b.entity(_node("store", store.pk), "Hot_Water_Storage_Tank", store.name)
            b.link(uri, "hasPart", tank)
        # A System has no points in Brick: the main's flow temperature is a point of its store
        # (where the main leaves the boiler house), else of its lead source.
        holder = tank if tank is not None else (boilers[0] if boilers else None)
        if holder is not None and (flow := b.sensor(main.flow_sensor, SUPPLY_WATER)) is not None:
            b.link(flow, "isPointOf", holder)
        if store is None:
            continue
        for sensor in (store.top_sensor, store.bottom_sensor):
            b.link(b.sensor(sensor, WATER), "isPointOf", tank)
        for pump in (store.charge_pump, store.discharge_pump):
            if (p := b.actuator(pump, _pump_role(pump))) is not None:
                b.link(uri, "hasPart", p)


def classes(graph: Graph) -> Iterable[str]:
    """The Brick classes a model uses (for the tests and the docs)."""
    return sorted(
        {
            str(o).removeprefix(str(BRICK))
            for o in graph.objects(None, RDF.type)
            if str(o).startswith(str(BRICK))
        }
    )
