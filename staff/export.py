"""The feed explorer's export: a CSV a spreadsheet user expects (#28 item 5).

- Times in the site's zone (or `timezone=`), in the first column, named with the zone; the unix
  time stays beside it. Calendar intervals (daily, weekly, monthly) show the date only.
- The end is exclusive: `from=2026-10-01&to=2026-10-31` (dates in the site's zone, both days
  included, as the date pickers read) or `start`/`end` in unix seconds, `end` not included:
  31 days are 31 daily rows, not 32.
- A cumulative feed (a kWh meter register) at a daily, weekly or monthly interval is exported as
  the energy *used* in each window, as the chart draws its bars (feeds' `delta` read), not the
  register's average reading.
- The unit once per column, and the file named for its feeds and dates
  (`hall-temp_roof-power_2026-10-01_to_2026-10-31.csv`).

Parameters, limits and errors otherwise as /feed/data.json (feeds/web/query.py); at most
MAX_EXPORT_FEEDS feeds and BMS_FEED_MAX_POINTS rows per feed; a bad parameter is a 400 naming it.
"""

from __future__ import annotations

import dataclasses
import io
import re
import time
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from rest_framework.exceptions import NotFound, ValidationError

from core import csv_safe
from core.api_errors import error_response
from core.pages import staff_page
from feeds.models import Feed
from feeds.store import phpfina
from feeds.web import query

MAX_EXPORT_FEEDS = 20
# Longest span the date pickers may ask for: the feed store's own row bound refuses finer
# intervals long before this; it only keeps a typed year 9999 from reaching the arithmetic.
MAX_EXPORT_DAYS = 366 * 20
EXPORT_PARAMS = ("ids", "start", "end", "from", "to", "interval", "timezone")
RAW = "raw"  # interval=raw: each feed's stored values at its own interval, not averaged
# The explorer's export choices: (value, label); "" is the plotted interval.
EXPORT_INTERVALS = [
    ("", "as plotted"),
    (RAW, "raw values"),
    ("60", "1 min"),
    ("900", "15 min"),
    ("3600", "1 h"),
    ("daily", "daily"),
    ("weekly", "weekly"),
    ("monthly", "monthly"),
]
# Units of feeds that count up (meter registers): exported as use per window at calendar
# intervals, as the explorer draws them (staff/static/staff/feeds.js `bars`).
CUMULATIVE_UNITS = {"kwh"}
PER_WINDOW = {"daily": "per day", "weekly": "per week", "monthly": "per month"}
MAX_FILENAME_CHARS = 120


class _Echo:
    """csv.writer target that hands each row straight to the streaming response."""

    def write(self, value: str) -> str:
        return value


def _bad(field: str, message: str) -> ValidationError:
    return ValidationError({field: [message]})


ISO_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


def _parse_day(params: dict[str, str], field: str) -> date:
    """A date as the pickers send it (YYYY-MM-DD, ASCII digits only), or a 400 naming `field`."""
    raw = params.get(field, "")
    if not (ISO_DAY.fullmatch(raw) and raw.isascii()):
        raise _bad(field, f"{raw[:40]!r} is not a date (YYYY-MM-DD)")
    try:
        return date.fromisoformat(raw)
    except ValueError:
        raise _bad(field, f"{raw!r} is not a day of the calendar") from None


def _midnight(day: date, zone: ZoneInfo) -> int:
    return int(datetime(day.year, day.month, day.day, tzinfo=zone).timestamp())


def export_range(params: dict[str, str], zone: ZoneInfo) -> tuple[int, int]:
    """(start, end) in unix seconds, end exclusive: from the date pickers' `from`/`to` (both
    days included, midnights in `zone`, so a 23- or 25-hour day is whole) or from unix
    `start`/`end`. Defaults: the last day."""
    if params.get("from") or params.get("to"):
        first, last = _parse_day(params, "from"), _parse_day(params, "to")
        if last < first:
            raise _bad("to", "must not be before from")
        if (last - first).days >= MAX_EXPORT_DAYS:
            raise _bad("to", f"at most {MAX_EXPORT_DAYS} days per export")
        if first.year < 1971 or last.year > 2105:
            raise _bad("from" if first.year < 1971 else "to", "must be between 1971 and 2105")
        return _midnight(first, zone), _midnight(last + timedelta(days=1), zone)
    end = query.parse_time({"end": params.get("end") or str(int(time.time()))}, "end")
    start = query.parse_time({"start": params.get("start") or str(max(0, end - 86_400))}, "start")
    if end <= start:
        raise _bad("end", "must be after start")
    return start, end


