"""Weekly time schedule with exception days (holidays and special occupied days)."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from control.engine.specs import SCHEDULE, ExceptionSpec, ScheduleSpec, Window
from control.engine.timefmt import day_text, in_gap, local_instant

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
        start, end = _span(day, exception, tz)
        return [
            Window(
                start,
                end,
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
        start, end = _span(day, period, tz)
        result.append(
            Window(
                start,
                end,
                period.setpoint if period.setpoint is not None else comfort,
                label,
                SCHEDULE,
            )
        )
    return result


def _span(day: date, period, tz: ZoneInfo) -> tuple[datetime, datetime]:
    """A period's instants on `day`. One wholly inside a spring-forward gap (01:15–01:45 in
    London) would start and end at the jump: it runs its wall-clock length from the jump
    instead (02:00–02:30 BST), so it heats on the change day too."""
    start = local_instant(day, period.start, tz)
    end = local_instant(day + timedelta(days=crosses_midnight(period)), period.end, tz)
    if end <= start:
        end = start + timedelta(minutes=wall_minutes(period))
    return start, end


def wall_minutes(period) -> int:
    """The period's length on the clock face (a night period wraps midnight)."""
    length = (period.end.hour * 60 + period.end.minute) - (
        period.start.hour * 60 + period.start.minute
    )
    return length if length > 0 else length + 1440


def crosses_midnight(period) -> bool:
    """A period (or special day) ending at or before its start ends the next day: 22:00–06:00
    is a night. It belongs to the day it starts: an exception day replaces the periods that
    start on it, not the night that ends on it."""
    return period.end <= period.start


def holiday(schedule: ScheduleSpec, day: date) -> ExceptionSpec | None:
    """The holiday (unoccupied exception day) of `schedule` on `day`, if any."""
    return next((e for e in schedule.exceptions if e.day == day and not e.occupied), None)


def gap_days(weekday: int, at: time, tz: ZoneInfo, today: date, years: int = 2) -> list[date]:
    """The days in the next `years` on which a weekly time (weekday, at) falls inside a
    spring-forward gap of `tz`: the day a saved period will start at the jump instead."""
    found = []
    day = today + timedelta(days=(weekday - today.weekday()) % 7)
    end = today + timedelta(days=366 * years)
    while day <= end:
        if in_gap(day, at, tz):
            found.append(day)
        day += timedelta(days=7)
    return found
