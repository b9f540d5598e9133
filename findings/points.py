"""Where a rule's points come from, and what a rule's trip is (docs/FINDINGS.md).

Points are found through the site model: zones with their temperature sensors, valves,
schedules and bookings; heating plants with their boilers and their zones; relay commands from
the audit log (ActuatorCommand, with the strategy that asked); feeds read from the feed store.
Shared by the rule modules (findings/evaluate.py, findings/plant_checks.py) so none imports
another. Work is bounded: at most MAX_SUBJECTS zones or plants a rule, MAX_COMMANDS audit rows
an actuator a range, and feeds read at READ_INTERVAL_S (at most a week's 2,016 points).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from django.conf import settings

from control.engine.strategies import bookings as booking_windows
from control.engine.strategies import schedule as schedule_windows
from control.mapper import booking_spec, schedule_spec
from control.models import ActuatorCommand, HeatingPlant, Zone
from feeds.store import service as feed_service
from findings import detect, rules
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
    return (
        Zone.objects.filter(enabled=True)
        .select_related("site", "schedule", "temperature_sensor")
        # what schedule_spec reads of each schedule, fetched once for all the zones
        .prefetch_related(
            "actuators", "schedule__periods", "schedule__exceptions", "schedule__calendars__entries"
        )
        .order_by("pk")[:MAX_SUBJECTS]
    )


def measured_zones():
    """(zone, its temperature sensor, its valves) for each zone with a recorded sensor and at
    least one valve: what the rules over a room's temperature and its heat need."""
    for zone in zones():
        sensor = zone.temperature_sensor
        valves = list(zone.actuators.all())
        if sensor is not None and sensor.feed_id is not None and valves:
            yield zone, sensor, valves


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


def plants_of_zones() -> dict[int, list[HeatingPlant]]:
    """Each zone's heating plants (a zone may be fed by more than one), read once a run."""
    found: dict[int, list[HeatingPlant]] = {}
    plants = HeatingPlant.objects.filter(enabled=True).select_related("boiler")
    for plant in plants.prefetch_related("zones").order_by("pk")[:MAX_SUBJECTS]:
        for zone in plant.zones.all():
            found.setdefault(zone.pk, []).append(plant)
    return found
