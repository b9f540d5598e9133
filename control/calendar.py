"""A week of a room's occupancy as the booking calendar draws it: bookings and schedule periods
per local day, and the hours to draw (06:00-22:00, widened to every hour that has a booking or
a schedule period, so a 05:00 class or a 23:00 event is never cut off).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from control.engine.strategies.schedule import crosses_midnight
from control.models import Booking, SchedulePeriod, Zone

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
        periods = SchedulePeriod.objects.filter(schedule_id=zone.schedule_id)
        for day in [monday - timedelta(days=1), *days]:
            for p in periods:
                if p.weekday != day.weekday():
                    continue
                s = _local(day, p.start, tz)
                e = _local(day + timedelta(days=crosses_midnight(p)), p.end, tz)
                title = (
                    f"{zone.schedule.name} ({p.setpoint:g} °C)"
                    if p.setpoint
                    else zone.schedule.name
                )
                for shown in (day, day + timedelta(days=1)):
                    if shown in blocks and s.date() <= shown <= e.date():
                        if e.date() == shown and _minutes(e, shown) == 0:
                            continue
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
