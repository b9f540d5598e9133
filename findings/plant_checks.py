"""The plant rules' checks (docs/FINDINGS.md): a heating plant's flow-return ΔT, a solar pump
with no gain, frequent open-window drops, optimum start pinned at its limits, and the zones'
sensors out of range or drifting from their neighbours. Each finds its points through the site
model (findings/points.py) and judges them with a pure condition (findings/detect.py)."""

from __future__ import annotations

from datetime import datetime, timedelta

from control.engine import specs
from control.models import HeatingPlant, OptimumStartLog, SolarCircuit, WindowDetection
from core.words import counted
from findings import detect, rules
from findings.points import (
    MAX_SUBJECTS,
    READ_INTERVAL_S,
    CommandLog,
    Subject,
    Trip,
    bound,
    measured_zones,
    plant_subject,
    sensor_subject,
    span_hours,
    trip,
    zone_points,
    zone_subject,
)

STEP = timedelta(seconds=READ_INTERVAL_S)
EVIDENCE_NEIGHBOURS = 5


def low_delta_t(start: datetime, end: datetime, log: CommandLog) -> list[Trip]:
    rule = rules.RULES[rules.LOW_DELTA_T]
    trips = []
    plants = HeatingPlant.objects.filter(enabled=True).select_related("site")
    for plant, points in bound(rule, log, HeatingPlant, plants):
        boiler, flow_sensor, return_sensor = (points[k][0] for k in ("boiler", "flow", "return"))
        flow = log.readings(flow_sensor.feed_id)
        firing = [
            detect.Span(s.start + rules.LOW_DT_SETTLE, s.end)
            for s in detect.on_spans(log.of(boiler), start, end)
            if s.end - s.start > rules.LOW_DT_SETTLE
        ]
        hot = detect.held(flow, lambda v: v >= rules.LOW_DT_MIN_FLOW_C, STEP)
        small = detect.held(
            detect.difference(flow, log.readings(return_sensor.feed_id)),
            lambda dt: dt < rules.LOW_DT_K,
            STEP,
        )
        found = detect.intersect(detect.intersect(small, hot), firing)
        if detect.total(found) <= rule.min_duration:
            continue
        trips.append(
            trip(
                rule,
                plant_subject(plant, f"Heating plant '{plant.name}'"),
                found,
                f"Flow-return ΔT under {rules.LOW_DT_K:g} K for {span_hours(found):.1f} h "
                f"while the boiler fired with the flow at {rules.LOW_DT_MIN_FLOW_C:g} °C or "
                f"more, in {counted(len(found), 'spell')}",
                sensors=[flow_sensor, return_sensor],
                actuators=[boiler],
            )
        )
    return trips


def solar_no_gain(start: datetime, end: datetime, log: CommandLog) -> list[Trip]:
    rule = rules.RULES[rules.SOLAR_NO_GAIN]
    trips = []
    circuits = SolarCircuit.objects.filter(enabled=True).select_related("site")
    for circuit, points in bound(rule, log, SolarCircuit, circuits):
        collector, tank_sensor, pump = (points[k][0] for k in ("collector", "tank", "pump"))
        tank = log.readings(tank_sensor.feed_id)
        colder = detect.held(
            detect.difference(log.readings(collector.feed_id), tank),
            lambda dt: dt < -rules.SOLAR_NO_GAIN_MARGIN_K,
            STEP,
        )
        running = [
            s
            for s in detect.on_spans(log.of(pump), start, end)
            if s.strategy not in rules.SOLAR_EXCUSED
        ]
        found = [
            s
            for s in detect.intersect(detect.union(running), colder)
            if s.end - s.start >= rule.min_duration
        ]
        if not found:
            continue
        hours = span_hours(found)
        fall = sum(_fall(tank, s) for s in found)
        trips.append(
            trip(
                rule,
                Subject(
                    f"solar:{circuit.pk}",
                    f"Solar pump '{pump.name}' of solar circuit '{circuit.name}'",
                    f"/staff/plants/solar/{circuit.pk}/",
                    circuit.site,
                ),
                found,
                f"Pump ON {hours:.1f} h in {counted(len(found), 'spell')} with the collector "
                f"more than {rules.SOLAR_NO_GAIN_MARGIN_K:g} K colder than the tank; the tank fell "
                f"{fall:.1f} K meanwhile",
                sensors=[collector, tank_sensor],
                actuators=[pump],
                kwh=hours * rules.SOLAR_PUMP_KW + fall * rules.SOLAR_TANK_KWH_PER_K,
                fuel=rules.ELECTRICITY_FUEL,
            )
        )
    return trips


