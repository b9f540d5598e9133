"""Run the rules over a range of history and keep the findings (docs/FINDINGS.md).

    evaluate(start, end) -> Summary(opened, updated, closed)

Points are found through the site model: zones with their temperature sensors, valves,
schedules and bookings; heating plants with their boilers; relay commands from the audit
log (ActuatorCommand, with the strategy that asked). Work is bounded: a range is cut into
weeks (MAX_RANGE), at most MAX_SUBJECTS zones or plants a rule, MAX_COMMANDS audit rows an
actuator a week, and feeds read at READ_INTERVAL_S (at most a week's 2,016 points).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db import transaction

from control.engine.strategies import bookings as booking_windows
from control.engine.strategies import schedule as schedule_windows
from control.mapper import booking_spec, schedule_spec
from control.models import ActuatorCommand, HeatingPlant, Zone
from feeds.store import service as feed_service
from findings import detect, energy_checks, rules
from findings.costs import waste
from findings.models import Finding
from sensors.models import Actuator, Site

MAX_RANGE = timedelta(days=7)
MAX_SUBJECTS = 500
MAX_COMMANDS = 20_000  # a relay switched every 30 s for a week: more is a broken log
READ_INTERVAL_S = 300
TRUNCATED = "log_truncated"  # the strategy of the stop put where MAX_COMMANDS cut the log


class RangeError(ValueError):
    """A range the evaluator refuses (end not after start, or longer than MAX_RANGE)."""


@dataclass
class Trip:
    """One subject's fault over the range, before it becomes a Finding."""

    key: str
    rule: str
    subject: str
    subject_url: str
    site: Site | None
    spans: list[detect.Span]
    detail: str
    evidence: list[dict]
    kwh: float | None = None  # wasted over the range; None: the rule has no estimate
    fuel: str = rules.HEATING_FUEL  # what the wasted kWh are of: its tariff and carbon factor


@dataclass
class Summary:
    opened: int = 0
    updated: int = 0
    closed: int = 0
    keys: list[str] = field(default_factory=list)


def commands(actuator: Actuator, start: datetime, end: datetime) -> list[detect.Command]:
    """The actuator's audited commands that reached it (no error), the last one before `start`
    first (the state the range opens in), at most MAX_COMMANDS; past the bound, an OFF at the
    first row left out ends what can be judged."""
    rows = ActuatorCommand.objects.filter(actuator=actuator, error="")
    before = rows.filter(requested_at__lt=start).order_by("-requested_at").first()
    within = rows.filter(requested_at__gte=start, requested_at__lt=end).order_by("requested_at")
    found = [before] if before else []
    kept = list(within[: MAX_COMMANDS + 1])
    found += kept[:MAX_COMMANDS]
    rows = [detect.Command(c.requested_at, c.state, c.strategy) for c in found]
    if len(kept) > MAX_COMMANDS:
        # The log goes on past the bound: the rest of the range is not judged, so the last
        # row kept must not seem to hold to its end (an ON would count hours never seen).
        rows.append(detect.Command(kept[MAX_COMMANDS].requested_at, False, TRUNCATED))
    return rows


class CommandLog:
    """Each actuator's commands and each feed's readings over one run's range, read once
    however many rules ask (three rules read a zone's temperature)."""

    def __init__(self, start: datetime, end: datetime) -> None:
        self.start, self.end = start, end
        self._rows: dict[int, list[detect.Command]] = {}
        self._readings: dict[int, list[tuple[datetime, float]]] = {}

    def of(self, actuator: Actuator) -> list[detect.Command]:
        if actuator.pk not in self._rows:
            self._rows[actuator.pk] = commands(actuator, self.start, self.end)
        return self._rows[actuator.pk]

    def readings(self, feed_id: int) -> list[tuple[datetime, float]]:
        if feed_id not in self._readings:
            self._readings[feed_id] = _readings(feed_id, self.start, self.end)
        return self._readings[feed_id]