def is_cumulative(feed: Feed) -> bool:
    return feed.unit.strip().lower() in CUMULATIVE_UNITS


def column_label(feed: Feed, interval: int | str | None, used: bool) -> str:
    """The feed, then its unit once: not "pv:PV energy kWh (kWh)" when the name says it."""
    label = str(feed)
    unit = feed.unit.strip()
    if used:
        return f"{label} ({unit} used {PER_WINDOW[str(interval)]})"
    if not unit or re.search(rf"(^|[\s_(\-]){re.escape(unit)}\)?$", label, re.IGNORECASE):
        return label
    return f"{label} ({unit})"


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "feed"


def file_name(feeds: list[Feed], start: int, end: int, zone: ZoneInfo, ext: str) -> str:
    """Named for its feeds and its dates (the last day included), e.g.
    `hall-temp_roof-power_2026-10-01_to_2026-10-31.csv`."""
    first = datetime.fromtimestamp(start, zone).date()
    last = datetime.fromtimestamp(end - 1, zone).date()
    dates = first.isoformat() if first == last else f"{first.isoformat()}_to_{last.isoformat()}"
    names = "_".join(_slug(str(f)) for f in feeds)
    if len(names) > MAX_FILENAME_CHARS - len(dates) - 10:
        names = names[: MAX_FILENAME_CHARS - len(dates) - 10].rstrip("-_") + f"_{len(feeds)}-feeds"
    return f"{names}_{dates}.{ext}"