def _fall(readings: list[tuple[datetime, float]], span: detect.Span) -> float:
    """How far the tank fell over the span: its first reading in it less its last (0 if it
    rose: sun on a cold collector, or a boiler topping it up)."""
    within = [v for t, v in readings if span.start <= t <= span.end]
    return max(0.0, within[0] - within[-1]) if within else 0.0


def window_drops(start: datetime, end: datetime, log: CommandLog) -> list[Trip]:
    rule = rules.RULES[rules.WINDOW_DROPS]
    # A range shorter than a week is held to its share of the weekly count (a day as the least,
    # as costs are scaled): the hourly run always sees a week.
    share = max(end - start, timedelta(days=1)) / timedelta(days=7)
    allowed = rules.WINDOW_DROPS_PER_WEEK * share
    detection = {w.zone_id: w for w in WindowDetection.objects.all()}
    trips = []
    for zone, sensor, valves in measured_zones(rule, log):
        paused = detect.union(
            s
            for v in valves
            for s in detect.strategy_spans(
                log.of(v), start, end, state=False, strategy=specs.OPEN_WINDOW
            )
        )
        if len(paused) <= allowed:
            continue
        # the fall began up to the zone's drop time before the pause (a reading's slot more)
        tuned = detection.get(zone.pk) or WindowDetection()
        readings = log.readings(sensor.feed_id)
        before = timedelta(minutes=tuned.drop_minutes) + STEP
        fall = sum(detect.drop_during(readings, s, before=before) for s in paused)
        trips.append(
            trip(
                rule,
                zone_subject(zone),
                paused,
                f"Heating stopped for an open window {counted(len(paused), 'time')} (more than "
                f"{rules.WINDOW_DROPS_PER_WEEK} a week); the room fell {fall:.1f} K in all",
                sensors=[sensor],
                actuators=valves,
                kwh=fall * rules.ROOM_HEAT_KWH_PER_K / rules.BOILER_EFFICIENCY,
            )
        )
    return trips


def optimum_pinned(start: datetime, end: datetime, log: CommandLog) -> list[Trip]:
    rule = rules.RULES[rules.OPTIMUM_PINNED]
    trips = []
    for zone, points in zone_points(rule, log):
        if not zone.optimum_start:
            continue
        rows = OptimumStartLog.objects.filter(
            zone=zone, occupancy_start__gte=start, occupancy_start__lt=end
        ).order_by("occupancy_start")
        starts = [(r.occupancy_start, r.preheat_started, r.rate_after) for r in rows[:MAX_SUBJECTS]]
        pinned, days = detect.pinned_days(
            starts,
            max_lead=timedelta(minutes=zone.max_preheat_min),
            tolerance=rules.OPTIMUM_PINNED_TOLERANCE,
            rate_bounds=rules.OPTIMUM_RATE_BOUNDS,
        )
        pinned_on = len({s.end.date() for s in pinned})
        if pinned_on < rules.OPTIMUM_PINNED_MIN_DAYS or pinned_on * 2 <= days:
            continue
        trips.append(
            trip(
                rule,
                zone_subject(zone, f"Optimum start of zone '{zone.name}'"),
                pinned,
                f"Pre-heat pinned at its limit on {pinned_on} of {days} days (maximum "
                f"{zone.max_preheat_min} min; learned rate now {starts[-1][2]:g} min/K)",
                sensors=points["temperature"],
            )
        )
    return trips


