"""Weekly time schedule with exception days (holidays and special occupied days)."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from control.engine.specs import SCHEDULE, ExceptionSpec, ScheduleSpec, Window
from control.engine.timefmt import day_text, local_instant

WEEKDAY_NAMES = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


def windows(
    schedule: ScheduleSpec, start: datetime, end: datetime, tz: ZoneInfo, comfort: float
) -> list[Window]:
    """Occupancy windows of `schedule` overlapping [start, end), in time order.

    An exception day replaces that day's weekly periods: unoccupied (a holiday) or occupied
    from its own start to end.
    """
    exceptions = {e.day: e for e in schedule.exceptions}
    first = start.astimezone(tz).date() - timedelta(days=1)
    last = end.astimezone(tz).date()
    found: list[Window] = []
    day = first
    while day <= last:
        found.extend(_day_windows(schedule, exceptions, day, tz, comfort))
        day += timedelta(days=1)
    return sorted(
        (w for w in found if w.end > start and w.start < end and w.end > w.start),
        key=lambda w: w.start,
    )


def _day_windows(schedule, exceptions, day: date, tz: ZoneInfo, comfort: float) -> list[Window]:
    exception = exceptions.get(day)
    if exception is not None:
        if not exception.occupied or exception.start is None or exception.end is None:
            return []
        label = (
            f"Schedule '{schedule.name}' {exception.description or 'special day'} {day_text(day)}"
        )
        return [
            Window(
                local_instant(day, exception.start, tz),
                local_instant(day + timedelta(days=crosses_midnight(exception)), exception.end, tz),
                comfort,
                label,
                SCHEDULE,
            )
        ]
    result = []
    for period in schedule.periods:
        if period.weekday != day.weekday():
            continue
        label = f"Schedule '{schedule.name}' {WEEKDAY_NAMES[period.weekday]}"
        result.append(
            Window(
                local_instant(day, period.start, tz),
                local_instant(day + timedelta(days=crosses_midnight(period)), period.end, tz),
                period.setpoint if period.setpoint is not None else comfort,
                label,
                SCHEDULE,
            )
        )
    return result


def crosses_midnight(period) -> bool:
    """A period (or special day) ending at or before its start ends the next day: 22:00–06:00
    is a night. It belongs to the day it starts: an exception day replaces the periods that
    start on it, not the night that ends on it."""
    return period.end <= period.start


def holiday(schedule: ScheduleSpec, day: date) -> ExceptionSpec | None:
    """The holiday (unoccupied exception day) of `schedule` on `day`, if any."""
    return next((e for e in schedule.exceptions if e.day == day and not e.occupied), None)
