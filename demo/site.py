"""Create (or bring up to date) the demo site's database objects. Idempotent.

Everything is looked up by a natural key (site slug, node name, feed tag+name, actuator
name, zone slug, schedule name) and only created when absent, so running it twice changes
nothing, and an engineer's later edits to a demo object are kept.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from zoneinfo import ZoneInfo

from django.db import transaction
from django.utils import timezone

from control.engine.strategies.optimum_start import preheat_minutes
from control.models import (
    Booking,
    HeatingPlant,
    HeatMain,
    HeatSource,
    Schedule,
    SchedulePeriod,
    SolarCircuit,
    ThermalStore,
    WeatherCompensation,
    WindowDetection,
    Zone,
)
from demo import layout
from demo.keystore import KeyStore
from demo.plant import BIOMASS_RAMP_S
from feeds.models import Feed
from sensors.models import Actuator, ModbusRegister, Node, Sensor, Site

log = logging.getLogger("demo")


@dataclass
class DemoSite:
    site: Site
    keys: dict[str, str]  # node name -> plaintext write key
    feeds_by_role: dict[str, Feed]
    zones: dict[str, Zone]  # room slug -> zone
    actuators: dict[str, Actuator] = field(default_factory=dict)
    displays: list = field(default_factory=list)
    created: list[str] = field(default_factory=list)  # what this run created, for the log


def ensure_demo_site(
    key_file: Path,
    *,
    relay_host: str = "127.0.0.1",
    relay_port: int = 15020,
    meter_host: str = "127.0.0.1",
    meter_port: int = 15021,
    now: dt.datetime | None = None,
) -> DemoSite:
    """Create what is missing of the demo site; return handles the simulator needs.

    The relay and meter host/port are (re)written on the demo actuators and meter node each
    time, because they are where *this* simulator listens.
    """
    store = KeyStore(key_file)
    with transaction.atomic():
        demo = _ensure_objects(store, relay_host, relay_port, meter_host, meter_port, now)
    store.save()  # after the commit: a key on file always matches a stored hash
    demo.keys = dict(store.keys)
    demo.displays = _ensure_displays(demo)
    return demo


def _ensure_objects(
    store: KeyStore,
    relay_host: str,
    relay_port: int,
    meter_host: str,
    meter_port: int,
    now: dt.datetime | None,
) -> DemoSite:
    created: list[str] = []
    site, new = Site.objects.get_or_create(
        slug=layout.SITE_SLUG,
        defaults={
            "name": layout.SITE_NAME,
            "latitude": layout.LATITUDE,
            "longitude": layout.LONGITUDE,
            "time_zone": layout.TIME_ZONE,
            "description": "A simulated site like CAT, Machynlleth: visitor centre with PV, "
            "solar thermal and hydro, a boiler house and four bookable rooms.",
        },
    )
    if new:
        created.append(f"site {site.slug}")
    demo = DemoSite(site=site, keys={}, feeds_by_role={}, zones={}, created=created)

    for spec in layout.ALL_NODES:
        node = _ensure_node(site, spec, store, created)
        if spec is layout.METER_NODE:
            _point_meter(node, meter_host, meter_port)
        for item in spec.inputs:
            _ensure_sensor(node, item, demo)

    demo.actuators = _ensure_actuators(site, relay_host, relay_port, created)
    schedules = _ensure_schedules(site, created)
    for room in layout.ROOMS:
        demo.zones[room.slug] = _ensure_zone(site, room, demo, schedules, created)
        # Open-window detection with its defaults in every room (one is aired daily:
        # layout.RoomSpec.airing_at), so the status page shows it pausing and resuming.
        _, new = WindowDetection.objects.get_or_create(zone=demo.zones[room.slug])
        if new:
            created.append(f"open-window detection {room.name}")
    _ensure_plant(site, demo, created)
    _ensure_bookings(demo, now or timezone.now(), created)
    return demo


def _ensure_node(site: Site, spec: layout.NodeSpec, store: KeyStore, created: list[str]) -> Node:
    # Node names are unique per site: another site may have an `emonth-lecture` of its own.
    node = Node.objects.filter(name=spec.name, site=site).first()
    if node is None:
        node = Node(
            site=site,
            name=spec.name,
            node_id=spec.node_id,
            protocol=spec.protocol,
            location=spec.location,
            description=spec.description,
            interval=layout.INTERVAL_S,
        )
        created.append(f"node {spec.name}")
    key = store.get(spec.name)
    if key is None or not node.check_key(key):
        # No key on file for this node (first run, or the file was lost): issue a new one.
        key = node.set_new_key()
        store.set(spec.name, key)
    node.save()
    return node


def _point_meter(node: Node, host: str, port: int) -> None:
    if (node.modbus_host, node.modbus_port) != (host, port):
        node.modbus_host, node.modbus_port = host, port
        node.modbus_device_id = layout.METER_DEVICE_ID
        node.save(update_fields=["modbus_host", "modbus_port", "modbus_device_id"])
    for reg in layout.METER_REGISTERS:
        ModbusRegister.objects.get_or_create(
            node=node,
            key=reg.key,
            defaults={
                "address": reg.address,
                "function": ModbusRegister.Function.INPUT,
                "data_type": ModbusRegister.DataType.FLOAT32,
                "word_order": ModbusRegister.WordOrder.ABCD,
            },
        )


def _feed(tag: str, name: str, unit: str) -> Feed:
    feed, _ = Feed.objects.get_or_create(
        tag=tag, name=name, defaults={"unit": unit, "interval": layout.INTERVAL_S}
    )
    return feed


def _ensure_sensor(node: Node, item: layout.Input, demo: DemoSite) -> Sensor:
    feed = _feed(node.name, item.feed, item.unit)
    steps: list[dict] = [{"process": "log_to_feed", "feed": feed.pk}]
    if item.role:
        demo.feeds_by_role[item.role] = feed
    if item.kwh_feed:
        kwh = _feed(node.name, item.kwh_feed, "kWh")
        steps.append({"process": "power_to_kwh", "feed": kwh.pk})
        demo.feeds_by_role[item.kwh_role] = kwh
    sensor, new = Sensor.objects.get_or_create(
        node=node,
        key=item.key,
        defaults={
            "name": item.name,
            "kind": item.kind,
            "unit": item.unit,
            "params": dict(item.params),
            "feed": feed,
            "processes": steps,
        },
    )
    if new:
        demo.created.append(f"sensor {sensor}")
    return sensor


def _ensure_actuators(site: Site, host: str, port: int, created: list[str]) -> dict[str, Actuator]:
    wanted = [
        ("boiler", "Boiler", Actuator.Kind.BOILER, layout.COIL_BOILER),
        ("heating_pump", "Heating circulation pump", Actuator.Kind.PUMP,
         layout.COIL_HEATING_PUMP),
        ("solar_pump", "Solar thermal pump", Actuator.Kind.PUMP, layout.COIL_SOLAR_PUMP),
        ("biomass", "Biomass boiler", Actuator.Kind.BOILER, layout.COIL_BIOMASS),
        ("gas_boiler_2", "Gas boiler 2", Actuator.Kind.BOILER, layout.COIL_GAS_BOILER_2),
        ("store_charge", "Store charge pump", Actuator.Kind.PUMP, layout.COIL_STORE_CHARGE),
        ("store_discharge", "Store discharge pump", Actuator.Kind.PUMP,
         layout.COIL_STORE_DISCHARGE),
    ] + [
        (f"valve:{room.slug}", f"{room.name} radiator valve", Actuator.Kind.RADIATOR, room.coil)
        for room in layout.ROOMS
    ]  # fmt: skip
    actuators: dict[str, Actuator] = {}
    for handle, name, kind, coil in wanted:
        min_s = 600 if kind == Actuator.Kind.BOILER else 60
        actuator, new = Actuator.objects.get_or_create(
            name=name,
            defaults={
                "site": site,
                "kind": kind,
                "driver": Actuator.Driver.MODBUS_COIL,
                "host": host,
                "port": port,
                "device_id": layout.RELAY_DEVICE_ID,
                "coil": coil,
                # Valves and pumps may follow demand quickly; the boiler keeps its defaults.
                # The biomass boiler: a long minimum run and rest (wood chip burns down).
                "min_on_s": BIOMASS_MIN_ON_S if handle == "biomass" else min_s,
                "min_off_s": BIOMASS_MIN_OFF_S if handle == "biomass" else min_s,
                "description": "Relay board of the simulated demo site.",
            },
        )
        if new:
            created.append(f"actuator {name} (coil {coil})")
        elif (actuator.host, actuator.port) != (host, port):
            actuator.host, actuator.port = host, port
            actuator.save(update_fields=["host", "port"])
        actuators[handle] = actuator
    return actuators


def _ensure_schedules(site: Site, created: list[str]) -> dict[str, Schedule]:
    schedules: dict[str, Schedule] = {}
    for name, description, periods in layout.SCHEDULES:
        schedule, new = Schedule.objects.get_or_create(
            name=name, defaults={"site": site, "description": description}
        )
        if new:
            created.append(f"schedule {name}")
            for weekday, start, end, setpoint in periods:
                SchedulePeriod.objects.create(
                    schedule=schedule,
                    weekday=weekday,
                    start=dt.time.fromisoformat(start),
                    end=dt.time.fromisoformat(end),
                    setpoint=setpoint,
                )
        schedules[name] = schedule
    return schedules


def _ensure_zone(
    site: Site,
    room: layout.RoomSpec,
    demo: DemoSite,
    schedules: dict[str, Schedule],
    created: list[str],
) -> Zone:
    zone = Zone.objects.filter(slug=room.slug).first()
    if zone is not None:
        return zone
    sensor = Sensor.objects.get(
        node__site=site, node__name=f"emonth-{room.slug}", key="temperature"
    )
    zone = Zone.objects.create(
        site=site,
        name=room.name,
        slug=room.slug,
        temperature_sensor=sensor,
        schedule=schedules.get(room.schedule),
        comfort_setpoint=20.0,
        # The simulated rooms' own pace in winter (tests/demo/test_restart_and_first_booking.py),
        # so optimum start plans enough pre-heat from the first day; it learns from there on.
        heating_rate_min_per_k=DEMO_HEATING_RATE_MIN_PER_K,
        setback_setpoint=None,
        bookable=True,
    )
    zone.actuators.add(demo.actuators[f"valve:{room.slug}"])
    created.append(f"zone {room.name}")
    return zone


def _ensure_plant(site: Site, demo: DemoSite, created: list[str]) -> None:
    """The boiler house (boiler fed by the rooms' demand, pump with overrun, a weather-
    compensated mixing valve) and the solar
    thermal circuit (differential pump control), so the control loop drives the plant."""
    plant, new = HeatingPlant.objects.get_or_create(
        name="Boiler house",
        defaults={
            "site": site,
            "boiler": demo.actuators["boiler"],
            "pump": demo.actuators["heating_pump"],
        },
    )
    if new:
        plant.zones.set(demo.zones.values())
        created.append("heating plant Boiler house")
    _ensure_weather(site, plant, demo, created)
    _, new = SolarCircuit.objects.get_or_create(
        name="Visitor centre solar thermal",
        defaults={
            "site": site,
            "collector_sensor": Sensor.objects.get(
                node__site=site, node__name="emontx-solarthermal", key="collector"
            ),
            "tank_sensor": Sensor.objects.get(
                node__site=site, node__name="emontx-solarthermal", key="tank"
            ),
            "pump": demo.actuators["solar_pump"],
        },
    )
    if new:
        created.append("solar circuit Visitor centre solar thermal")
    _ensure_heat_main(site, demo, created)


def _ensure_weather(site: Site, plant: HeatingPlant, demo: DemoSite, created: list[str]) -> None:
    """The boiler house's heating curve, steering the mixing valve on the relay board's holding
    register (layout.REG_MIXING_VALVE) with a PI loop on the heating flow after the valve: a
    plant on which "a flatter curve" can be tried. Sensors are set only where none is (an
    engineer's choice is kept); the register follows where this simulator's board listens."""

    def boilerhouse(key: str) -> Sensor:
        return Sensor.objects.get(node__site=site, node__name="boilerhouse", key=key)

    fields = []
    if plant.outside_sensor_id is None:
        plant.outside_sensor = boilerhouse("outside")
        fields.append("outside_sensor")
    if plant.flow_sensor_id is None:
        plant.flow_sensor = boilerhouse("heating")
        fields.append("flow_sensor")
    if fields:
        plant.save(update_fields=fields)
    board = demo.actuators["boiler"]  # the valve's output module is the relay board
    weather = WeatherCompensation.objects.filter(plant=plant).first()
    if weather is None:
        WeatherCompensation.objects.create(
            plant=plant,
            mode=WeatherCompensation.Mode.MIXING_VALVE,
            # Radiators sized for 50 °C flow at 5 °C outside (demo/thermal.py Room: 80 W/K
            # radiator, 150 W/K loss); a cold index room raises the flow (pre-heat).
            slope=2.0,
            room_influence=4.0,
            flow_min_c=20.0,
            flow_max_c=70.0,  # the boiler-house water reaches 75 °C at most
            flow_limit_c=80.0,
            output=WeatherCompensation.Output.REGISTER,
            register_host=board.host,
            register_port=board.port,
            register_device_id=layout.RELAY_DEVICE_ID,
            register_address=layout.REG_MIXING_VALVE,
            raw_min=0,
            raw_max=layout.MIXING_VALVE_RAW_MAX,
            scale_low=0.0,
            scale_high=100.0,
        )
        created.append("weather compensation of Boiler house (mixing valve)")
    elif weather.register_address == layout.REG_MIXING_VALVE and (
        weather.register_host,
        weather.register_port,
    ) != (board.host, board.port):
        weather.register_host, weather.register_port = board.host, board.port
        weather.save(update_fields=["register_host", "register_port"])


BIOMASS_MIN_ON_S = 2 * 3600
BIOMASS_MIN_OFF_S = 30 * 60


def _ensure_heat_main(site: Site, demo: DemoSite, created: list[str]) -> None:
    """The site heat main: a biomass lead (not rotated, 30 min ramp, 2 h minimum run) and a
    second gas boiler as lag, heating the boiler house's water beside its own boiler and
    staging on its flow temperature (docs/DEMO.md)."""
    main, new = HeatMain.objects.get_or_create(
        name="Site heat main",
        defaults={
            "site": site,
            "flow_sensor": Sensor.objects.get(
                node__site=site, node__name="boilerhouse", key="flow"
            ),
            # The boiler house's water is held at 75 °C by its boilers' own high limits.
            "flow_setpoint_c": 70.0,
        },
    )
    if not ThermalStore.objects.filter(heat_main=main).exists():
        ThermalStore.objects.create(
            heat_main=main, name="Buffer store",
            top_sensor=Sensor.objects.get(node__site=site, node__name="emontx-store", key="top"),
            bottom_sensor=Sensor.objects.get(
                node__site=site, node__name="emontx-store", key="bottom"
            ),
            charge_pump=demo.actuators["store_charge"],
            discharge_pump=demo.actuators["store_discharge"],
            # The boiler-house water reaches 75 °C at most: a bottom of 65 °C is a full store.
            charge_stop_c=65.0,
        )  # fmt: skip
        created.append("thermal store Buffer store")
    if not new:
        return
    main.zones.set(demo.zones.values())
    HeatSource.objects.create(heat_main=main, name="Biomass boiler", order=0, rotate=False,
                              ramp_s=int(BIOMASS_RAMP_S), actuator=demo.actuators["biomass"])  # fmt: skip
    HeatSource.objects.create(heat_main=main, name="Gas boiler 2", order=1,
                              actuator=demo.actuators["gas_boiler_2"])  # fmt: skip
    created.append("heat main Site heat main")


DEMO_HEATING_RATE_MIN_PER_K = 30.0


def _ensure_bookings(demo: DemoSite, now: dt.datetime, created: list[str]) -> None:
    """A few bookings for today, once per day (marked booked_by=demo-site).

    Each starts no sooner than its room can be pre-heated from its present temperature (the
    last recorded one, else the cold start the simulator uses) at the zone's heating rate: a
    booking 20 minutes away in a 16 °C room would always start cold.
    """
    local_tz = ZoneInfo(layout.TIME_ZONE)
    today = now.astimezone(local_tz).date()
    day_start = dt.datetime.combine(today, dt.time.min, tzinfo=local_tz)
    day_end = day_start + dt.timedelta(days=1)
    # Round up to the next 5 minutes so the times read naturally.
    base = now.replace(second=0, microsecond=0) + dt.timedelta(minutes=5 - now.minute % 5)
    rooms = {room.slug: room for room in layout.ROOMS}
    recorded = last_recorded_temperatures(demo, now.timestamp())
    for slug, title, offset_min, duration_min in layout.BOOKINGS:
        zone = demo.zones[slug]
        already = Booking.objects.filter(
            zone=zone, booked_by=layout.BOOKED_BY, created__gte=day_start, created__lt=day_end
        ).exists()
        if already:
            continue
        lead_min = demo_booking_lead_min(zone, recorded.get(f"room:{slug}", rooms[slug].start_c))
        # A 5-minute mark just inside the pre-heat: optimum start switches on at the next tick,
        # so the demo shows heating at once, and the room is warm by the start.
        start = base + dt.timedelta(minutes=max(offset_min, int(lead_min) // 5 * 5 - 5))
        Booking.objects.create(
            zone=zone,
            title=title,
            start=start,
            end=start + dt.timedelta(minutes=duration_min),
            booked_by=layout.BOOKED_BY,
            source=Booking.Source.ADMIN,
        )
        created.append(f"booking {title} at {start.astimezone(local_tz):%H:%M}")


def demo_booking_lead_min(zone: Zone, temperature_c: float) -> float:
    """Minutes of pre-heat optimum start plans for this zone from `temperature_c`."""
    preheat = preheat_minutes(
        temperature_c, zone.comfort_setpoint, zone.heating_rate_min_per_k, zone.max_preheat_min
    )
    return preheat


# Older than this, the demo was off long enough for its rooms to have cooled: start afresh.
RESUME_MAX_AGE_S = 12 * 3600


def last_recorded_temperatures(demo: DemoSite, now: float) -> dict[str, float]:
    """The last recorded room, tank, collector, boiler-flow and heating-flow temperatures, keyed for
    DemoPlant.resume, for the ones recorded within RESUME_MAX_AGE_S of `now`."""
    from feeds.store import service

    feeds: dict[str, Feed | None] = {
        f"room:{room.slug}": Feed.objects.filter(
            tag=f"emonth-{room.slug}", name=f"{room.name} temperature"
        ).first()
        for room in layout.ROOMS
    }
    feeds["tank"] = demo.feeds_by_role.get("thermal_tank")
    feeds["collector"] = demo.feeds_by_role.get("thermal_collector")
    feeds["flow"] = Feed.objects.filter(tag="boilerhouse", name="Boiler flow temperature").first()
    feeds["heating"] = Feed.objects.filter(
        tag="boilerhouse", name="Heating flow temperature"
    ).first()
    known = {key: feed.pk for key, feed in feeds.items() if feed is not None}
    last = service.last_values(known.values())
    resume: dict[str, float] = {}
    for key, pk in known.items():
        if pk not in last:
            continue
        t, value = last[pk]
        if t >= now - RESUME_MAX_AGE_S and math.isfinite(value):
            resume[key] = value
    return resume


def _ensure_displays(demo: DemoSite) -> list:
    try:
        from demo.displays import ensure_demo_displays
    except ImportError:
        log.warning(
            "demo.displays.ensure_demo_displays is not available yet: kiosk displays not created"
        )
        return []
    return list(ensure_demo_displays(demo.site, demo.feeds_by_role))
