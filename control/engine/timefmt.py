"""Wall-clock helpers shared by the engine (local time zone, DST-safe) and the way its reasons
write a day and a moment.

`day_text` / `when_text` write dates exactly as core/dates.py does for the rest of the site
("Mon 24 Nov 2026 15:01"). The engine may not import core (it imports nothing of
ours outside control.engine), so the two lines live here too; tests/control/test_engine_purity.py
holds them to core/dates.py's output so there is still one way to write a date.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, tzinfo
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


def day_text(day: date) -> str:
    return f"{day:%a} {day.day} {day:%b %Y}"


def when_text(moment: datetime, tz: tzinfo | None = None) -> str:
    """`moment` in `tz` (when given) as "Mon 24 Nov 2026 15:01"."""
    local = moment.astimezone(tz) if tz is not None else moment
    return f"{day_text(local)} {local:%H:%M}"
