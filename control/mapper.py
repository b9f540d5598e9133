"""The one map from control's models to the engine's specs (control/engine/specs.py).

Every path that feeds the evaluator goes through here: the live tick (control/snapshot.py),
the configuration cache that keeps the tick running while the database is away
(control/config_cache.py: it stores the specs made here and puts the live readings and runtime
state back on them with `with_readings` / `with_runtime`) and replay over recorded history
(control/replay.py). So a setting is read from its model field in one place, and its default
lives once, on the model: the spec dataclasses declare no defaults of their own for what a
model row carries (tests/control/test_mapper.py holds every field to its model's default).

What the engine needs from Django settings (the site's time zone, the fallback duty, the limit
band, the tick) is read once per build into `SiteSettings` and copied onto the specs, so the
engine stays pure.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import date, timedelta
from typing import Any

from django.conf import settings

from control.engine.specs import (
    ActuatorSpec,
    BookingSpec,
    ExceptionSpec,
    HeatMainSpec,
    HeatSourceSpec,
    KickSpec,
    OutputOverrideSpec,
    OverrideSpec,
    PeriodSpec,
    PlantSpec,
    Reading,
    ScheduleSpec,
    SolarSpec,
    ThermalStoreSpec,
    WeatherSpec,
    WindowSpec,
    ZoneSpec,
)
from control.models import (
    Booking,
    CalendarEntry,
    HeatingPlant,
    HeatMain,
    OutputOverride,
    Override,
    Schedule,
    ScheduleException,
    SolarCircuit,
    ThermalStore,
    WeatherCompensation,
    WindowDetection,
    Zone,
    ZoneTuning,
)
from control.runtime import ActuatorRuntime
from sensors.models import Actuator

# Feeds' last values as feeds.store.service.last_values gives them: feed id -> (unix s, value).
LastValues = dict[int, tuple[int, float]]


@dataclass(frozen=True)
class SiteSettings:
    """The settings the engine's decisions depend on (bms/settings.py, which bounds them)."""

    time_zone: str
    fallback_duty_pct: float
    fallback_period_s: int
    limit_band_k: float
    tick_s: int


def site_settings() -> SiteSettings:
    return SiteSettings(
        time_zone=settings.TIME_ZONE,
        fallback_duty_pct=settings.BMS_CONTROL_FALLBACK_DUTY,
        fallback_period_s=settings.BMS_CONTROL_FALLBACK_PERIOD,
        limit_band_k=settings.BMS_CONTROL_LIMIT_BAND,
        tick_s=settings.BMS_CONTROL_TICK,
    )


# --- readings and runtime state: what changes between ticks ----------------------------------


def reading(last: LastValues, feed_id: int | None) -> Reading | None:
    if feed_id is None or feed_id not in last:
        return None
    t, value = last[feed_id]
    return Reading(float(t), float(value))


def with_readings(spec: Any, last: LastValues, **feed_ids: int | None) -> Any:
    """`spec` with each named reading field (zone `reading`, plant `outside` / `flow`, solar
    `collector` / `tank`) read from the feed given for it."""
    return replace(spec, **{name: reading(last, fid) for name, fid in feed_ids.items()})


def _runtime_fields(state: ActuatorRuntime) -> dict[str, Any]:
    return {
        "is_on": state.on,
        "changed_at": state.changed_at,
        "last_off_at": state.last_off_at,
        "fault": bool(state.fault),
        "confirmed": state.confirmed,
        "last_on_at": state.last_on_at,
        "on_confirmed_at": state.on_confirmed_at,
        "owner": state.owner,
        "released_from": state.released_from,
    }


def with_runtime(spec: ActuatorSpec, state: ActuatorRuntime) -> ActuatorSpec:
    """`spec` with the actuator's runtime state from Redis (control/runtime.py)."""
    return replace(spec, **_runtime_fields(state))


# --- configuration ----------------------------------------------------------------------------


