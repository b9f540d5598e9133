"""A week of a room's occupancy as the booking calendar draws it: bookings and the schedule's
occupancy per local day (as the control strategy will heat: closures and special days of the
schedule and its site calendars replace the weekly periods), and the hours to draw
(06:00-22:00, widened to every hour that has a booking or a schedule period, so a 05:00 class
or a 23:00 event is never cut off).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from control.engine.specs import ExceptionSpec, ScheduleSpec
from control.engine.strategies.schedule import windows
from control.mapper import schedule_spec
from control.models import Booking, Zone

DEFAULT_HOURS = (6, 23)  # rows 06:00 to 22:00 (the last ends at 23:00), even on an empty week


@dataclass
class Block:
    """One coloured block on a day: a booking or a schedule period (minutes after midnight)."""

    kind: str  # "booking" or "schedule"
    title: str
    start_min: int
    end_min: int
    start: datetime
    end: datetime
    booking: Booking | None = None
    zone: Zone | None = None


def _minutes(moment: datetime, day: date) -> int:
    if moment.date() < day:
        return 0
    if moment.date() > day:
        return 24 * 60
    return moment.hour * 60 + moment.minute


def _local(day: date, at: time, tz: ZoneInfo) -> datetime:
    return datetime.combine(day, at, tzinfo=tz)


def week_blocks(zone: Zone, monday: date, tz: ZoneInfo) -> dict[date, list[Block]]:
    """The week's blocks per day: bookings (with cancelled ones) and the zone's schedule periods;
    a booking or night period crossing midnight shows on both days."""
    days = [monday + timedelta(days=i) for i in range(7)]
    blocks: dict[date, list[Block]] = {day: [] for day in days}
    start = _local(monday, time.min, tz)
    end = start + timedelta(days=7)
    for b in zone.bookings.filter(start__lt=end, end__gt=start).order_by("start"):
        s, e = b.start.astimezone(tz), b.end.astimezone(tz)
        for day in days:
            if s.date() <= day <= e.date() and not (e.date() == day and _minutes(e, day) == 0):
                blocks[day].append(
                    Block("booking", b.title, _minutes(s, day), _minutes(e, day), s, e, b, zone)
                )
    if zone.schedule_id:
        # What the control strategy will do: the same windows the evaluator heats to, from the
        # same spec (the schedule's own exception days and its site calendars' closures and
        # special days included), so a closed day shows closed here too.
        spec = _schedule_spec(zone, monday)
        special = {e.day: e for e in spec.exceptions if e.occupied}
        for w in windows(spec, start, end, tz, zone.comfort_setpoint):
            s, e = w.start.astimezone(tz), w.end.astimezone(tz)
            title = f"{zone.schedule.name} ({w.setpoint:g} °C)"
            if s.date() in special:
                title = f"{zone.schedule.name}: {special[s.date()].description or 'special day'}"
                title += f" ({w.setpoint:g} °C)"
            for shown in days:
                if s.date() <= shown <= e.date() and not (
                    e.date() == shown and _minutes(e, shown) == 0
                ):
                    blocks[shown].append(
                        Block("schedule", title, _minutes(s, shown), _minutes(e, shown), s, e,
                              zone=zone)
                    )  # fmt: skip
    for items in blocks.values():
        items.sort(key=lambda block: (block.start_min, block.kind))
    return blocks


def hours_to_draw(blocks: dict[date, list[Block]]) -> range:
    """The hour rows to draw: 06:00-22:00, widened to every hour a block touches."""
    first, last = DEFAULT_HOURS
    for items in blocks.values():
        for block in items:
            first = min(first, block.start_min // 60)
            last = max(last, math.ceil(block.end_min / 60))
    return range(first, min(last, 24))  # row h covers h:00 to h+1:00


def place(blocks: dict[date, list[Block]], hours: range) -> dict[date, list[dict]]:
    """Each block with its top and height in % of the drawn hours."""
    first_min, span = hours.start * 60, len(hours) * 60
    placed: dict[date, list[dict]] = {}
    for day, items in blocks.items():
        placed[day] = []
        for block in items:
            top = max(block.start_min, first_min)
            bottom = max(min(block.end_min, first_min + span), top + 15)
            placed[day].append(
                {
                    "block": block,
                    "booking": block.booking,
                    "start": block.start,
                    "end": block.end,
                    "top": (top - first_min) * 100 / span,
                    "height": (bottom - top) * 100 / span,
                }
            )
    return placed


def _schedule_spec(zone: Zone, monday: date) -> ScheduleSpec:
    # The night before Monday may reach into it; the days after Sunday are not drawn.
    return schedule_spec(
        zone.schedule, days=(monday - timedelta(days=1), monday + timedelta(days=7))
    )


def day_exceptions(zone: Zone, monday: date) -> dict[date, ExceptionSpec]:
    """The closures and special days of the week that replace the zone's weekly periods, from
    its schedule's own exception days and its site calendars (the spec the strategy uses)."""
    if not zone.schedule_id:
        return {}
    week = {monday + timedelta(days=i) for i in range(7)}
    return {e.day: e for e in _schedule_spec(zone, monday).exceptions if e.day in week}


def coming_days(zone: Zone, today: date, tz: ZoneInfo, count: int = 7) -> list[dict]:
    """What the schedule will do on each of the next `count` days from today, for the plant
    status page: the occupied times and setpoints, or the closure or special day that replaces
    them, from the same spec and windows the strategy uses. [] without a schedule."""
    if not zone.schedule_id:
        return []
    last = today + timedelta(days=count - 1)
    spec = schedule_spec(zone.schedule, days=(today - timedelta(days=1), last))
    exceptions = {e.day: e for e in spec.exceptions}
    start = _local(today, time.min, tz)
    found = windows(spec, start, _local(last + timedelta(days=1), time.min, tz), tz,
                    zone.comfort_setpoint)  # fmt: skip
    rows = []
    for i in range(count):
        day = today + timedelta(days=i)
        times = [
            f"{w.start.astimezone(tz):%H:%M}–{w.end.astimezone(tz):%H:%M} {w.setpoint:g} °C"
            for w in found
            if w.start.astimezone(tz).date() == day
        ]
        exception = exceptions.get(day)
        if exception is not None and not exception.occupied:
            text = f"closed ({exception.description or 'holiday'})"
        elif exception is not None:
            text = f"{exception.description or 'special day'}: {', '.join(times)}"
        else:
            text = ", ".join(times) or "not occupied"
        rows.append(
            {"day": day, "text": text, "closed": exception is not None and not exception.occupied}
        )
    return rows