def occupancy(zone: Zone, start: datetime, end: datetime) -> list[tuple[datetime, datetime]]:
    """The zone's occupied windows from its schedule (with calendars) and live bookings."""
    return [(w0, w1) for w0, w1, _ in occupied_setpoints(zone, start, end)]


def occupied_setpoints(
    zone: Zone, start: datetime, end: datetime
) -> list[tuple[datetime, datetime, float]]:
    """The zone's occupied windows with the setpoint each wants (a period's or booking's
    own, else the zone's comfort setpoint)."""
    tz = ZoneInfo(settings.TIME_ZONE)
    found = []
    if zone.schedule is not None:
        spec = schedule_spec(zone.schedule, days=(start.date(), end.date()))
        found += schedule_windows.windows(spec, start, end, tz, zone.comfort_setpoint)
    live = zone.bookings.filter(cancelled=False, end__gt=start, start__lt=end)
    specs = tuple(booking_spec(b) for b in live[:MAX_SUBJECTS])
    found += booking_windows.windows(specs, start, end, tz, zone.comfort_setpoint)
    return [(w.start, w.end, w.setpoint) for w in found]


def _zones():
    return (
        Zone.objects.filter(enabled=True)
        .select_related("site", "schedule", "temperature_sensor")
        # what schedule_spec reads of each schedule, fetched once for all the zones
        .prefetch_related(
            "actuators", "schedule__periods", "schedule__exceptions", "schedule__calendars__entries"
        )
        .order_by("pk")[:MAX_SUBJECTS]
    )


def _measured_zones():
    """(zone, its temperature sensor, its valves) for each zone with a recorded sensor and at
    least one valve: what the rules over a room's temperature and its heat need."""
    for zone in _zones():
        sensor = zone.temperature_sensor
        valves = list(zone.actuators.all())
        if sensor is not None and sensor.feed_id is not None and valves:
            yield zone, sensor, valves


def _zone_url(zone: Zone) -> str:
    return f"/staff/control/#zone-{zone.slug}"


def _hours(spans: list[detect.Span]) -> float:
    return sum(s.hours for s in spans)


def heating_unoccupied(start: datetime, end: datetime, log: CommandLog) -> list[Trip]:
    rule = rules.RULES[rules.HEATING_UNOCCUPIED]
    trips = []
    for zone in _zones():
        valves = list(zone.actuators.all())
        if not valves:
            continue
        occupied = occupancy(zone, start, end)
        found: list[detect.Span] = []
        for valve in valves:
            found += detect.heating_unoccupied(
                detect.on_spans(log.of(valve), start, end),
                occupied,
                excused=rules.HEATING_EXCUSED,
                preheat=timedelta(minutes=zone.max_preheat_min)
                if zone.optimum_start
                else timedelta(),
                min_duration=rule.min_duration,
            )
        if not found:
            continue
        strategies = sorted({s.strategy or "unknown" for s in found})
        found = detect.union(found)
        hours = _hours(found)
        trips.append(
            Trip(
                key=f"{rule.name}:zone:{zone.pk}",
                rule=rule.name,
                subject=f"Zone '{zone.name}'",
                subject_url=_zone_url(zone),
                site=zone.site,
                spans=found,
                detail=f"Valve ON {hours:.1f} h outside occupancy in {len(found)} spells "
                f"(asked for by: {', '.join(strategies)})",
                evidence=[{"actuator": v.pk, "name": v.name} for v in valves],
                kwh=hours * rules.ZONE_HEAT_KW / rules.BOILER_EFFICIENCY,
            )
        )
    return trips


def _readings(feed_id: int, start: datetime, end: datetime) -> list[tuple[datetime, float]]:
    rows = feed_service.read(
        feed_id, int(start.timestamp()), int(end.timestamp()), READ_INTERVAL_S, skipmissing=True
    )
    tz = start.tzinfo
    return [(datetime.fromtimestamp(t / 1000, tz), v) for t, v in rows if v is not None]