def booking_spec(b: Booking) -> BookingSpec:
    return BookingSpec(b.title, b.start, b.end, b.setpoint)


def _held(o: Override | OutputOverride) -> tuple:
    """What both kinds of hold carry after their value: expiry, reason, who, and their id."""
    who = o.created_by.get_username() if o.created_by_id else ""
    return (o.expires, o.reason, o.created_by_id, who, o.pk)


def override_spec(o: Override) -> OverrideSpec:
    return OverrideSpec(o.state, *_held(o), setpoint=o.setpoint)


def output_override_spec(o: OutputOverride) -> OutputOverrideSpec:
    return OutputOverrideSpec(o.value, *_held(o))


def exception_spec(e: ScheduleException) -> ExceptionSpec:
    return ExceptionSpec(
        day=e.date, occupied=e.occupied, start=e.start, end=e.end, description=e.description
    )


def schedule_spec(
    schedule: Schedule,
    exceptions: Iterable[ScheduleException] | None = None,
    days: tuple[date, date] | None = None,
) -> ScheduleSpec:
    """The schedule with its periods, and its exception days (`exceptions`, else all of the
    schedule's as prefetched), joined by the closures and special days of the site calendars
    it uses (only those within `days`, first to last inclusive, when given). The schedule's
    own exception day wins over a calendar's entry for the same day."""
    if exceptions is None:
        exceptions = schedule.exceptions.all()
    own = [exception_spec(e) for e in exceptions]
    taken = {e.day for e in own}
    from_calendars = []
    for entry in calendar_entries(schedule):
        for spec in entry_days(entry, days):
            if spec.day not in taken:
                taken.add(spec.day)
                from_calendars.append(spec)
    return ScheduleSpec(
        schedule.name,
        tuple(PeriodSpec(p.weekday, p.start, p.end, p.setpoint) for p in schedule.periods.all()),
        tuple(sorted(own + from_calendars, key=lambda e: e.day)),
    )


def calendar_entries(schedule: Schedule) -> list[CalendarEntry]:
    """The entries of every calendar the schedule uses (as prefetched, if they were), the
    calendars in name order so the same day in two calendars always reads the same."""
    return [e for c in schedule.calendars.all() for e in c.entries.all()]


def entry_days(entry: CalendarEntry, days: tuple[date, date] | None = None) -> list[ExceptionSpec]:
    """A calendar entry as the exception days the engine knows, one per day of its range
    (bounded by CALENDAR_ENTRY_MAX_DAYS), clipped to `days` when given."""
    first, last = entry.first_day, entry.last_day
    if days is not None:
        first, last = max(first, days[0]), min(last, days[1])
    found = []
    day = first
    while day <= last:
        found.append(
            ExceptionSpec(
                day=day,
                occupied=entry.occupied,
                start=entry.start,
                end=entry.end,
                description=entry.description,
            )
        )
        day += timedelta(days=1)
    return found


def _tuning(zone: Zone) -> ZoneTuning:
    try:
        return zone.tuning
    except ZoneTuning.DoesNotExist:
        # No tuning row: the model's defaults, from an unsaved row (never a copy of them here).
        return ZoneTuning()


def window_detection(zone: Zone) -> WindowDetection | None:
    """The zone's open-window detection row when it is on (None: no row, or switched off)."""
    try:
        row = zone.window_detection
    except WindowDetection.DoesNotExist:
        return None
    return row if row.enabled else None


def window_spec(row: WindowDetection) -> WindowSpec:
    contact = row.contact_sensor if row.contact_sensor_id else None
    return WindowSpec(
        detect_drop=row.detect_drop,
        drop_k=row.drop_k,
        drop_window_s=row.drop_minutes * 60,
        pause_s=row.pause_min * 60,
        contact_name=str(contact) if contact is not None else "",
        contact_open=row.contact_open,
    )


def window_contact_feed(zone: Zone) -> int | None:
    """The feed of the zone's window contact, when it has one and detection is on."""
    row = window_detection(zone)
    if row is None or row.contact_sensor_id is None:
        return None
    return row.contact_sensor.feed_id