def _query(params: dict[str, str], start: int, end: int) -> query.DataQuery:
    """The store's read query; its end inclusive, so the window starting at `end` is not read."""
    read = {**params, "start": str(start), "end": str(end - 1)}
    if params.get("interval") == RAW:
        # No interval: each feed's own (`run` in feeds/web/query.py), values as stored.
        return query.parse_data_query({**read, "interval": "", "average": "0"})
    if not params.get("interval"):
        read["interval"] = str(max(60, (end - start) // 1000))
    return query.parse_data_query({**read, "average": "1"})


@dataclasses.dataclass
class Export:
    ids: list[int]
    feeds: dict[int, Feed]
    series: list[list]
    labels: list[str]
    zone: ZoneInfo
    calendar: bool
    start: int
    end: int


def build(request: HttpRequest) -> Export:
    """Read the chosen feeds for the export; ValidationError / NotFound name what is wrong."""
    params = {k: v for k, v in request.GET.items() if k in EXPORT_PARAMS}
    ids = query.parse_ids(params)
    if len(ids) > MAX_EXPORT_FEEDS:
        raise _bad("ids", f"at most {MAX_EXPORT_FEEDS} feeds per export")
    zone = ZoneInfo(query.parse_timezone(params))
    start, end = export_range(params, zone)
    q = _query(params, start, end)
    feeds = query.readable_feeds(request.user, q.feed_ids)
    calendar = q.interval in phpfina.CALENDAR_INTERVALS
    used = {i for i in ids if calendar and is_cumulative(feeds[i])}
    series = query.run(q, {i: f for i, f in feeds.items() if i not in used})
    if used:
        # Use per window (the register's rise), as the chart's bars: not its average reading.
        delta = dataclasses.replace(q, average=False, delta=True)
        series.update(query.run(delta, {i: feeds[i] for i in used}))
    labels = [column_label(feeds[i], q.interval, i in used) for i in ids]
    return Export(ids, feeds, [series[i] for i in ids], labels, zone, calendar, start, end)


def rows(export: Export):
    """(time text, unix, values...) per time, in time order, none at or after the end."""
    by_time: dict[int, dict[int, float | None]] = {}
    for feed_id, points in zip(export.ids, export.series, strict=True):
        for t_ms, value in points:
            if t_ms // 1000 < export.end:
                by_time.setdefault(t_ms, {})[feed_id] = value
    shape = "%Y-%m-%d" if export.calendar else "%Y-%m-%d %H:%M:%S"
    for t_ms in sorted(by_time):
        values = by_time[t_ms]
        moment = datetime.fromtimestamp(t_ms / 1000, export.zone)
        yield moment.strftime(shape), t_ms // 1000, [values.get(i) for i in export.ids]


def _csv(export: Export) -> StreamingHttpResponse:
    writer = csv_safe.writer(_Echo())  # a feed named =HYPERLINK(...) stays text
    header = [f"time ({export.zone.key})", "unix", *export.labels]

    def lines():
        yield writer.writerow(header)
        for stamp, unix, values in rows(export):
            cells = ["" if v is None else f"{v:.6g}" for v in values]
            yield writer.writerow([stamp, unix, *cells])

    response = StreamingHttpResponse(lines(), content_type="text/csv; charset=utf-8")
    name = file_name(
        [export.feeds[i] for i in export.ids], export.start, export.end, export.zone, "csv"
    )
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


XLSX_TYPE = "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"


def _xlsx(export: Export) -> HttpResponse:
    """The same table as a workbook: times as real date-times (local, as the CSV), numbers as
    numbers. openpyxl's write-only mode keeps one row at a time; the rows are bounded as the
    CSV's (BMS_FEED_MAX_POINTS per feed)."""
    from openpyxl import Workbook
    from openpyxl.cell import WriteOnlyCell

    book = Workbook(write_only=True)
    sheet = book.create_sheet("Feeds")
    sheet.freeze_panes = "C2"

    def text(value: str) -> WriteOnlyCell:
        # Written as text whatever it starts with: openpyxl would store "=..." as a formula.
        c = WriteOnlyCell(sheet, value=str(value))
        c.data_type = "s"
        return c

    sheet.append([text(f"time ({export.zone.key})"), text("unix"), *map(text, export.labels)])
    shape = "yyyy-mm-dd" if export.calendar else "yyyy-mm-dd hh:mm:ss"
    for _stamp, unix, values in rows(export):
        when = WriteOnlyCell(
            sheet, value=datetime.fromtimestamp(unix, export.zone).replace(tzinfo=None)
        )
        when.number_format = shape
        sheet.append([when, unix, *values])
    body = io.BytesIO()
    book.save(body)
    response = HttpResponse(body.getvalue(), content_type=XLSX_TYPE)
    name = file_name(
        [export.feeds[i] for i in export.ids], export.start, export.end, export.zone, "xlsx"
    )
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


def _refusal(exc: ValidationError) -> HttpResponse:
    """The JSON every API error has (core/api_errors.py), naming the bad parameter."""
    detail = exc.detail if isinstance(exc.detail, dict) else {"ids": exc.detail}
    field = next(iter(detail))
    message = detail[field][0] if isinstance(detail[field], list) else detail[field]
    return error_response(f"'{field}': {message}", 400, field=field, fields=detail)


@staff_page
def feed_export_csv(request: HttpRequest) -> HttpResponse:
    """CSV of the chosen feeds: time, unix time, then one column per feed (module doc)."""
    return _export(request, _csv)


@staff_page
def feed_export_xlsx(request: HttpRequest) -> HttpResponse:
    """The same as an Excel workbook (.xlsx)."""
    return _export(request, _xlsx)


def _export(request: HttpRequest, write) -> HttpResponse:
    if not request.GET.get("ids"):
        return error_response("'ids' is required: feed ids separated by commas", 400, field="ids")
    try:
        export = build(request)
    except ValidationError as exc:
        return _refusal(exc)
    except NotFound as exc:
        return error_response(str(exc.detail), 404, field="ids")
    return write(export)
