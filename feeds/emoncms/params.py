"""Parameters and output formats of emoncms's /feed/data.json family, as emoncms reads them
(Modules/feed/feed_controller.php and feed_model.php), with a bound on each.

The engine is feeds/emoncms/read.py; the views are in feeds/web/views.py. Where we are stricter
than emoncms (a 400 naming the parameter where emoncms would guess or answer `false`), docs/
FEEDS.md says so.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import datetime

import numpy as np
from django.conf import settings
from rest_framework.exceptions import ValidationError

from feeds.emoncms import php_dates
from feeds.emoncms import read as emoncms_read
from feeds.models import Feed
from feeds.store import phpfina, service
from feeds.web import query

TIMEFORMATS = ("unixms", "unix", "excel", "iso8601", "notime")
MAX_DP = 15  # a float64 holds about 15-17 significant digits: more places add nothing
CSV_PLACES = 2  # emoncms's csv_decimal_places default
# A number above this is milliseconds (emoncms: `$time / 1e9 > 100`).
MS_ABOVE = 100_000_000_000


def _bad(param: str, message: str) -> ValidationError:
    return ValidationError({param: [message]})


@dataclass(frozen=True)
class DataRequest:
    feed_ids: list[int]
    many: bool  # `ids=` given: answer [{feedid, data}, ...]
    base: emoncms_read.Request
    averages: list[bool]  # per feed, as emoncms's carry-over reads `average=1,0,...`
    deltas: list[bool]
    timeformat: str
    csv: bool
    dp: int  # -1: off


def now() -> float:
    return time.time()  # a function so tests can fix the clock


def parse_time(params: Mapping[str, str], param: str, timezone: str = "UTC") -> int:
    """Unix seconds or milliseconds, or a PHP date string as emoncms takes (`-1 week`, `today`,
    `2021-12-01 10:30`; feeds/emoncms/php_dates.py) read in `timezone`."""
    raw = params.get(param)
    if raw is None or raw.strip() == "":
        raise _bad(param, "required: unix time in seconds or milliseconds")
    try:
        value = float(raw)
    except ValueError:
        try:
            return php_dates.parse(raw, timezone, now())
        except php_dates.BadDate as exc:
            raise _bad(param, f"{raw[:40]!r} is neither a unix time nor a date emoncms takes "
                       f"(e.g. -1 week, today, 2021-12-01 10:30): {exc}") from None  # fmt: skip
    if not math.isfinite(value) or value < 0:
        raise _bad(param, f"{raw[:40]!r} is not a unix time")
    if value > MS_ABOVE:
        value *= 0.001
    if value > 0xFFFFFFFF:
        raise _bad(param, f"{raw[:40]!r} is beyond the year 2106")
    return int(value)


def parse_interval(params: Mapping[str, str], start: int, end: int) -> int | str:
    """`interval` (or its legacy alias `mode`, which wins as in emoncms): seconds, 0 or absent
    for about 800 points, `original` for the feed's own, or daily/weekly/monthly/annual."""
    param = "mode" if params.get("mode") else "interval"
    raw = (params.get(param) or "0").strip()
    if raw in emoncms_read.CALENDAR or raw == "original":
        return raw
    try:
        value = float(raw)
    except ValueError:
        names = ", ".join(emoncms_read.CALENDAR)
        raise _bad(param, f"{raw[:40]!r}: use seconds, original or one of {names}") from None
    if not math.isfinite(value) or value > query.MAX_INTERVAL_S:
        raise _bad(param, f"must be at most {query.MAX_INTERVAL_S} seconds")
    if value < 1:
        # emoncms answers "Invalid interval" when range / 800 rounds to 0 (under 400 s); its
        # engine would read every second, and so do we.
        value = max(1, emoncms_read.auto_interval(start, end))
    return int(value)


def parse_flags(params: Mapping[str, str], param: str) -> list[bool]:
    """`average=1,0,1`: one 0/1 per feed, as emoncms takes them; empty: none given."""
    raw = params.get(param)
    if raw is None:
        return []
    out = []
    for part in raw.split(",")[: query.MAX_IDS]:
        out.append(query.parse_bool({param: part}, param))
    return out