def zone_spec(
    zone: Zone,
    site: SiteSettings,
    *,
    reading: Reading | None = None,
    window_contact: Reading | None = None,
    bookings: Iterable[BookingSpec] = (),
    override: OverrideSpec | None = None,
    actuator_ids: Iterable[int] = (),
    exceptions: Iterable[ScheduleException] | None = None,
    days: tuple[date, date] | None = None,
) -> ZoneSpec:
    sensor = zone.temperature_sensor if zone.temperature_sensor_id else None
    tuning = _tuning(zone)
    window = window_detection(zone)
    schedule = zone.schedule if zone.schedule_id else None
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
        reading=reading,
        schedule=schedule_spec(schedule, exceptions, days) if schedule is not None else None,
        bookings=tuple(bookings),
        override=override,
        actuator_ids=tuple(actuator_ids),
        sensor_name=str(sensor) if sensor is not None else "",
        fallback_duty_pct=site.fallback_duty_pct,
        fallback_period_s=site.fallback_period_s,
        limit_band_k=site.limit_band_k,
        window=window_spec(window) if window is not None else None,
        window_contact=window_contact,
    )


def actuator_spec(
    a: Actuator,
    *,
    state: ActuatorRuntime | None = None,
    override: OverrideSpec | None = None,
    disabled_zone: str = "",
) -> ActuatorSpec:
    """The actuator as the evaluator sees it; `state` is its runtime state (None: unknown,
    never commanded or lost)."""
    return ActuatorSpec(
        id=a.pk,
        name=a.name,
        kind=a.kind,
        min_on_s=a.min_on_s,
        min_off_s=a.min_off_s,
        idle_state=a.idle_state,
        override=override,
        disabled_zone=disabled_zone,
        **_runtime_fields(state or ActuatorRuntime()),
    )


def kick_spec(enabled: bool, idle_days: int, run_s: int) -> KickSpec | None:
    return KickSpec(idle_s=idle_days * 86400, run_s=run_s) if enabled else None


def weather_config_spec(w: WeatherCompensation, site: SiteSettings) -> WeatherSpec:
    """A weather compensation row as the evaluator sees it (enabled or not)."""
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
        max_pulse_s=min(w.run_time_s, site.tick_s * 0.6),
        **_bacnet_output(w),
    )


def _bacnet_output(w: WeatherCompensation) -> dict:
    device = w.bacnet_device if w.bacnet_device_id else None
    return {
        "bacnet_address": device.address if device else "",
        "bacnet_ref": w.bacnet_object,
        "bacnet_priority": w.bacnet_priority,
        "bacnet_timeout_s": device.timeout_s if device else 0.0,
        "bacnet_name": device.node.name if device else "",
    }


def weather_spec(plant: HeatingPlant, site: SiteSettings) -> WeatherSpec | None:
    """The plant's weather compensation (None: not configured, or switched off)."""
    try:
        w = plant.weather
    except WeatherCompensation.DoesNotExist:
        return None
    return weather_config_spec(w, site) if w.enabled else None


def plant_spec(
    p: HeatingPlant,
    site: SiteSettings,
    *,
    zone_ids: Iterable[int] = (),
    last: LastValues | None = None,
    output_override: OutputOverrideSpec | None = None,
) -> PlantSpec:
    last = last or {}
    outside = p.outside_sensor if p.outside_sensor_id else None
    flow = p.flow_sensor if p.flow_sensor_id else None
    return PlantSpec(
        id=p.pk,
        name=p.name,
        boiler_id=p.boiler_id,
        pump_id=p.pump_id,
        zone_ids=tuple(zone_ids),
        pump_overrun_s=p.pump_overrun_s,
        kick=kick_spec(p.pump_kick, p.pump_kick_idle_days, p.pump_kick_s),
        has_bypass=p.has_bypass,
        outside=reading(last, outside.feed_id) if outside is not None else None,
        outside_name=str(outside) if outside is not None else "",
        frost_outside_c=p.frost_outside_c,
        limit_band_k=site.limit_band_k,
        flow=reading(last, flow.feed_id) if flow is not None else None,
        flow_name=str(flow) if flow is not None else "",
        flow_frost_c=p.flow_frost_c,
        sensor_stale_after_s=p.sensor_stale_after_s,
        index_zone_id=p.index_zone_id,
        weather=weather_spec(p, site),
        output_override=output_override,
    )