def sensor_flatline(start: datetime, end: datetime, log: CommandLog) -> list[Trip]:
    rule = rules.RULES[rules.SENSOR_FLATLINE]
    trips = []
    for zone, sensor, valves in _measured_zones():
        found = detect.flatline(
            log.readings(sensor.feed_id),
            _heat_on(valves, start, end, log),
            start,
            end,
            window=rule.window,
            band_k=rules.FLATLINE_BAND_K,
            min_readings=rules.FLATLINE_MIN_READINGS,
            min_heat=rules.FLATLINE_MIN_HEAT,
        )
        if not found:
            continue
        name = sensor.name or sensor.key
        trips.append(
            Trip(
                key=f"{rule.name}:sensor:{sensor.pk}",
                rule=rule.name,
                subject=f"Temperature sensor '{name}' of zone '{zone.name}'",
                subject_url=_zone_url(zone),
                site=zone.site,
                spans=found,
                detail=f"Flat within {rules.FLATLINE_BAND_K:g} K for {len(found)} spells of 6 h "
                "while the zone's valve was ON",
                evidence=[{"feed": sensor.feed_id, "name": name}]
                + [{"actuator": v.pk, "name": v.name} for v in valves],
            )
        )
    return trips


def short_cycling(start: datetime, end: datetime, log: CommandLog) -> list[Trip]:
    rule = rules.RULES[rules.SHORT_CYCLING]
    trips = []
    plants = HeatingPlant.objects.filter(enabled=True).select_related("boiler", "site")
    for plant in plants.order_by("pk")[:MAX_SUBJECTS]:
        hours = detect.short_cycling(
            detect.starts(log.of(plant.boiler)),
            start,
            end,
            per_hour=rules.MAX_STARTS_PER_HOUR,
        )
        if len(hours) * timedelta(hours=1) < rule.min_duration:
            continue
        excess = sum(n - rules.MAX_STARTS_PER_HOUR for _, n in hours)
        worst = max(n for _, n in hours)
        trips.append(
            Trip(
                key=f"{rule.name}:plant:{plant.pk}",
                rule=rule.name,
                subject=f"Boiler '{plant.boiler.name}' of heating plant '{plant.name}'",
                subject_url=f"/staff/plants/{plant.pk}/",
                site=plant.site,
                spans=[span for span, _ in hours],
                detail=f"More than {rules.MAX_STARTS_PER_HOUR} starts an hour in {len(hours)} "
                f"hours (at most {worst}); {excess} starts beyond the threshold",
                evidence=[{"actuator": plant.boiler.pk, "name": plant.boiler.name}],
                kwh=excess * rules.BOILER_KW * rules.CYCLE_LOSS_MIN / 60 / rules.BOILER_EFFICIENCY,
            )
        )
    return trips


def _heat_on(valves: list[Actuator], start: datetime, end: datetime, log: CommandLog):
    return detect.union(s for v in valves for s in detect.on_spans(log.of(v), start, end))


def under_setpoint(start: datetime, end: datetime, log: CommandLog) -> list[Trip]:
    rule = rules.RULES[rules.UNDER_SETPOINT]
    trips = []
    for zone, sensor, valves in _measured_zones():
        occupied = occupied_setpoints(zone, start, end)
        if not occupied:
            continue
        found = detect.under_setpoint(
            log.readings(sensor.feed_id),
            occupied,
            _heat_on(valves, start, end, log),
            margin_k=rules.UNDER_SETPOINT_MARGIN_K,
            step=timedelta(seconds=READ_INTERVAL_S),
            min_total=rule.min_duration,
        )
        if not found:
            continue
        name = sensor.name or sensor.key
        trips.append(
            Trip(
                key=f"{rule.name}:zone:{zone.pk}",
                rule=rule.name,
                subject=f"Zone '{zone.name}'",
                subject_url=_zone_url(zone),
                site=zone.site,
                spans=found,
                detail=f"More than {rules.UNDER_SETPOINT_MARGIN_K:g} K below its setpoint for "
                f"{_hours(found):.1f} h of occupied time with the valve ON, in {len(found)} "
                "spells",
                evidence=[{"feed": sensor.feed_id, "name": name}]
                + [{"actuator": v.pk, "name": v.name} for v in valves],
            )
        )
    return trips


