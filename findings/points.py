"""Where a rule's points come from, and what a rule's trip is (docs/FINDINGS.md).

Points are found by Brick class in the site's Brick model (findings/needs.py, site_model.py):
`bound(rule, log, Zone)` gives each zone the rule can judge with the sensors and actuators
its needs name. Schedules and bookings come from the zone; relay commands from the audit log
(ActuatorCommand, with the strategy that asked); feeds are read from the feed store.
Shared by the rule modules (findings/evaluate.py, findings/plant_checks.py) so none imports
another. Work is bounded: at most MAX_SUBJECTS zones or plants a rule, MAX_COMMANDS audit rows
an actuator a range, and feeds read at READ_INTERVAL_S (at most a week's 2,016 points).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from django.conf import settings

from control.engine.strategies import bookings as booking_windows
from control.engine.strategies import schedule as schedule_windows
from control.mapper import booking_spec, schedule_spec
from control.models import ActuatorCommand, HeatingPlant, SolarCircuit, Zone
from feeds.store import service as feed_service
from findings import detect, rules
from findings.brick import site_graph
from findings.site_model import Entity, SiteModel
from sensors.models import Actuator, Sensor, Site

MAX_SUBJECTS = 500
MAX_COMMANDS = 20_000  # a relay switched every 30 s for a week: more is a broken log
READ_INTERVAL_S = 300
TRUNCATED = "log_truncated"  # the strategy of the stop put where MAX_COMMANDS cut the log


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


@dataclass(frozen=True)
class Subject:
    """What a finding is about: its part of the finding's key ("zone:3"), its name in plain
    words, the page it is on, and its site (for the tariff)."""

    key: str
    words: str
    url: str
    site: Site | None


def zone_subject(zone: Zone, words: str = "") -> Subject:
    return Subject(f"zone:{zone.pk}", words or f"Zone '{zone.name}'", zone_url(zone), zone.site)


def sensor_subject(zone: Zone, sensor: Sensor) -> Subject:
    return Subject(
        f"sensor:{sensor.pk}",
        f"Temperature sensor '{sensor_name(sensor)}' of zone '{zone.name}'",
        zone_url(zone),
        zone.site,
    )


def plant_subject(plant: HeatingPlant, words: str) -> Subject:
    return Subject(f"plant:{plant.pk}", words, f"/staff/plants/{plant.pk}/", plant.site)


def sensor_name(sensor: Sensor) -> str:
    return sensor.name or sensor.key


def trip(
    rule: rules.Rule,
    subject: Subject,
    spans: list[detect.Span],
    detail: str,
    *,
    sensors: Iterable[Sensor] = (),
    actuators: Iterable[Actuator] = (),
    kwh: float | None = None,
    fuel: str = rules.HEATING_FUEL,
) -> Trip:
    """A rule's trip on `subject`, its evidence the feeds of `sensors` then `actuators`' audit
    rows, in the order given (the page links them in that order)."""
    evidence = [{"feed": s.feed_id, "name": sensor_name(s)} for s in sensors]
    evidence += [{"actuator": a.pk, "name": a.name} for a in actuators]
    return Trip(
        key=f"{rule.name}:{subject.key}",
        rule=rule.name,
        subject=subject.words,
        subject_url=subject.url,
        site=subject.site,
        spans=spans,
        detail=detail,
        evidence=evidence,
        kwh=kwh,
        fuel=fuel,
    )


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
            self._readings[feed_id] = read_feed(feed_id, self.start, self.end)
        return self._readings[feed_id]

    @functools.cached_property
    def model(self) -> SiteModel:
        """The site's Brick model, built once a run for every rule."""
        return SiteModel(site_graph())


# The Brick model's name for each kind of subject a rule judges (findings/brick.py).
SUBJECT_KIND = {Zone: "zone", HeatingPlant: "plant", SolarCircuit: "collector"}
Point = Sensor | Actuator | Entity