def parse_dp(params: Mapping[str, str]) -> int:
    raw = params.get("dp")
    if raw is None or raw.strip() == "":
        return -1
    try:
        value = int(raw)
    except ValueError:
        raise _bad("dp", f"{raw[:40]!r}: decimal places, -1 (off) to {MAX_DP}") from None
    if not -1 <= value <= MAX_DP:
        raise _bad("dp", f"must be -1 (off) to {MAX_DP}")
    return value


def parse_data_request(params: Mapping[str, str], *, csv: bool = False) -> DataRequest:
    if params.get("split") is not None:
        raise _bad("split", "time-of-use split is not supported here")
    many = bool(params.get("ids")) and not params.get("id")
    # A repeated id is read again at its position, with that position's flags, as emoncms
    # does (feed_controller.php: a result per index of `ids`).
    ids = query.parse_ids(params, keep_repeats=True) if many else [query.parse_id(params.get("id"))]
    timezone = query.parse_timezone(params)
    start = parse_time(params, "start", timezone)
    end = parse_time(params, "end", timezone)
    if end <= start:
        raise _bad("end", "must be after start")
    timeformat = params.get("timeformat") or "unixms"
    if timeformat not in TIMEFORMATS:
        raise _bad("timeformat", f"{timeformat[:40]!r}: use one of {', '.join(TIMEFORMATS)}")
    averages, deltas = parse_flags(params, "average"), parse_flags(params, "delta")
    per_average, per_delta, average = [], [], False
    for i in range(len(ids)):
        # emoncms: once a feed's average is 1 the later ones keep it; delta falls back to the
        # first value given.
        if i < len(averages) and averages[i]:
            average = True
        per_average.append(average)
        per_delta.append(deltas[i] if i < len(deltas) else (deltas[0] if deltas else False))
    base = emoncms_read.Request(
        start=start,
        end=end,
        interval=parse_interval(params, start, end),
        skipmissing=query.parse_bool(params, "skipmissing"),
        limitinterval=query.parse_bool(params, "limitinterval"),
        timezone=timezone,
    )
    return DataRequest(
        feed_ids=ids,
        many=many,
        base=base,
        averages=per_average,
        deltas=per_delta,
        timeformat=timeformat,
        csv=csv or query.parse_bool(params, "csv"),
        dp=parse_dp(params),
    )


