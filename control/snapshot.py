"""Build the evaluator's Snapshot from the database, Redis (runtime state, memory) and the
feeds' last values. The only impure half of a tick's decision making."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Prefetch

from control import runtime
from control import settings_defaults as conf
from control.engine.specs import (
    ActuatorSpec,
    BookingSpec,
    ExceptionSpec,
    KickSpec,
    OutputOverrideSpec,
    OverrideSpec,
    PeriodSpec,
    PlantSpec,
    Reading,
    ScheduleSpec,
    Snapshot,
    SolarSpec,
    WeatherSpec,
    ZoneSpec,
)
from control.models import (
    Booking,
    HeatingPlant,
    OutputOverride,
    Override,
    ScheduleException,
    SolarCircuit,
    WeatherCompensation,
    Zone,
    ZoneTuning,
)
from feeds import service as feed_service
from sensors.models import Actuator

DEFAULT_TUNING = ZoneTuning()


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
        .select_related("temperature_sensor__node", "schedule", "tuning")
        .prefetch_related("schedule__periods")
    )
    if zone_ids is not None:
        zones_qs = zones_qs.filter(pk__in=zone_ids)
    zones = list(
        zones_qs.prefetch_related(
            Prefetch(
                "schedule__exceptions",
                queryset=ScheduleException.objects.filter(
                    date__gte=(now - timedelta(days=2)).date(),
                    date__lte=(now + timedelta(days=3)).date(),
                ),
            )
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
    overrides = _active_overrides(now)
    held = _output_overrides(now) if plants else {}
    actuators = _actuators(members, plants, solars, overrides, zone_ids is None)
    states = runtime.load_actuators(list(actuators))

    feed_ids = {z.temperature_sensor.feed_id for z in zones if z.temperature_sensor}
    for s in solars:
        feed_ids |= {s.collector_sensor.feed_id, s.tank_sensor.feed_id}
    feed_ids |= {p.outside_sensor.feed_id for p in plants if p.outside_sensor}
    feed_ids |= {p.flow_sensor.feed_id for p in plants if p.flow_sensor}
    feed_ids.discard(None)
    last = feed_service.last_values(feed_ids)

    bookings = _bookings(zones, now, everything=zone_ids is None)
    zone_specs = tuple(
        _zone_spec(z, last, bookings.get(z.pk, ()), overrides, actuators, members.get(z.pk, []))
        for z in zones
    )
    disabled = _disabled_zones(actuators) if zone_ids is None else {}
    actuator_specs = {
        aid: _actuator_spec(a, states[aid], overrides.get(("actuator", aid)), disabled.get(aid))
        for aid, a in actuators.items()
    }
    zone_pks = {z.pk for z in zones}
    plant_specs = tuple(
        PlantSpec(
            id=p.pk,
            name=p.name,
            boiler_id=p.boiler_id,
            pump_id=p.pump_id,
            zone_ids=tuple(zid for zid in plant_zones.get(p.pk, []) if zid in zone_pks),
            pump_overrun_s=p.pump_overrun_s,
            kick=KickSpec(p.pump_kick_idle_days * 86400, p.pump_kick_s) if p.pump_kick else None,
            has_bypass=p.has_bypass,
            outside=_reading(last, p.outside_sensor.feed_id) if p.outside_sensor else None,
            outside_name=str(p.outside_sensor) if p.outside_sensor else "",
            frost_outside_c=p.frost_outside_c,
            limit_band_k=conf.limit_band_k(),
            flow=_reading(last, p.flow_sensor.feed_id) if p.flow_sensor else None,
            flow_name=str(p.flow_sensor) if p.flow_sensor else "",
            flow_frost_c=p.flow_frost_c,
            sensor_stale_after_s=p.sensor_stale_after_s,
            index_zone_id=p.index_zone_id,
            weather=weather_spec(p),
            output_override=held.get(p.pk),
        )
        for p in plants
    )
    solar_specs = tuple(
        SolarSpec(
            id=s.pk,
            name=s.name,
            pump_id=s.pump_id,
            collector=_reading(last, s.collector_sensor.feed_id),
            tank=_reading(last, s.tank_sensor.feed_id),
            delta_on=s.delta_on,
            delta_off=s.delta_off,
            tank_max=s.tank_max,
            tank_hysteresis=s.tank_hysteresis,
            collector_emergency=s.collector_emergency,
            emergency_hysteresis=s.emergency_hysteresis,
            antifreeze_on=s.antifreeze_on,
            antifreeze_off=s.antifreeze_off,
            sensor_stale_after_s=s.sensor_stale_after_s,
            kick=KickSpec(s.pump_kick_idle_days * 86400, s.pump_kick_s) if s.pump_kick else None,
        )
        for s in solars
    )
    snapshot = Snapshot(
        now=now,
        time_zone=settings.TIME_ZONE,
        zones=zone_specs,
        actuators=actuator_specs,
        plants=plant_specs,
        solars=solar_specs,
        memory=runtime.load_memory(),
    )
    feeds: dict[tuple[str, int], int | None] = {
        ("zone", z.pk): z.temperature_sensor.feed_id if z.temperature_sensor else None
        for z in zones
    }
    for s in solars:
        feeds[("collector", s.pk)] = s.collector_sensor.feed_id
        feeds[("tank", s.pk)] = s.tank_sensor.feed_id
    for p in plants:
        feeds[("outside", p.pk)] = p.outside_sensor.feed_id if p.outside_sensor else None
        feeds[("flow", p.pk)] = p.flow_sensor.feed_id if p.flow_sensor else None
    return LiveSnapshot(snapshot, actuators, states, {z.pk: z for z in zones}, feeds)


def weather_spec(plant: HeatingPlant) -> WeatherSpec | None:
    """The plant's weather compensation as the evaluator sees it (None: not configured)."""
    try:
        w = plant.weather
    except WeatherCompensation.DoesNotExist:
        return None
    if not w.enabled:
        return None
    return WeatherSpec(
        mode=w.mode,
        slope=w.slope,
        shift_k=w.shift_k,
        room_influence=w.room_influence,
        flow_min_c=w.flow_min_c,
        flow_max_c=w.flow_max_c,
        flow_limit_c=w.flow_limit_c,
        output=w.output,
        kp=w.kp,
        ti_s=w.ti_s,
        host=w.register_host,
        port=w.register_port,
        device_id=w.register_device_id,
        register=w.register_address,
        raw_min=w.raw_min,
        raw_max=w.raw_max,
        scale_low=w.scale_low,
        scale_high=w.scale_high,
        open_id=w.open_actuator_id,
        close_id=w.close_actuator_id,
        run_time_s=w.run_time_s,
        min_pulse_s=w.min_pulse_s,
        # A pulse ends well before the next tick, which waits for it (control/drivers/three_point.py).
        max_pulse_s=min(w.run_time_s, conf.tick_s() * 0.6),
    )


