"""How every date and time is written for people across the site, one way, so
no page shows a raw timestamp or a second format to learn:

    day:   Mon 24 Nov 2026
    when:  Mon 24 Nov 2026 15:01        (seconds where they matter: 15:01:07)
    time:  15:01                        (only beside a day already shown, e.g. an end time)
    span:  Mon 24 Nov 2026 15:01–16:30  (the end's day is written when it is another day)
    age:   45 s, 12 min, 3 h 5 min, 4 days (as core/static/core/live.js keeps it up to date)

Weekday, day without a leading zero, month name, four-digit year: unambiguous in every locale
(24/11 and 11/24 are not), and the same in pages, alarm messages and control reasons. Form
inputs still carry ISO values (yyyy-mm-dd), the only ones a browser's date input accepts.
No Django here: templates use the `day` and `when` filters of core/templatetags/dates.py.
"""

from __future__ import annotations

from datetime import date, datetime, tzinfo

# The site's time zone when none is configured (CAT is in Wales): the default of bms/settings.py
# TIME_ZONE, of a new Site and of every function that takes a zone name. Written once, here.
DEFAULT_TIME_ZONE = "Europe/London"


def day_text(day: date) -> str:
    return f"{day:%a} {day.day} {day:%b %Y}"


def when_text(moment: datetime, tz: tzinfo | None = None, seconds: bool = False) -> str:
    """`moment` in `tz` (when given) as "Mon 24 Nov 2026 15:01"."""
    local = moment.astimezone(tz) if tz is not None else moment
    return f"{day_text(local)} {time_text(local, seconds=seconds)}"


def time_text(moment: datetime, tz: tzinfo | None = None, seconds: bool = False) -> str:
    local = moment.astimezone(tz) if tz is not None else moment
    return local.strftime("%H:%M:%S" if seconds else "%H:%M")


def span_text(start: datetime, end: datetime, tz: tzinfo | None = None) -> str:
    """A period: "Mon 24 Nov 2026 15:01–16:30", or with the end's day when it ends on another
    day ("Mon 24 Nov 2026 22:00–Tue 25 Nov 2026 01:00"), so an overnight booking is not read as
    ending before it starts."""
    first = start.astimezone(tz) if tz is not None else start
    last = end.astimezone(tz) if tz is not None else end
    tail = time_text(last) if first.date() == last.date() else when_text(last)
    return f"{when_text(first)}–{tail}"


def duration_text(seconds: float) -> str:
    """An age or a length, the way live.js's duration() writes it as the page ages, so the
    server's first rendering and the browser's updates read the same."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s} s"
    m = s // 60
    if m < 60:
        return f"{m} min"
    h = m // 60
    if h < 48:
        return f"{h} h" + (f" {m % 60} min" if m % 60 else "")
    return f"{h // 24} days"
