"""Build the evaluator's Snapshot from the database, Redis (runtime state, memory) and the
feeds' last values. The only impure half of a tick's decision making: this module chooses and
loads the rows in a few queries; control/mapper.py turns each into its spec."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db.models import Prefetch

from control import mapper, runtime
from control.engine.specs import BookingSpec, OutputOverrideSpec, OverrideSpec, Snapshot
from control.models import (
    Booking,
    CalendarEntry,
    HeatingPlant,
    HeatMain,
    OutputOverride,
    Override,
    ScheduleException,
    SolarCircuit,
    ThermalStore,
    Zone,
)
from feeds.store import service as feed_service
from sensors.models import Actuator


@dataclass
class LiveSnapshot:
    snapshot: Snapshot
    actuators: dict[int, Actuator]  # the model rows, for the drivers
    runtime: dict[int, runtime.ActuatorRuntime]
    zones: dict[int, Zone]
    # Which feed each reading came from, for the configuration cache (control/config_cache.py):
    # ("zone", zone id), ("collector", circuit id), ("tank", circuit id) -> feed id.
    feeds: dict[tuple[str, int], int | None] = field(default_factory=dict)


def build(now: datetime, zone_ids: list[int] | None = None) -> LiveSnapshot:
    zones_qs = (
        Zone.objects.filter(enabled=True)
        .select_related(
            "temperature_sensor__node",
            "schedule",
            "tuning",
            "window_detection__contact_sensor__node",
        )
        .prefetch_related("schedule__periods")
    )
    if zone_ids is not None:
        zones_qs = zones_qs.filter(pk__in=zone_ids)
    days = ((now - timedelta(days=2)).date(), (now + timedelta(days=3)).date())
    zones = list(
        zones_qs.prefetch_related(
            Prefetch(
                "schedule__exceptions",
                queryset=ScheduleException.objects.filter(
                    date__gte=(now - timedelta(days=2)).date(),
                    date__lte=(now + timedelta(days=3)).date(),
                ),
            ),
            # The site calendars' closures and special days around now, as the exceptions.
            Prefetch(
                "schedule__calendars__entries",
                queryset=CalendarEntry.objects.filter(
                    first_day__lte=days[1], last_day__gte=days[0]
                ),
            ),
        )
    )
    plants = list(
        HeatingPlant.objects.filter(enabled=True).select_related(
            "outside_sensor__node", "flow_sensor__node", "weather"
        )
        if zone_ids is None
        else []
    )
    # Ids from the link tables, not model rows: a prefetch built 1,000 Actuator and 500 Zone
    # objects per tick only to read their keys (the actuators are loaded once, below).
    members = _links(Zone.actuators.through, "zone", "actuator", [z.pk for z in zones])
    plant_zones = _links(HeatingPlant.zones.through, "heatingplant", "zone", [p.pk for p in plants])
    solars = list(
        SolarCircuit.objects.filter(enabled=True).select_related("collector_sensor", "tank_sensor")
        if zone_ids is None
        else []
    )
    mains = (
        list(
            HeatMain.objects.filter(enabled=True)
            .select_related("flow_sensor__node")
            .prefetch_related("sources")
        )
        if zone_ids is None
        else []
    )
    main_zones = _links(HeatMain.zones.through, "heatmain", "zone", [m.pk for m in mains])
    stores = list(
        ThermalStore.objects.filter(heat_main__in=mains).select_related(
            "top_sensor__node", "bottom_sensor__node"
        )
        if mains
        else []
    )
    overrides = _active_overrides(now)
    held = _output_overrides(now) if plants else {}
    actuators = _actuators(members, plants, solars, overrides, zone_ids is None)
    states = runtime.load_actuators(list(actuators))

    feed_ids = {z.temperature_sensor.feed_id for z in zones if z.temperature_sensor}
    contacts = {z.pk: mapper.window_contact_feed(z) for z in zones}
    feed_ids |= set(contacts.values())
    for s in solars:
        feed_ids |= {s.collector_sensor.feed_id, s.tank_sensor.feed_id}
    feed_ids |= {p.outside_sensor.feed_id for p in plants if p.outside_sensor}
    feed_ids |= {p.flow_sensor.feed_id for p in plants if p.flow_sensor}
    feed_ids |= {m.flow_sensor.feed_id for m in mains if m.flow_sensor}
    for t in stores:
        feed_ids |= {t.top_sensor.feed_id, t.bottom_sensor.feed_id}
    feed_ids.discard(None)
    last = feed_service.last_values(feed_ids)

    bookings = _bookings(zones, now, everything=zone_ids is None)
    site = mapper.site_settings()
    zone_specs = tuple(
        mapper.zone_spec(
            z,
            site,
            reading=mapper.reading(last, z.temperature_sensor.feed_id)
            if z.temperature_sensor
            else None,
            window_contact=mapper.reading(last, contacts[z.pk]),
            bookings=bookings.get(z.pk, ()),
            override=overrides.get(("zone", z.pk)),
            actuator_ids=[aid for aid in members.get(z.pk, []) if aid in actuators],
            days=days,
        )
        for z in zones
    )
    disabled = _disabled_zones(actuators) if zone_ids is None else {}
    actuator_specs = {
        aid: mapper.actuator_spec(
            a,
            state=states[aid],
            override=overrides.get(("actuator", aid)),
            disabled_zone=disabled.get(aid, ""),
        )
        for aid, a in actuators.items()
    }
    zone_pks = {z.pk for z in zones}
    plant_specs = tuple(
        mapper.plant_spec(
            p,
            site,
            zone_ids=[zid for zid in plant_zones.get(p.pk, []) if zid in zone_pks],
            last=last,
            output_override=held.get(p.pk),
        )
        for p in plants
    )
    solar_specs = tuple(mapper.solar_spec(s, last=last) for s in solars)
    main_specs = tuple(
        mapper.heat_main_spec(
            m, zone_ids=[z for z in main_zones.get(m.pk, []) if z in zone_pks], last=last
        )
        for m in mains
    )
    snapshot = Snapshot(
        now=now,
        time_zone=site.time_zone,
        zones=zone_specs,
        actuators=actuator_specs,
        plants=plant_specs,
        solars=solar_specs,
        memory=runtime.load_memory(),
        heat_mains=main_specs,
        stores=tuple(mapper.store_spec(t, last=last, solars=solars) for t in stores),
    )
    feeds: dict[tuple[str, int], int | None] = {
        ("zone", z.pk): z.temperature_sensor.feed_id if z.temperature_sensor else None
        for z in zones
    }
    for t in stores:
        feeds[("store_top", t.pk)] = t.top_sensor.feed_id
        feeds[("store_bottom", t.pk)] = t.bottom_sensor.feed_id
    for m in mains:
        feeds[("heatmain_flow", m.pk)] = m.flow_sensor.feed_id if m.flow_sensor else None
    for zid, contact_feed in contacts.items():
        feeds[("window_contact", zid)] = contact_feed
    for s in solars:
        feeds[("collector", s.pk)] = s.collector_sensor.feed_id
        feeds[("tank", s.pk)] = s.tank_sensor.feed_id
    for p in plants:
        feeds[("outside", p.pk)] = p.outside_sensor.feed_id if p.outside_sensor else None
        feeds[("flow", p.pk)] = p.flow_sensor.feed_id if p.flow_sensor else None
    return LiveSnapshot(snapshot, actuators, states, {z.pk: z for z in zones}, feeds)


def _active_overrides(now: datetime) -> dict[tuple[str, int], OverrideSpec]:
    found: dict[tuple[str, int], OverrideSpec] = {}
    # Newest first: when two overlap, the one set most recently wins.
    for o in Override.objects.active(now).select_related("created_by").order_by("-starts", "-pk"):
        key = ("actuator", o.actuator_id) if o.actuator_id else ("zone", o.zone_id)
        found.setdefault(key, mapper.override_spec(o))
    return found


def _output_overrides(now: datetime) -> dict[int, OutputOverrideSpec]:
    """plant id -> the operator's hold on its analogue output; the newest wins."""
    found: dict[int, OutputOverrideSpec] = {}
    for o in (
        OutputOverride.objects.active(now).select_related("created_by").order_by("-starts", "-pk")
    ):
        found.setdefault(o.plant_id, mapper.output_override_spec(o))
    return found


