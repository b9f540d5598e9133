"""Replay a zone's strategies over recorded history, switching nothing.

The zone's temperature feed (feeds.store.service.read) and its bookings and schedule drive the same
pure evaluator the live tick uses; actuators are simulated (their min on/off times apply).
It is open loop: the recorded temperatures are what happened under the control of the time,
so the replay shows what these strategies *would have decided* — switching times, heating
hours, comfort misses (occupancy started below setpoint − hysteresis), short cycles — and
the optimum-start rate, before they switch a real boiler.

The rate is measured from the room, not from the replay's own timing: the recorded temperature
rise during heat actually applied (confirmed ONs in the relay log; control/room_response.py).
Where the replay pre-heats, the temperature at occupancy start is predicted from that measured
rate, since the recording shows the old controller's start, not this one's. The report says
which the rate was learned from.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from django.conf import settings
from django.utils import timezone

from control import mapper
from control.engine.evaluator import evaluate
from control.engine.specs import ActuatorSpec, Reading, Snapshot, ZoneSpec
from control.engine.strategies import bookings as booking_windows
from control.engine.strategies import schedule as schedule_windows
from control.models import Booking, ScheduleException, Zone
from control.room_response import heat_intervals, measure_runs, rate_until
from control.runtime import ActuatorRuntime
from core.dates import when_text
from feeds.store import service as feed_service
from sensors.models import Actuator

MAX_STEPS = 20_000
DEFAULT_SHORT_CYCLE_S = 600


@dataclass
class Switch:
    at: datetime
    actuator: str
    state: bool
    reason: str


@dataclass
class ComfortMiss:
    at: datetime
    label: str
    setpoint: float
    temperature: float | None
    # True when the temperature is predicted from the measured rate and the replay's own
    # pre-heat start, not read from the recording.
    predicted: bool = False


@dataclass
class ShortCycle:
    actuator: str
    on_at: datetime
    off_at: datetime

    @property
    def minutes(self) -> float:
        return (self.off_at - self.on_at).total_seconds() / 60


@dataclass
class ReplayReport:
    zone: str
    start: datetime
    end: datetime
    step_s: int
    samples: int = 0
    missing_samples: int = 0
    heating_hours: float = 0.0
    occupancies: int = 0
    switches: list[Switch] = field(default_factory=list)
    comfort_misses: list[ComfortMiss] = field(default_factory=list)
    short_cycles: list[ShortCycle] = field(default_factory=list)
    rate_start: float = 0.0
    rate_end: float = 0.0
    heat_runs: int = 0
    learned_from: str = ""

    def as_text(self, tz: ZoneInfo) -> str:
        def t(d: datetime) -> str:
            return when_text(d, tz)

        lines = [
            f"Replay of zone '{self.zone}' {t(self.start)} – {t(self.end)}, step {self.step_s} s "
            "(no relay touched)",
            f"Samples: {self.samples} ({self.missing_samples} without a reading)",
            f"Heating hours: {self.heating_hours:.2f}",
            f"Switching: {len(self.switches)}",
        ]
        lines += [
            f"  {t(s.at)}  {s.actuator}: {'ON ' if s.state else 'OFF'}  {s.reason}"
            for s in self.switches
        ]
        lines.append(
            f"Occupancy starts: {self.occupancies}; comfort misses: {len(self.comfort_misses)}"
        )
        for m in self.comfort_misses:
            temp = "no reading" if m.temperature is None else f"{m.temperature:.1f} °C"
            if m.predicted:
                temp += " (predicted)"
            lines.append(f"  {t(m.at)}  {m.label}: {temp} < {m.setpoint:.1f} °C")
        lines.append(
            f"Short cycles (< {DEFAULT_SHORT_CYCLE_S // 60} min on): {len(self.short_cycles)}"
        )
        lines += [
            f"  {s.actuator}: {t(s.on_at)} for {s.minutes:.0f} min" for s in self.short_cycles
        ]
        lines.append(
            f"Optimum start rate: {self.rate_start:.1f} → {self.rate_end:.1f} min/K"
            f" (learned from {self.learned_from})"
        )
        return "\n".join(lines)


def auto_step(start: datetime, end: datetime, feed_interval: int) -> int:
    span = (end - start).total_seconds()
    step = max(60, feed_interval)
    while span / step > MAX_STEPS:
        step *= 2
    return step


def history_end(start: datetime, end: datetime, now: datetime | None) -> datetime:
    """The end of the period replayed: history only. Past now there are no readings, so every
    future occupancy was counted as a comfort miss and the sensor as stale."""
    if end <= start:
        raise ValueError("The replay must end after it starts.")
    end = min(end, now or timezone.now())
    if end <= start:
        raise ValueError("The replay must start in the past: there is no history after now.")
    return end


def replay(
    zone: Zone,
    start: datetime,
    end: datetime,
    step_s: int | None = None,
    short_cycle_s: int = DEFAULT_SHORT_CYCLE_S,
    now: datetime | None = None,
) -> ReplayReport:
    end = history_end(start, end, now)
    tz = ZoneInfo(settings.TIME_ZONE)
    sensor = zone.temperature_sensor
    feed = sensor.feed if sensor is not None else None
    step = step_s or auto_step(start, end, feed.interval if feed else 60)
    if (end - start).total_seconds() / step > MAX_STEPS:
        raise ValueError(f"Too many steps: use a step of at least {auto_step(start, end, 60)} s.")
    readings = read_history(feed.pk if feed is not None else None, start, end, step)
    actuators = {a.pk: a for a in zone.actuators.filter(enabled=True)}
    site = mapper.site_settings()
    spec = history_zone_spec(zone, site, start, end, list(actuators), readings.window_s(step))
    sim = simulated_actuators(actuators.values(), start)
    stored_rate = spec.heating_rate_min_per_k
    report = ReplayReport(zone.name, start, end, step, rate_start=stored_rate)
    runs = measure_runs(
        heat_intervals(list(actuators), start, end),
        readings.times,
        readings.values,
        spec.comfort_setpoint,
    )
    report.heat_runs = len(runs)
    report.learned_from = (
        f"the room: {len(runs)} run(s) of heat applied in the relay log and the rise they made"
        if runs
        else "nothing: no heat applied in the history (relay log), the zone's stored rate is kept"
    )
    preheats: dict[float, dict] = {}

    memory: dict = {}
    last_reading: Reading | None = None
    on_since: dict[int, datetime] = {}
    moment = start
    while moment < end:
        t = int(moment.timestamp())
        report.samples += 1
        if runs:
            spec = replace(spec, heating_rate_min_per_k=rate_until(runs, t, stored_rate))
        found = readings.at(t)
        if found is None or t - found.t >= readings.window_s(step):
            report.missing_samples += 1  # no reading in the window up to this moment
        if found is not None:
            last_reading = found
        snap = Snapshot(
            now=moment,
            time_zone=site.time_zone,
            zones=(replace(spec, reading=last_reading),),
            actuators=sim,
            memory=memory,
        )
        result = evaluate(snap)
        memory = result.memory
        for event in result.events:
            if event.get("kind") == "occupancy_start":
                preheats[float(event["occupancy"])] = event
        for aid, decision in result.decisions.items():
            before = sim[aid]
            if decision.state != before.is_on:
                report.switches.append(Switch(moment, before.name, decision.state, decision.reason))
                if decision.state:
                    on_since[aid] = moment
                elif aid in on_since:
                    began = on_since.pop(aid)
                    if (moment - began).total_seconds() < short_cycle_s:
                        report.short_cycles.append(ShortCycle(before.name, began, moment))
                sim[aid] = switched(before, decision.state, t)
        if any(result.decisions[a].state for a in result.decisions) or (
            not sim and result.zones[zone.pk].demand
        ):
            report.heating_hours += step / 3600
        moment += timedelta(seconds=step)
    report.rate_end = rate_until(runs, end.timestamp(), stored_rate)
    _comfort(report, spec, start, end, tz, readings, preheats if runs else {})
    return report


def read_history(feed_id: int | None, start: datetime, end: datetime, step: int) -> Sampler:
    """A feed's recorded history in windows of `step` (nothing for no feed)."""
    points = (
        feed_service.read(
            feed_id,
            int(start.timestamp()),
            int(end.timestamp()),
            step,
            average=True,
            timezone=settings.TIME_ZONE,
        )
        if feed_id is not None
        else []
    )
    return Sampler(points)


