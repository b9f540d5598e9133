"""Wall-clock helpers shared by the strategies (local time zone, DST-safe)."""

from __future__ import annotations

from datetime import UTC, date, datetime, time
from zoneinfo import ZoneInfo


def local_instant(day: date, at: time, tz: ZoneInfo) -> datetime:
    """The UTC instant of a local wall-clock time on `day`.

    On the spring-forward day a time inside the gap (01:30 in Europe/London) does not exist:
    fold=0 reads it with the offset before the change, so it lands one hour later on the clock
    (02:30 BST) — heating starts late rather than not at all. On the autumn day a repeated time
    (01:30) means its first occurrence (BST), so a period starts once, not twice.
    """
    return datetime.combine(day, at, tzinfo=tz).astimezone(UTC)


def hhmm(moment: datetime, tz: ZoneInfo) -> str:
    return moment.astimezone(tz).strftime("%H:%M")


def minutes(seconds: float) -> str:
    return f"{round(seconds / 60)} min"