def bound(rule: rules.Rule, log: CommandLog, model, rows=None, kind: str = "") -> list[tuple]:
    """Each enabled `model` row (a Zone, HeatingPlant or SolarCircuit) the rule's needs find
    points for in the site's Brick model, with {need name: its sensors or actuators}; a
    sensor counts only when recorded in a feed. In id order, at most MAX_SUBJECTS.
    `rows`: the queryset to read the subjects from (default: the enabled ones); `kind`: the
    model's name for them where it is not SUBJECT_KIND's (a Meter is a "meter", the
    "generator" it meters, or a "place" for a MeterNode)."""
    kind = kind or SUBJECT_KIND[model]
    bindings = [b for b in log.model.bind(rule.subject, rule.needs) if b.subject.kind == kind]
    if rows is None:
        rows = model.objects.filter(enabled=True)
    subjects = rows.in_bulk([b.subject.pk for b in bindings])
    wanted = [e for b in bindings for points in b.points.values() for e in points]
    sensors = Sensor.objects.in_bulk([e.pk for e in wanted if e.kind == "sensor"])
    # a relay's command point is named for its actuator (urn:bms:command-<actuator id>)
    actuators = Actuator.objects.in_bulk(
        [e.pk for e in wanted if e.kind in ("command", "actuator")]
    )
    found = []
    for b in bindings:
        if (subject := subjects.get(b.subject.pk)) is None:
            continue
        points: dict[str, list[Point]] = {}
        for need in rule.needs:
            rows_of = []
            for e in b.points.get(need.name, []):
                if e.kind == "sensor":
                    if (s := sensors.get(e.pk)) and s.feed_id is not None:
                        rows_of.append(s)
                elif e.kind in ("command", "actuator"):
                    if a := actuators.get(e.pk):
                        rows_of.append(a)
                else:  # a meter's own point: its subject row holds what the check reads
                    rows_of.append(e)
            if not rows_of and not need.optional and not need.absent:
                break
            points[need.name] = rows_of
        else:
            found.append((subject, points))
            if len(found) >= MAX_SUBJECTS:
                break
    return found


def zone_points(rule: rules.Rule, log: CommandLog) -> list[tuple[Zone, dict[str, list[Point]]]]:
    return bound(rule, log, Zone, zones_queryset())


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


def zones():
    return zones_queryset()[:MAX_SUBJECTS]


def zones_queryset():
    return (
        Zone.objects.filter(enabled=True)
        .select_related("site", "schedule", "temperature_sensor")
        # what schedule_spec reads of each schedule, fetched once for all the zones
        .prefetch_related(
            "actuators", "schedule__periods", "schedule__exceptions", "schedule__calendars__entries"
        )
        .order_by("pk")
    )


def measured_zones(rule: rules.Rule, log: CommandLog):
    """(zone, its temperature sensor, its valves) for each zone with a recorded sensor and at
    least one valve: what the rules over a room's temperature and its heat need."""
    for zone, points in zone_points(rule, log):
        yield zone, points["temperature"][0], points["valves"]


def zone_url(zone: Zone) -> str:
    return f"/staff/control/#zone-{zone.slug}"


def span_hours(spans: list[detect.Span]) -> float:
    return sum(s.hours for s in spans)


def read_feed(feed_id: int, start: datetime, end: datetime) -> list[tuple[datetime, float]]:
    """The feed's READ_INTERVAL_S means over the range, windows without a reading left out.
    Means, not the slot at each window's start: a sensor posting off that grid (every 60 s at
    :17, or every 300 s unaligned) had nothing at those slots and was never judged."""
    rows = feed_service.read(
        feed_id, int(start.timestamp()), int(end.timestamp()), READ_INTERVAL_S,
        average=True, skipmissing=True,
    )  # fmt: skip
    tz = start.tzinfo
    return [(datetime.fromtimestamp(t / 1000, tz), v) for t, v in rows if v is not None]


def heat_on(valves: list[Actuator], start: datetime, end: datetime, log: CommandLog):
    return detect.union(s for v in valves for s in detect.on_spans(log.of(v), start, end))