def _links(through, owner: str, member: str, owner_ids: list[int]) -> dict[int, list[int]]:
    """owner id -> member ids of a many-to-many link, in the member's name order (as the
    related manager would give them)."""
    found: dict[int, list[int]] = defaultdict(list)
    if not owner_ids:
        return found
    rows = (
        through.objects.filter(**{f"{owner}_id__in": owner_ids})
        .order_by(f"{member}__name", f"{member}_id")
        .values_list(f"{owner}_id", f"{member}_id")
    )
    for owner_id, member_id in rows:
        found[owner_id].append(member_id)
    return found


def _actuators(members, plants, solars, overrides, everything: bool) -> dict[int, Actuator]:
    # A BACnet output's controller (address, timeout, name) is what its driver needs: joined
    # here, not one query per output per tick.
    found = Actuator.objects.filter(enabled=True).select_related("bacnet_device__node")
    if everything:
        # Disabled actuators are never switched: they are simply not in the snapshot. On a
        # full tick every other one is: one nothing drives is held at its idle
        # state.
        return {a.pk: a for a in found}
    wanted: set[int] = set()
    for ids in members.values():
        wanted |= set(ids)
    for p in plants:
        wanted |= {p.boiler_id} | ({p.pump_id} if p.pump_id else set())
    for s in solars:
        wanted.add(s.pump_id)
    return {a.pk: a for a in found.filter(pk__in=wanted)}


def _disabled_zones(actuators: dict[int, Actuator]) -> dict[int, str]:
    """Actuator id -> the name of a disabled zone it belongs to (for the idle reason)."""
    # Disabled zones are few: no IN list of every actuator on site (a 1,000-id IN clause
    # costs more to build than the rows it finds).
    through = Zone.actuators.through.objects.filter(zone__enabled=False)
    rows = through.values_list("actuator_id", "zone__name").order_by("-zone__name")
    return {aid: name for aid, name in rows if aid in actuators}


def _bookings(
    zones: list[Zone], now: datetime, everything: bool = False
) -> dict[int, list[BookingSpec]]:
    horizon = max((z.max_preheat_min for z in zones), default=0)
    found: dict[int, list[BookingSpec]] = defaultdict(list)
    # Every enabled zone is in a full tick's snapshot: a join, not an IN list of 500 ids.
    which = {"zone__enabled": True} if everything else {"zone_id__in": [z.pk for z in zones]}
    for b in Booking.objects.filter(
        **which,
        cancelled=False,
        end__gt=now - timedelta(days=1),
        start__lt=now + timedelta(minutes=horizon) + timedelta(days=1),
    ).order_by("start"):
        found[b.zone_id].append(mapper.booking_spec(b))
    return found