def sensor_out_of_range(start: datetime, end: datetime, log: CommandLog) -> list[Trip]:
    rule = rules.RULES[rules.SENSOR_RANGE]
    trips = []
    for zone, points in zone_points(rule, log):
        sensor = points["temperature"][0]
        found = [
            s
            for s in detect.held(
                log.readings(sensor.feed_id),
                lambda v: not rules.RANGE_LOW_C <= v <= rules.RANGE_HIGH_C,
                STEP,
            )
            if s.end - s.start >= rule.min_duration
        ]
        if not found:
            continue
        trips.append(
            trip(
                rule,
                sensor_subject(zone, sensor),
                found,
                f"Read outside {rules.RANGE_LOW_C:g}–{rules.RANGE_HIGH_C:g} °C for "
                f"{span_hours(found):.1f} h in {counted(len(found), 'spell')}",
                sensors=[sensor],
            )
        )
    return trips


def _growing(gaps: list[tuple[detect.Span, float]]) -> tuple[float, float] | None:
    return detect.growing_gap(
        gaps,
        band_k=rules.DRIFT_BAND_K,
        min_k_per_day=rules.DRIFT_K_PER_DAY,
        min_days=rules.DRIFT_MIN_DAYS,
    )


def sensor_drift(start: datetime, end: datetime, log: CommandLog) -> list[Trip]:
    rule = rules.RULES[rules.SENSOR_DRIFT]
    means: dict[int, dict[datetime, float]] = {}
    sensor_of = {zone: points["temperature"][0] for zone, points in zone_points(rule, log)}
    measured = list(sensor_of)
    for zone in measured:
        days = detect.daily_means(
            log.readings(sensor_of[zone].feed_id),
            start,
            end,
            min_readings=rules.DRIFT_MIN_READINGS,
        )
        means[zone.pk] = {span.start: mean for span, mean in days}
    trips = []
    for zone in measured:
        neighbours = [z for z in measured if z.site_id == zone.site_id and z.pk != zone.pk]
        gaps = []
        for day, mean in means[zone.pk].items():
            theirs = [means[n.pk][day] for n in neighbours if day in means[n.pk]]
            if len(theirs) >= rules.DRIFT_MIN_NEIGHBOURS:
                gaps.append(
                    (
                        detect.Span(day, min(day + timedelta(days=1), end)),
                        mean - detect.median(theirs),
                    )
                )
        drift = _growing(gaps)
        if drift is None:
            continue
        last, slope = drift
        # The median alone is pulled by faulty neighbours: with a flat-lined sensor and a room
        # warmed by a stuck-open valve among four, a healthy room seemed to drift from the
        # stuck reading (an outside tester, #30). A sensor that drifts drifts from each
        # healthy room: most of its neighbours, and at least DRIFT_MIN_NEIGHBOURS of them,
        # must each see the gap widen the same way.
        compared = widening = 0
        for n in neighbours:
            pairs = [
                (detect.Span(day, min(day + timedelta(days=1), end)), mean - means[n.pk][day])
                for day, mean in means[zone.pk].items()
                if day in means[n.pk]
            ]
            if len(pairs) < rules.DRIFT_MIN_DAYS:
                continue
            compared += 1
            alone = _growing(pairs)
            widening += alone is not None and (alone[0] > 0) == (last > 0)
        if widening < rules.DRIFT_MIN_NEIGHBOURS or 2 * widening <= compared:
            continue
        sensor = sensor_of[zone]
        trips.append(
            trip(
                rule,
                sensor_subject(zone, sensor),
                [span for span, _ in gaps],
                f"Its daily mean is {abs(last):.1f} K {'above' if last > 0 else 'below'} the "
                f"other zones' of its site on the last day, the gap widening {abs(slope):.2f} K "
                f"a day over {counted(len(gaps), 'day')}",
                # its neighbours' feeds to compare with, a few: a site may have hundreds
                sensors=[sensor] + [sensor_of[n] for n in neighbours[:EVIDENCE_NEIGHBOURS]],
            )
        )
    return trips