def solar_spec(s: SolarCircuit, *, last: LastValues | None = None) -> SolarSpec:
    last = last or {}
    collector = s.collector_sensor if s.collector_sensor_id else None
    tank = s.tank_sensor if s.tank_sensor_id else None
    return SolarSpec(
        id=s.pk,
        name=s.name,
        pump_id=s.pump_id,
        collector=reading(last, collector.feed_id) if collector is not None else None,
        tank=reading(last, tank.feed_id) if tank is not None else None,
        delta_on=s.delta_on,
        delta_off=s.delta_off,
        tank_max=s.tank_max,
        tank_hysteresis=s.tank_hysteresis,
        collector_emergency=s.collector_emergency,
        emergency_hysteresis=s.emergency_hysteresis,
        antifreeze_on=s.antifreeze_on,
        antifreeze_off=s.antifreeze_off,
        sensor_stale_after_s=s.sensor_stale_after_s,
        kick=kick_spec(s.pump_kick, s.pump_kick_idle_days, s.pump_kick_s),
    )


def heat_main_spec(
    m: HeatMain,
    *,
    zone_ids: Iterable[int] = (),
    last: LastValues | None = None,
) -> HeatMainSpec:
    """A heat main and its sources (prefetched as `m.sources.all()`)."""
    flow = m.flow_sensor if m.flow_sensor_id else None
    return HeatMainSpec(
        id=m.pk,
        name=m.name,
        zone_ids=tuple(zone_ids),
        sources=tuple(
            HeatSourceSpec(
                id=s.pk,
                name=s.name,
                actuator_id=s.actuator_id,
                order=s.order,
                rotate=s.rotate,
                ramp_s=s.ramp_s,
            )
            for s in m.sources.all()
        ),
        flow=reading(last or {}, flow.feed_id) if flow is not None else None,
        flow_name=str(flow) if flow is not None else "",
        flow_setpoint_c=m.flow_setpoint_c,
        stage_up_k=m.stage_up_k,
        stage_up_s=m.stage_up_s,
        stage_down_k=m.stage_down_k,
        stage_down_s=m.stage_down_s,
        rotate_weekly=m.rotate_weekly,
        rotate_hours=m.rotate_hours,
        sensor_stale_after_s=m.sensor_stale_after_s,
    )


def store_spec(
    t: ThermalStore,
    *,
    last: LastValues | None = None,
    solars: Iterable[SolarCircuit] = (),
) -> ThermalStoreSpec:
    """`solars`: the enabled solar circuits; those whose tank sensor is the store's bottom
    sensor feed it (the sources then leave the charge to the sun, thermal_store.py)."""
    last = last or {}
    return ThermalStoreSpec(
        id=t.pk,
        name=t.name,
        heat_main_id=t.heat_main_id,
        top=reading(last, t.top_sensor.feed_id),
        top_name=str(t.top_sensor),
        bottom=reading(last, t.bottom_sensor.feed_id),
        bottom_name=str(t.bottom_sensor),
        charge_start_c=t.charge_start_c,
        charge_stop_c=t.charge_stop_c,
        discharge_min_c=t.discharge_min_c,
        charge_pump_id=t.charge_pump_id,
        discharge_pump_id=t.discharge_pump_id,
        sensor_stale_after_s=t.sensor_stale_after_s,
        solar_ids=tuple(s.pk for s in solars if s.tank_sensor_id == t.bottom_sensor_id),
    )