def read_series(
    req: DataRequest,
    feeds: dict[int, Feed],
    *,
    csv_single: bool = False,
    total_points: int | None = None,
) -> list[tuple[int, tuple[np.ndarray, np.ndarray]]]:
    """(feed id, (times, values)) for each position of req.feed_ids, a repeated feed at each
    of its positions with that position's flags. A single-feed CSV is emoncms's engine
    streaming: no delta (its CSV path never reaches delta_mode_convert) and its own row bound.
    `total_points`: a bound on the points of all the feeds together (anonymous readers:
    feeds/web/query.py `points_budget`), each feed refused before it is read once the rest
    would not fit."""
    limit = settings.BMS_FEED_MAX_CSV_ROWS if req.csv else settings.BMS_FEED_MAX_POINTS
    if req.csv and len(req.feed_ids) > 1:
        limit = max(1, limit // len(req.feed_ids))  # the bound is on the whole file
    left = total_points
    out = []
    # Each feed's buffered points, fetched a group of feeds at a time as the loop reaches them.
    buffered = service.overlays(req.feed_ids)
    for i, (feed_id, overlay) in enumerate(zip(req.feed_ids, buffered, strict=True)):
        feed = feeds[feed_id]
        delta = req.deltas[i] and not csv_single
        one = replace(req.base, average=req.averages[i], delta=delta)
        feed_limit = limit if left is None else min(limit, left)
        # Under a total bound, every window computed is charged, kept or not: skipmissing is
        # applied here (as read() does, last) so that empty feeds cost their windows too.
        skip = one.skipmissing and left is not None
        if skip:
            one = replace(one, skipmissing=False)
        try:
            times, values = service.read_emoncms(
                feed_id, one, feed_interval=feed.interval, max_points=feed_limit, overlay=overlay
            )
        except phpfina.TooManyPoints as exc:
            if feed_limit < limit:
                raise _bad("interval", query.too_many_in_all(total_points, len(feeds))) from None
            what = "rows" if req.csv else "points"
            raise _bad("interval", f"{exc}: too many {what}, use a longer interval or a "
                       "shorter range") from None  # fmt: skip
        except phpfina.BadReadRequest as exc:
            raise _bad(exc.param, str(exc)) from None
        if left is not None:
            left -= len(times)
        if skip:
            keep = ~np.isnan(values)
            times, values = times[keep], values[keep]
        out.append((feed_id, (times, values)))
    return out


# --- output --------------------------------------------------------------------------------


def format_times(times: np.ndarray, timeformat: str, timezone: str) -> list:
    if timeformat == "unixms":
        return (times * 1000).tolist()
    if timeformat in ("unix", "notime"):
        return times.tolist()
    tz = phpfina._zone(timezone)
    if timeformat == "excel":
        return [datetime.fromtimestamp(t, tz).strftime("%d/%m/%Y %H:%M:%S") for t in times.tolist()]
    return [datetime.fromtimestamp(t, tz).isoformat() for t in times.tolist()]  # iso8601: PHP "c"


def json_values(values: np.ndarray, dp: int) -> list:
    if dp >= 0:
        return emoncms_read.round_values(values, dp)
    out = values.astype(object)
    out[np.isnan(values)] = None
    return out.tolist()


def json_points(series: tuple[np.ndarray, np.ndarray], req: DataRequest) -> list:
    times, values = series
    vals = json_values(values, req.dp)
    if req.timeformat == "notime":
        return vals
    return [list(p) for p in zip(format_times(times, req.timeformat, req.base.timezone), vals,
                                 strict=True)]  # fmt: skip


def csv_number(value: float) -> str:
    """PHP number_format($v, 2, '.', ''): half away from zero, no thousands separator, and
    never "-0.00" (PHP 8)."""
    if math.isnan(value):
        return "null"
    text = f"{emoncms_read.php_round(value, CSV_PLACES):.{CSV_PLACES}f}"
    return "0.00" if text == "-0.00" else text


def csv_single_rows(series, req: DataRequest) -> Iterator[str]:
    """emoncms's engine CSV (SharedHelper::csv_write): `time,value`; times are unix seconds
    unless excel or iso8601."""
    times, values = series
    fmt = req.timeformat if req.timeformat in ("excel", "iso8601") else "unix"
    chunk = 10_000
    for i in range(0, len(times), chunk):
        ts = format_times(times[i : i + chunk], fmt, req.base.timezone)
        yield "".join(f"{t},{csv_number(v)}\n"
                      for t, v in zip(ts, values[i : i + chunk].tolist(), strict=True))  # fmt: skip


def csv_multi_rows(all_series: list, req: DataRequest) -> Iterator[str]:
    """emoncms's csv_export_multi: the first feed's times (in the JSON time format), then one
    column per feed; a feed with fewer rows (skipmissing) gives null."""
    if not all_series:
        return
    times = all_series[0][0]
    fmt = req.timeformat
    chunk = 10_000
    for i in range(0, len(times), chunk):
        ts = format_times(times[i : i + chunk], fmt, req.base.timezone)
        rows = []
        for k, t in enumerate(ts, start=i):
            cells = ["" if fmt == "notime" else str(t)]
            for _t, v in all_series:
                if k < len(v):
                    cells.append(csv_number(_dp(float(v[k]), req.dp)))
                else:
                    cells.append("null")
            rows.append(",".join(cells) + "\n")
        yield "".join(rows)


def _dp(value: float, dp: int) -> float:
    if dp < 0 or math.isnan(value):
        return value
    return emoncms_read.php_round(value, dp)