def _reading(last: dict[int, tuple[int, float]], feed_id: int | None) -> Reading | None:
    if feed_id is None or feed_id not in last:
        return None
    t, value = last[feed_id]
    return Reading(float(t), float(value))


def _active_overrides(now: datetime) -> dict[tuple[str, int], OverrideSpec]:
    found: dict[tuple[str, int], OverrideSpec] = {}
    # Newest first: when two overlap, the one set most recently wins.
    for o in Override.objects.active(now).select_related("created_by").order_by("-starts", "-pk"):
        key = ("actuator", o.actuator_id) if o.actuator_id else ("zone", o.zone_id)
        found.setdefault(
            key,
            OverrideSpec(
                o.state,
                o.expires,
                o.reason,
                o.created_by_id,
                o.created_by.get_username() if o.created_by else "",
                o.pk,
            ),
        )
    return found


def _output_overrides(now: datetime) -> dict[int, OutputOverrideSpec]:
    """plant id -> the operator's hold on its analogue output; the newest wins."""
    found: dict[int, OutputOverrideSpec] = {}
    for o in (
        OutputOverride.objects.active(now).select_related("created_by").order_by("-starts", "-pk")
    ):
        found.setdefault(
            o.plant_id,
            OutputOverrideSpec(
                o.value,
                o.expires,
                o.reason,
                o.created_by_id,
                o.created_by.get_username() if o.created_by else "",
                o.pk,
            ),
        )
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
    found = Actuator.objects.filter(enabled=True)
    if everything:
        # Disabled actuators are never switched: they are simply not in the snapshot. On a
        # full tick every other one is (issue #15.5): one nothing drives is held at its idle
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
        found[b.zone_id].append(BookingSpec(b.title, b.start, b.end, b.setpoint))
    return found


def _zone_spec(zone: Zone, last, bookings, overrides, actuators, member_ids=None) -> ZoneSpec:
    sensor = zone.temperature_sensor
    try:
        tuning = zone.tuning
    except ZoneTuning.DoesNotExist:
        tuning = DEFAULT_TUNING
    schedule = None
    if zone.schedule is not None:
        schedule = ScheduleSpec(
            zone.schedule.name,
            tuple(
                PeriodSpec(p.weekday, p.start, p.end, p.setpoint)
                for p in zone.schedule.periods.all()
            ),
            tuple(
                ExceptionSpec(e.date, e.occupied, e.start, e.end, e.description)
                for e in zone.schedule.exceptions.all()
            ),
        )
    return ZoneSpec(
        id=zone.pk,
        name=zone.name,
        slug=zone.slug,
        comfort_setpoint=zone.comfort_setpoint,
        setback_setpoint=zone.setback_setpoint,
        frost_on=zone.frost_on,
        frost_off=zone.frost_off,
        max_temperature=zone.max_temperature,
        hysteresis=zone.hysteresis,
        optimum_start=zone.optimum_start,
        optimum_stop=zone.optimum_stop,
        max_preheat_min=zone.max_preheat_min,
        heating_rate_min_per_k=zone.heating_rate_min_per_k,
        cooling_rate_min_per_k=tuning.cooling_rate_min_per_k,
        coast_allowance_k=tuning.coast_allowance_k,
        sensor_stale_after_s=zone.sensor_stale_after_s,
        has_sensor=sensor is not None and sensor.feed_id is not None,
        reading=_reading(last, sensor.feed_id) if sensor is not None else None,
        schedule=schedule,
        bookings=tuple(bookings),
        override=overrides.get(("zone", zone.pk)),
        actuator_ids=tuple(
            aid
            for aid in (
                member_ids if member_ids is not None else [a.pk for a in zone.actuators.all()]
            )
            if aid in actuators
        ),
        sensor_name=str(sensor) if sensor is not None else "",
        fallback_duty_pct=conf.fallback_duty_pct(),
        fallback_period_s=conf.fallback_period_s(),
        limit_band_k=conf.limit_band_k(),
    )


def _actuator_spec(
    a: Actuator, state: runtime.ActuatorRuntime, override, disabled_zone: str | None = None
) -> ActuatorSpec:
    return ActuatorSpec(
        id=a.pk,
        name=a.name,
        kind=a.kind,
        min_on_s=a.min_on_s,
        min_off_s=a.min_off_s,
        is_on=state.on,
        changed_at=state.changed_at,
        last_off_at=state.last_off_at,
        override=override,
        fault=bool(state.fault),
        idle_state=a.idle_state,
        owner=state.owner,
        released_from=state.released_from,
        disabled_zone=disabled_zone or "",
    )
