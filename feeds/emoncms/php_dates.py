"""The part of PHP's date strings emoncms clients send as `start`/`end` (`-1 week`, `today`,
`01-12-2021`, `2021-12-01 10:30`), read as PHP's DateTime::modify reads them in a time zone:
absolute date and time first, then the relative amounts, all on the local wall clock (PHP's
`+3 hours` across a DST change is three hours of clock time), months overflowing as PHP's do
(31 March - 1 month is 2 March). Anything else is refused: the caller answers a 400.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

MAX_CHARS = 64
UNITS = {"sec": "s", "secs": "s", "second": "s", "seconds": "s", "min": "m", "mins": "m",
         "minute": "m", "minutes": "m", "hour": "h", "hours": "h", "day": "d", "days": "d",
         "week": "w", "weeks": "w", "fortnight": "f", "fortnights": "f", "month": "mo",
         "months": "mo", "year": "y", "years": "y"}  # fmt: skip
TOKEN = re.compile(
    r"\s*(?:"
    r"(?P<word>now|today|midnight|yesterday|tomorrow)"
    r"|(?P<ymd>\d{4})-(?P<ym>\d{1,2})-(?P<yd>\d{1,2})"
    r"|(?P<dmy>\d{1,2})-(?P<dm>\d{1,2})-(?P<dy>\d{4})"
    r"|(?P<n>[+-]?\d{1,6})\s*(?P<unit>[a-z]+)"
    r")(?:[ t](?P<hh>\d{1,2}):(?P<mm>\d{2})(?::(?P<ss>\d{2}))?)?"
)


class BadDate(ValueError):
    pass


def parse(text: str, timezone: str, now: float) -> int:
    """Unix seconds for `text` read from `now` in `timezone`; BadDate if not understood."""
    s = text.strip().lower()
    if not s or len(s) > MAX_CHARS:
        raise BadDate("empty or too long")
    tz = ZoneInfo(timezone)
    local = datetime.fromtimestamp(int(now), tz).replace(tzinfo=None)
    date_part, time_part = local.date(), local.time()
    rel = {"y": 0, "mo": 0, "d": 0, "h": 0, "m": 0, "s": 0}
    pos = 0
    while pos < len(s):
        m = TOKEN.match(s, pos)
        if not m or m.end() == pos:
            raise BadDate(f"not understood at {s[pos : pos + 20]!r}")
        pos = m.end()
        word = m["word"]
        try:
            if word in ("today", "midnight", "yesterday", "tomorrow"):
                time_part = time_part.replace(hour=0, minute=0, second=0)
                rel["d"] += {"yesterday": -1, "tomorrow": 1}.get(word, 0)
            elif m["ymd"]:
                date_part = date_part.replace(int(m["ymd"]), int(m["ym"]), int(m["yd"]))
            elif m["dmy"]:
                date_part = date_part.replace(int(m["dy"]), int(m["dm"]), int(m["dmy"]))
            elif m["n"]:
                unit = UNITS.get(m["unit"])
                if unit is None:
                    raise BadDate(f"unknown unit {m['unit']!r}")
                n = int(m["n"])
                if unit == "w":
                    unit, n = "d", 7 * n
                elif unit == "f":
                    unit, n = "d", 14 * n
                rel[unit] += n
            if m["hh"]:
                time_part = time_part.replace(
                    hour=int(m["hh"]), minute=int(m["mm"]), second=int(m["ss"] or 0)
                )
        except ValueError as exc:  # 2021-13-45, 25:00
            raise BadDate(str(exc)) from None
    months = date_part.year * 12 + date_part.month - 1 + rel["y"] * 12 + rel["mo"]
    year, month = divmod(months, 12)
    if not 1970 <= year <= 2106:
        raise BadDate("outside 1970-2106")
    # PHP lets the day overflow into the next month (31 Jan + 1 month = 3 March).
    first = datetime(year, month + 1, 1, time_part.hour, time_part.minute, time_part.second)
    try:
        wall = first + timedelta(days=date_part.day - 1 + rel["d"], hours=rel["h"],
                                 minutes=rel["m"], seconds=rel["s"])  # fmt: skip
    except OverflowError:  # "-999999 weeks": before year 1
        raise BadDate("outside 1970-2106") from None
    t = int(wall.replace(tzinfo=tz).timestamp())
    if not 0 <= t <= 0xFFFFFFFF:
        raise BadDate("outside 1970-2106")
    return t
