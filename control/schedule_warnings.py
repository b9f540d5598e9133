"""Warnings (not refusals) for a weekly period whose start or end falls inside a spring-forward
gap of the site's time zone: on that day the time does not exist (Sun 01:30 in Europe/London on
the last Sunday of March). Saving is allowed — a period is weekly, so any 01:00–02:00 Sunday
period meets the gap once a year — but the engineer is told what happens on that day: the
period starts (or ends) when the clocks jump (control/engine/timefmt.py local_instant).
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from zoneinfo import ZoneInfo

from django.conf import settings
from django.utils import timezone

from control.engine.strategies.schedule import gap_days
from control.engine.timefmt import day_text, gap_start


def period_warnings(period, today: date | None = None) -> list[str]:
    """What a saved SchedulePeriod does on the next spring-forward day it meets, if anything."""
    if period.start is None or period.end is None or period.weekday is None:
        return []
    tz = ZoneInfo(settings.TIME_ZONE)
    today = today or timezone.localdate()
    found = []
    for what, at in (("starts", period.start), ("ends", period.end)):
        days = gap_days(period.weekday, at, tz, today, years=1)
        if not days:
            continue
        day = days[0]
        jump = gap_start(datetime.combine(day, at), tz).replace(tzinfo=tz).astimezone(UTC)
        found.append(
            f"{at:%H:%M} does not exist on {day_text(day)} (the clocks go forward): that day "
            f"the period {what} when they do, at {jump.astimezone(tz):%H:%M %Z}."
        )
    return found
