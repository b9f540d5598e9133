"""Run the rules over a range of history and keep the findings (docs/FINDINGS.md).

    evaluate(start, end) -> Summary(opened, updated, closed)

The rules' points are found through the site model (findings/points.py); the six first rules'
checks are here, the plant rules' in findings/plant_checks.py, all registered in CHECKS. Work is
bounded: a range is cut into weeks (MAX_RANGE), and findings/points.py bounds what a rule reads.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from control.models import HeatingPlant
from core.words import counted, one_line
from findings import detect, energy_checks, plant_checks, rules
from findings.costs import waste
from findings.models import Finding
from findings.points import (
    READ_INTERVAL_S,
    CommandLog,
    Trip,
    bound,
    heat_on,
    measured_zones,
    occupancy,
    occupied_setpoints,
    plant_subject,
    sensor_subject,
    span_hours,
    trip,
    zone_points,
    zone_subject,
)

MAX_RANGE = timedelta(days=7)
# What `now` is when a caller gives none: a test of recorded weeks sets it (tests/findings).
clock = timezone.now


class RangeError(ValueError):
    """A range the evaluator refuses (end not after start, or longer than MAX_RANGE)."""


@dataclass
class Summary:
    opened: int = 0
    updated: int = 0
    closed: int = 0
    keys: list[str] = field(default_factory=list)


def heating_unoccupied(start: datetime, end: datetime, log: CommandLog) -> list[Trip]:
    rule = rules.RULES[rules.HEATING_UNOCCUPIED]
    trips = []
    for zone, points in zone_points(rule, log):
        valves = points["valves"]
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
        hours = span_hours(found)
        trips.append(
            trip(
                rule,
                zone_subject(zone),
                found,
                f"Valve ON {hours:.1f} h outside occupancy in {counted(len(found), 'spell')} "
                f"(asked for by: {', '.join(strategies)})",
                actuators=valves,
                kwh=hours * rules.ZONE_HEAT_KW / rules.BOILER_EFFICIENCY,
            )
        )
    return trips


def sensor_flatline(start: datetime, end: datetime, log: CommandLog) -> list[Trip]:
    rule = rules.RULES[rules.SENSOR_FLATLINE]
    trips = []
    for zone, sensor, valves in measured_zones(rule, log):
        found = detect.flatline(
            log.readings(sensor.feed_id),
            heat_on(valves, start, end, log),
            start,
            end,
            window=rule.window,
            band_k=rules.FLATLINE_BAND_K,
            min_readings=rules.FLATLINE_MIN_READINGS,
            min_heat=rules.FLATLINE_MIN_HEAT,
        )
        if not found:
            continue
        trips.append(
            trip(
                rule,
                sensor_subject(zone, sensor),
                found,
                f"Flat within {rules.FLATLINE_BAND_K:g} K for {counted(len(found), 'spell')} "
                "of 6 h "
                "while the zone's valve was ON",
                sensors=[sensor],
                actuators=valves,
            )
        )
    return trips


def short_cycling(start: datetime, end: datetime, log: CommandLog) -> list[Trip]:
    rule = rules.RULES[rules.SHORT_CYCLING]
    trips = []
    plants = HeatingPlant.objects.filter(enabled=True).select_related("site")
    for plant, points in bound(rule, log, HeatingPlant, plants):
        boiler = points["boiler"][0]
        hours = detect.short_cycling(
            detect.starts(log.of(boiler)),
            start,
            end,
            per_hour=rules.MAX_STARTS_PER_HOUR,
        )
        if len(hours) * timedelta(hours=1) < rule.min_duration:
            continue
        excess = sum(n - rules.MAX_STARTS_PER_HOUR for _, n in hours)
        worst = max(n for _, n in hours)
        trips.append(
            trip(
                rule,
                plant_subject(plant, f"Boiler '{boiler.name}' of heating plant '{plant.name}'"),
                [span for span, _ in hours],
                f"More than {rules.MAX_STARTS_PER_HOUR} starts an hour in "
                f"{counted(len(hours), 'hour')} (at most {worst}); {excess} starts beyond the "
                "threshold",
                actuators=[boiler],
                kwh=excess * rules.BOILER_KW * rules.CYCLE_LOSS_MIN / 60 / rules.BOILER_EFFICIENCY,
            )
        )
    return trips


def under_setpoint(start: datetime, end: datetime, log: CommandLog) -> list[Trip]:
    rule = rules.RULES[rules.UNDER_SETPOINT]
    trips = []
    for zone, sensor, valves in measured_zones(rule, log):
        occupied = occupied_setpoints(zone, start, end)
        if not occupied:
            continue
        found = detect.under_setpoint(
            log.readings(sensor.feed_id),
            occupied,
            heat_on(valves, start, end, log),
            margin_k=rules.UNDER_SETPOINT_MARGIN_K,
            step=timedelta(seconds=READ_INTERVAL_S),
            min_total=rule.min_duration,
        )
        if not found:
            continue
        trips.append(
            trip(
                rule,
                zone_subject(zone),
                found,
                f"More than {rules.UNDER_SETPOINT_MARGIN_K:g} K below its setpoint for "
                f"{span_hours(found):.1f} h of occupied time with the valve ON, in "
                f"{counted(len(found), 'spell')}",
                sensors=[sensor],
                actuators=valves,
            )
        )
    return trips


def valve_passing(start: datetime, end: datetime, log: CommandLog) -> list[Trip]:
    rule = rules.RULES[rules.VALVE_PASSING]
    trips = []
    for zone, points in zone_points(rule, log):
        sensor, valves, boilers = points["temperature"][0], points["valves"], points["boilers"]
        # shut = every valve commanded OFF, from PASSING_SETTLE after its OFF
        shut = [detect.Span(start, end)]
        for v in valves:
            off = detect.off_spans(log.of(v), start, end)
            settled = [detect.Span(s.start + rules.PASSING_SETTLE, s.end) for s in off]
            shut = detect.intersect(shut, [s for s in settled if s.end > s.start])
        boiler_on = detect.union(s for b in boilers for s in detect.on_spans(log.of(b), start, end))
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
        trips.append(
            trip(
                rule,
                zone_subject(zone, f"Valve of zone '{zone.name}'"),
                spans,
                f"Warmed {rise:.1f} K in {span_hours(spans):.1f} h over "
                f"{counted(len(spans), 'spell')} with its valves commanded shut and the boiler ON",
                sensors=[sensor],
                actuators=valves + boilers,
                kwh=rise * rules.ROOM_HEAT_KWH_PER_K / rules.BOILER_EFFICIENCY,
            )
        )
    return trips


def sensor_spikes(start: datetime, end: datetime, log: CommandLog) -> list[Trip]:
    rule = rules.RULES[rules.SENSOR_SPIKES]
    trips = []
    for zone, points in zone_points(rule, log):
        sensor = points["temperature"][0]
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
        trips.append(
            trip(
                rule,
                sensor_subject(zone, sensor),
                [span for span, _ in days],
                f"{sum(n for _, n in days)} spikes of more than {rules.SPIKE_JUMP_K:g} K "
                f"in {counted(len(days), 'day')} (at most {max(n for _, n in days)} in a day)",
                sensors=[sensor],
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
    rules.LOW_DELTA_T: plant_checks.low_delta_t,
    rules.SOLAR_NO_GAIN: plant_checks.solar_no_gain,
    rules.WINDOW_DROPS: plant_checks.window_drops,
    rules.OPTIMUM_PINNED: plant_checks.optimum_pinned,
    rules.SENSOR_RANGE: plant_checks.sensor_out_of_range,
    rules.SENSOR_DRIFT: plant_checks.sensor_drift,
    rules.BASE_LOAD_RISING: energy_checks.base_load_rising,
    rules.ABOVE_MODEL: energy_checks.above_model,
    rules.PV_LOW_YIELD: energy_checks.pv_low_yield,
    rules.HYDRO_NO_OUTPUT: energy_checks.hydro_no_output,
}


def evaluate(start: datetime, end: datetime, now: datetime | None = None) -> Summary:
    """Run every rule over [start, end) (at most MAX_RANGE; the part after `now`, default
    the clock, is not judged: it has not happened) and keep the findings: a trip opens or
    updates its subject's open finding. Only a range of a whole week closes anything: an
    open finding of a subject that did not trip in it, last seen before `start`, stopped
    recurring and is closed at `end`. A shorter range cannot say a week passed without it."""
    if end <= start:
        raise RangeError("'to' must be after 'from'")
    if end - start > MAX_RANGE:
        raise RangeError(f"a range is at most {MAX_RANGE.days} days: cut it (find_waste does)")
    whole_week = end - start >= MAX_RANGE
    end = min(end, now or clock())
    if end <= start:
        return Summary()  # all in the future
    log = CommandLog(start, end)
    found = (t for check in CHECKS.values() for t in check(start, end, log))
    trips = [t for t in (_since_closed(t) for t in found) if t is not None]
    summary = Summary(keys=[t.key for t in trips])
    with transaction.atomic():
        for trip in trips:
            summary.opened += _keep(trip, start, end)
        summary.updated = len(trips) - summary.opened
        if whole_week and end - start >= MAX_RANGE:
            stale = Finding.objects.filter(closed_at__isnull=True, last_seen__lte=start)
            summary.closed = stale.exclude(key__in=summary.keys).update(closed_at=end)
    return summary


def _since_closed(trip: Trip) -> Trip | None:
    """The trip without the spans its key's last closed finding already accounts for, or
    None when nothing is left. A finding marked fixed at 10:00 on Wednesday stays fixed: the
    next hourly run looks back over the last week, and Monday's spans (ending before the fix)
    are the fault that was fixed, not a recurrence; only a span ending after it opens a new
    finding. The same holds for a finding that closed by itself: a rerun over a week it
    already saw does not open it again. While an open finding of the key exists the spans are
    kept as they are: that finding is already about them."""
    last = (
        Finding.objects.filter(key=trip.key, closed_at__isnull=False)
        .order_by("-closed_at", "-pk")
        .only("state", "state_at", "last_seen")
        .first()
    )
    if last is None or Finding.objects.filter(key=trip.key, closed_at__isnull=True).exists():
        return trip
    cutoff = last.last_seen
    if last.state == Finding.State.FIXED and last.state_at is not None:
        cutoff = max(cutoff, last.state_at)
    spans = [s for s in trip.spans if s.end > cutoff]
    if len(spans) == len(trip.spans):
        return trip
    if not spans:
        return None
    kwh, hours = trip.kwh, span_hours(trip.spans)
    if kwh is not None and hours > 0:
        # The rule's estimate is for all its spans: the recurrence's share, by hours.
        kwh *= span_hours(spans) / hours
    # The rule's words count every span it saw, the fixed fault's too: say which are new.
    how = "marked fixed" if cutoff != last.last_seen else "last seen"
    local = cutoff.astimezone(ZoneInfo(settings.TIME_ZONE))
    since = (
        f"{trip.detail}; new since the finding before it ({how} {local:%a %d %b %H:%M}): "
        f"{counted(len(spans), 'spell')}, {span_hours(spans):.1f} h"
    )
    return replace(trip, spans=spans, kwh=kwh, detail=since)


def _keep(trip: Trip, start: datetime, end: datetime) -> bool:
    """Open or update the trip's finding; True when a new one was opened."""
    rule = rules.RULES[trip.rule]
    fields = {
        "rule": trip.rule,
        # Names are people's (a zone called "Hall\nEast"): one line, so the page, the API and
        # the digest's numbered list never show a break that reads as the next finding.
        "subject": one_line(trip.subject)[:200],
        "subject_url": trip.subject_url,
        "site": trip.site,
        # A span may run to its hour's or day's end: never past the judged range.
        "period_end": min(max(s.end for s in trip.spans), end),
        "last_seen": min(max(s.end for s in trip.spans), end),
        "detail": one_line(trip.detail),
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
    found = _open_finding(trip.key)
    if found is None:
        first = min(s.start for s in trip.spans)
        try:
            # A savepoint: on PostgreSQL a failed statement spoils the whole transaction.
            with transaction.atomic():
                Finding.objects.create(key=trip.key, period_start=first, **fields)
            return True
        except IntegrityError:
            # Another run (the hourly beat, find_waste, the staff "run now") opened this key's
            # finding between our look and our insert, and the open-key constraint
            # (finding_open_key) refused the second: update the winner's row instead. Read
            # committed: this new query sees the winner's committed row.
            found = _open_finding(trip.key)
            if found is None:
                raise  # not the open-key race: some other constraint, worth seeing
    for name, value in fields.items():
        setattr(found, name, value)
    found.period_end = max(found.period_end, fields["period_end"])
    found.last_seen = max(found.last_seen, fields["last_seen"])
    found.save()
    return False


def _open_finding(key: str) -> Finding | None:
    return Finding.objects.select_for_update().filter(key=key, closed_at__isnull=True).first()


def evaluate_range(start: datetime, end: datetime, now: datetime | None = None) -> list[Summary]:
    """`evaluate` week by week over a range of any length (find_waste --from --to); weeks
    that have not begun by `now` are not run."""
    if end <= start:
        raise RangeError("'to' must be after 'from'")
    now = now or clock()
    summaries = []
    t = start
    while t < min(end, now):
        summaries.append(evaluate(t, min(t + MAX_RANGE, end), now=now))
        t += MAX_RANGE
    return summaries
