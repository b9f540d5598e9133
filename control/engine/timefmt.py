"""Wall-clock helpers shared by the engine (local time zone, DST-safe) and the way its reasons
write a day and a moment.

`day_text` / `when_text` write dates exactly as core/dates.py does for the rest of the site
("Mon 24 Nov 2026 15:01"). The engine may not import core (it imports nothing of
ours outside control.engine), so the two lines live here too; tests/control/test_engine_purity.py
holds them to core/dates.py's output so there is still one way to write a date.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta, tzinfo
from zoneinfo import ZoneInfo


def local_instant(day: date, at: time, tz: ZoneInfo) -> datetime:
    """The UTC instant of a local wall-clock time on `day`.

    On the spring-forward day a time inside the gap (01:00–02:00 in Europe/London) does not
    exist: it means the moment the clocks jump (02:00 BST), the first instant at or after it
    on the clock. A period starting at 01:30 heats from 02:00 BST; one ending inside the gap
    ends there. (Read with the offset before the change, 01:30–02:15 became 02:30–02:15 BST:
    an end before the start, and the period heated not at all.) On the autumn day a repeated
    time (01:30) means its first occurrence (BST), so a period starts once, not twice.
    """
    moment = datetime.combine(day, at, tzinfo=tz)
    if exists(moment):
        return moment.astimezone(UTC)
    return gap_start(datetime.combine(day, at), tz).replace(tzinfo=tz).astimezone(UTC)


def exists(moment: datetime) -> bool:
    """Whether an aware local wall-clock time happens (not inside a spring-forward gap)."""
    back = moment.astimezone(UTC).astimezone(moment.tzinfo)
    return back.replace(tzinfo=None) == moment.replace(tzinfo=None)


def gap_start(wall: datetime, tz: ZoneInfo) -> datetime:
    """The naive wall time the gap `wall` is in begins at (01:00 for 01:30 in London). Read
    with the offset before the change it is the instant of the jump. Gaps are whole minutes
    and at most a day (bounded walk)."""
    for _ in range(24 * 60):
        earlier = wall - timedelta(minutes=1)
        if exists(earlier.replace(tzinfo=tz)):
            return wall.replace(second=0, microsecond=0)
        wall = earlier
    return wall


def in_gap(day: date, at: time, tz: ZoneInfo) -> bool:
    return not exists(datetime.combine(day, at, tzinfo=tz))


def hhmm(moment: datetime, tz: ZoneInfo) -> str:
    return moment.astimezone(tz).strftime("%H:%M")


def minutes(seconds: float) -> str:
    return f"{round(seconds / 60)} min"


def day_text(day: date) -> str:
    return f"{day:%a} {day.day} {day:%b %Y}"


def when_text(moment: datetime, tz: tzinfo | None = None) -> str:
    """`moment` in `tz` (when given) as "Mon 24 Nov 2026 15:01"."""
    local = moment.astimezone(tz) if tz is not None else moment
    return f"{day_text(local)} {local:%H:%M}"