def history_zone_spec(
    zone: Zone,
    site: mapper.SiteSettings,
    start: datetime,
    end: datetime,
    actuator_ids: list[int],
    window_s: int,
) -> ZoneSpec:
    """The zone as configured now, with its bookings and schedule exceptions over the period."""
    bookings = [
        mapper.booking_spec(b)
        for b in Booking.objects.filter(
            zone=zone, cancelled=False, end__gt=start, start__lt=end + timedelta(days=1)
        )
    ]
    exceptions = None
    if zone.schedule is not None:
        exceptions = ScheduleException.objects.filter(
            schedule=zone.schedule,
            date__gte=(start - timedelta(days=1)).date(),
            date__lte=(end + timedelta(days=1)).date(),
        )
    spec = mapper.zone_spec(
        zone,
        site,
        bookings=bookings,
        actuator_ids=actuator_ids,
        exceptions=exceptions,
        days=((start - timedelta(days=1)).date(), (end + timedelta(days=1)).date()),
    )
    # The feed is read in windows of `step` (or whole feed slots a little longer): a reading is
    # that old by construction, so it is stale only when a whole window had none. With a 900 s
    # limit, a year's 1,920 s step called a healthy sensor stale at every other window.
    return replace(spec, sensor_stale_after_s=max(spec.sensor_stale_after_s, window_s))