def _plants_of_zones() -> dict[int, list[HeatingPlant]]:
    """Each zone's heating plants (a zone may be fed by more than one), read once a run."""
    found: dict[int, list[HeatingPlant]] = {}
    plants = HeatingPlant.objects.filter(enabled=True).select_related("boiler")
    for plant in plants.prefetch_related("zones").order_by("pk")[:MAX_SUBJECTS]:
        for zone in plant.zones.all():
            found.setdefault(zone.pk, []).append(plant)
    return found


def valve_passing(start: datetime, end: datetime, log: CommandLog) -> list[Trip]:
    rule = rules.RULES[rules.VALVE_PASSING]
    plants_of = _plants_of_zones()
    trips = []
    for zone, sensor, valves in _measured_zones():
        plants = plants_of.get(zone.pk, [])
        if not plants:
            continue
        # shut = every valve commanded OFF, from PASSING_SETTLE after its OFF
        shut = [detect.Span(start, end)]
        for v in valves:
            off = detect.off_spans(log.of(v), start, end)
            settled = [detect.Span(s.start + rules.PASSING_SETTLE, s.end) for s in off]
            shut = detect.intersect(shut, [s for s in settled if s.end > s.start])
        boiler_on = detect.union(
            s for p in plants for s in detect.on_spans(log.of(p.boiler), start, end)
        )
        found = detect.warming(
            log.readings(sensor.feed_id),
            detect.intersect(shut, boiler_on),
            rate_k_per_h=rules.PASSING_RATE_K_PER_H,
            sustain=rules.PASSING_SUSTAIN,
            step=timedelta(seconds=READ_INTERVAL_S),
        )
        if not found:
            continue
        rise = sum(k for _, k in found)
        spans = [s for s, _ in found]
        name = sensor.name or sensor.key
        trips.append(
            Trip(
                key=f"{rule.name}:zone:{zone.pk}",
                rule=rule.name,
                subject=f"Valve of zone '{zone.name}'",
                subject_url=_zone_url(zone),
                site=zone.site,
                spans=spans,
                detail=f"Warmed {rise:.1f} K in {_hours(spans):.1f} h over {len(spans)} spells "
                "with its valves commanded shut and the boiler ON",
                evidence=[{"feed": sensor.feed_id, "name": name}]
                + [{"actuator": v.pk, "name": v.name} for v in valves]
                + [{"actuator": p.boiler.pk, "name": p.boiler.name} for p in plants],
                kwh=rise * rules.ROOM_HEAT_KWH_PER_K / rules.BOILER_EFFICIENCY,
            )
        )
    return trips


def sensor_spikes(start: datetime, end: datetime, log: CommandLog) -> list[Trip]:
    rule = rules.RULES[rules.SENSOR_SPIKES]
    trips = []
    for zone in _zones():
        sensor = zone.temperature_sensor
        if sensor is None or sensor.feed_id is None:
            continue
        times = detect.spikes(
            log.readings(sensor.feed_id),
            jump_k=rules.SPIKE_JUMP_K,
            revert_k=rules.SPIKE_REVERT_K,
            within=rules.SPIKE_WITHIN,
            step=timedelta(seconds=READ_INTERVAL_S),
        )
        days = detect.per_day(times, start, end, more_than=rules.SPIKES_PER_DAY)
        if not days:
            continue
        name = sensor.name or sensor.key
        trips.append(
            Trip(
                key=f"{rule.name}:sensor:{sensor.pk}",
                rule=rule.name,
                subject=f"Temperature sensor '{name}' of zone '{zone.name}'",
                subject_url=_zone_url(zone),
                site=zone.site,
                spans=[span for span, _ in days],
                detail=f"{sum(n for _, n in days)} spikes of more than {rules.SPIKE_JUMP_K:g} K "
                f"in {len(days)} days (at most {max(n for _, n in days)} in a day)",
                evidence=[{"feed": sensor.feed_id, "name": name}],
            )
        )
    return trips