def simulated_actuators(actuators: Iterable[Actuator], start: datetime) -> dict[int, ActuatorSpec]:
    """Simulated relays: off, and long enough ago that no min on/off time holds the first step.
    Replay switches nothing: a simulated relay does what it is told (confirmed)."""
    state = ActuatorRuntime(on=False, changed_at=start.timestamp() - 86400, confirmed=True)
    return {a.pk: mapper.actuator_spec(a, state=state) for a in actuators}


def switched(before: ActuatorSpec, state: bool, t: float) -> ActuatorSpec:
    """A simulated relay after it switched to `state` at `t` (and read back at once)."""
    return replace(
        before,
        is_on=state,
        changed_at=float(t),
        last_off_at=float(t) if not state else before.last_off_at,
        last_on_at=float(t) if state else before.last_on_at,
        on_confirmed_at=float(t) if state else before.on_confirmed_at,
    )


class Sampler:
    """The latest reading at or before a moment, from the windows the feed returned (each
    stamped with its start, as feeds.store.service.read gives them), whatever their alignment."""

    def __init__(self, points: list[list]) -> None:
        self.times: list[float] = []
        self.values: list[float] = []
        self.spacing = 0
        stamps = [int(t_ms // 1000) for t_ms, _ in points]
        if len(stamps) > 1:
            self.spacing = stamps[1] - stamps[0]
        for t, (_, value) in zip(stamps, points, strict=True):
            if value is not None and not (isinstance(value, float) and math.isnan(value)):
                self.times.append(float(t))
                self.values.append(float(value))

    def window_s(self, step: int) -> int:
        return max(step, self.spacing)

    def at(self, t: float) -> Reading | None:
        i = bisect.bisect_right(self.times, t)
        return Reading(self.times[i - 1], self.values[i - 1]) if i else None

    def after(self, t: float, within_s: float) -> float | None:
        """The first reading from `t` on (within `within_s`): the temperature at a moment."""
        i = bisect.bisect_left(self.times, t)
        if i < len(self.times) and self.times[i] - t < within_s:
            return self.values[i]
        return None


def _comfort(
    report: ReplayReport,
    spec: ZoneSpec,
    start,
    end,
    tz,
    readings: Sampler,
    preheats: dict[float, dict],
) -> None:
    windows = booking_windows.windows(spec.bookings, start, end, tz, spec.comfort_setpoint)
    if spec.schedule is not None:
        windows += schedule_windows.windows(spec.schedule, start, end, tz, spec.comfort_setpoint)
    starts = {}
    for w in sorted(windows, key=lambda w: w.start):
        if start <= w.start < end:
            starts.setdefault(w.start, w)
    for at, window in sorted(starts.items()):
        report.occupancies += 1
        event = preheats.get(at.timestamp())
        if event is not None and event["occupancy"] > event["started"]:
            # The replay pre-heated: how warm its start would have made the room, at the rate
            # the room showed, not how warm the old controller's start made it.
            minutes = (event["occupancy"] - event["started"]) / 60
            temp = min(window.setpoint, event["temp"] + minutes / report.rate_end)
            if temp < window.setpoint - spec.hysteresis:
                report.comfort_misses.append(
                    ComfortMiss(at, window.label, window.setpoint, round(temp, 2), predicted=True)
                )
            continue
        # The window starting at (or first after) the occupancy start, else the one it is in.
        window_s = readings.window_s(report.step_s)
        temp = readings.after(at.timestamp(), window_s)
        if temp is None:
            held = readings.at(at.timestamp())
            temp = held.value if held is not None and at.timestamp() - held.t < window_s else None
        if temp is None or temp < window.setpoint - spec.hysteresis:
            report.comfort_misses.append(ComfortMiss(at, window.label, window.setpoint, temp))


def parse_day(text: str, tz: ZoneInfo, end_of_day: bool = False) -> datetime:
    """'2026-01-14' (local midnight; the end of that day with end_of_day) or an ISO datetime."""
    try:
        if len(text) == 10:
            day = datetime.strptime(text, "%Y-%m-%d").replace(tzinfo=tz)
            return (day + timedelta(days=1) if end_of_day else day).astimezone(UTC)
        moment = datetime.fromisoformat(text)
    except ValueError as exc:
        raise ValueError(f"'{text}' is not a date (YYYY-MM-DD) or an ISO date-time") from exc
    return (moment if moment.tzinfo else moment.replace(tzinfo=tz)).astimezone(UTC)