CHECKS = {
    rules.HEATING_UNOCCUPIED: heating_unoccupied,
    rules.SENSOR_FLATLINE: sensor_flatline,
    rules.SHORT_CYCLING: short_cycling,
    rules.UNDER_SETPOINT: under_setpoint,
    rules.VALVE_PASSING: valve_passing,
    rules.SENSOR_SPIKES: sensor_spikes,
    rules.BASE_LOAD_RISING: energy_checks.base_load_rising,
    rules.ABOVE_MODEL: energy_checks.above_model,
    rules.PV_LOW_YIELD: energy_checks.pv_low_yield,
    rules.HYDRO_NO_OUTPUT: energy_checks.hydro_no_output,
}


def evaluate(start: datetime, end: datetime) -> Summary:
    """Run every rule over [start, end) (at most MAX_RANGE) and keep the findings: a trip
    opens or updates its subject's open finding; an open finding of a subject that did not
    trip, last seen before `start`, stopped recurring and is closed at `end`."""
    if end <= start:
        raise RangeError("'to' must be after 'from'")
    if end - start > MAX_RANGE:
        raise RangeError(f"a range is at most {MAX_RANGE.days} days: cut it (find_waste does)")
    log = CommandLog(start, end)
    trips = [t for check in CHECKS.values() for t in check(start, end, log)]
    summary = Summary(keys=[t.key for t in trips])
    with transaction.atomic():
        for trip in trips:
            summary.opened += _keep(trip, start, end)
        summary.updated = len(trips) - summary.opened
        stale = Finding.objects.filter(closed_at__isnull=True, last_seen__lte=start)
        summary.closed = stale.exclude(key__in=summary.keys).update(closed_at=end)
    return summary


def _keep(trip: Trip, start: datetime, end: datetime) -> bool:
    """Open or update the trip's finding; True when a new one was opened."""
    rule = rules.RULES[trip.rule]
    fields = {
        "rule": trip.rule,
        "subject": trip.subject[:200],
        "subject_url": trip.subject_url,
        "site": trip.site,
        "period_end": max(s.end for s in trip.spans),
        "last_seen": max(s.end for s in trip.spans),
        "detail": trip.detail,
        "evidence": trip.evidence,
        "cost_method": rule.cost_method,
        "what_to_check": rule.what_to_check,
    }
    if trip.kwh is not None:
        w = waste(trip.kwh, end - start, trip.fuel, trip.site)
        fields.update(
            waste_kwh_week=round(w.kwh_week, 3),
            waste_money_week=None if w.money_week is None else round(w.money_week, 2),
            waste_kg_co2_week=round(w.kg_co2_week, 3),
            currency=w.currency,
        )
    found = Finding.objects.select_for_update().filter(key=trip.key, closed_at__isnull=True).first()
    if found is None:
        first = min(s.start for s in trip.spans)
        Finding.objects.create(key=trip.key, period_start=first, **fields)
        return True
    for name, value in fields.items():
        setattr(found, name, value)
    found.period_end = max(found.period_end, fields["period_end"])
    found.last_seen = max(found.last_seen, fields["last_seen"])
    found.save()
    return False


def evaluate_range(start: datetime, end: datetime) -> list[Summary]:
    """`evaluate` week by week over a range of any length (find_waste --from --to)."""
    if end <= start:
        raise RangeError("'to' must be after 'from'")
    summaries = []
    t = start
    while t < end:
        summaries.append(evaluate(t, min(t + MAX_RANGE, end)))
        t += MAX_RANGE
    return summaries
