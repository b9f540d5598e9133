"""Staff pages that span apps: the feed explorer, CSV export and the alarm list.

Above every other app but bms, so these views may use feeds, sensors and control alike.
"""

from __future__ import annotations

import time

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST
from rest_framework.exceptions import NotFound, ValidationError

from alarms.lifecycle import acknowledge, acknowledge_all
from alarms.models import Alarm
from core import csv_safe
from core.api_errors import error_response
from core.live import live_every_s, live_json, wants_live
from core.pages import staff_page
from core.permissions import is_engineer
from feeds.models import Feed
from feeds.web import query
from sensors.ingest.history_budget import usage
from sensors.models import Site

MAX_EXPORT_FEEDS = 20
MAX_BUDGET_SITES = 50  # sites listed with their history budget (one Redis read each)
EXPORT_PARAMS = ("ids", "start", "end", "interval", "timezone")
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


@staff_page
def feed_explorer(request: HttpRequest) -> HttpResponse:
    """The chart page; feeds listed by tag (the node they came from). The view itself (feeds,
    range, interval) lives in the URL's hash, so a link restores it (staff/static/staff/feeds.js)."""
    feeds = Feed.objects.order_by("tag", "name")
    context = {
        "nav": "feeds",
        "feeds": feeds,
        # What history has cost each site of its budget: engineers raise it before importing
        # months of history (sensors/ingest/history_budget.py, docs/INGEST.md).
        "history_budgets": [
            usage(site) | {"pk": site.pk, "name": site.name}
            for site in Site.objects.order_by("name")[:MAX_BUDGET_SITES]
        ],
        "may_raise_budget": is_engineer(request.user),
        # Labels and ticks in the site's zone, not the browser's: "15:01" on the overview is
        # 15:01 here too when the person's laptop is set to New York.
        "time_zone": settings.TIME_ZONE,
        "max_points": settings.BMS_FEED_MAX_POINTS,
        "export_intervals": EXPORT_INTERVALS,
    }
    return render(request, "staff/feeds.html", context)


class _Echo:
    """csv.writer target that hands each row straight to the streaming response."""

    def write(self, value: str) -> str:
        return value


def _export_params(request: HttpRequest) -> dict[str, str]:
    """The export's parameters with its defaults filled in (the last day, ~1000 rows)."""
    params = {k: v for k, v in request.GET.items() if k in EXPORT_PARAMS}
    now = int(time.time())
    params.setdefault("end", str(now))
    params.setdefault("start", "")  # below: a day before `end`, once `end` is known good
    return params


def _validation_response(exc: ValidationError, status: int = 400) -> JsonResponse:
    """The JSON every API error has (core/api_errors.py), naming the bad parameter."""
    detail = exc.detail if isinstance(exc.detail, dict) else {"ids": exc.detail}
    field = next(iter(detail))
    message = detail[field][0] if isinstance(detail[field], list) else detail[field]
    return error_response(f"'{field}': {message}", status, field=field, fields=detail)


@staff_page
def feed_export_csv(request: HttpRequest) -> HttpResponse:
    """CSV of the chosen feeds: time, then one column per feed.

    Parameters, limits and errors are those of /feed/data.json (feeds/web/query.py): ids, start,
    end, interval (seconds or daily/weekly/monthly: averages over each window; `raw`: each
    feed's stored values at its own interval), timezone; at most MAX_EXPORT_FEEDS feeds and
    BMS_FEED_MAX_POINTS rows per feed. Defaults: the last day, about 1000 rows.
    """
    params = _export_params(request)
    if not params.get("ids"):
        return error_response("'ids' is required: feed ids separated by commas", 400, field="ids")
    try:
        ids = query.parse_ids(params)
        if len(ids) > MAX_EXPORT_FEEDS:
            raise ValidationError({"ids": [f"at most {MAX_EXPORT_FEEDS} feeds per export"]})
        end = query.parse_time(params, "end")
        if not params["start"]:
            params["start"] = str(max(0, end - 86_400))
        start = query.parse_time(params, "start")
        if end <= start:
            raise ValidationError({"end": ["must be after start"]})
        if params.get("interval") == RAW:
            # No interval: each feed's own (`run` in feeds/web/query.py), values as stored.
            q = query.parse_data_query({**params, "interval": "", "average": "0"})
        else:
            if not params.get("interval"):
                params["interval"] = str(max(60, (end - start) // 1000))
            q = query.parse_data_query({**params, "average": "1"})
        feeds = query.readable_feeds(request.user, q.feed_ids)
        series = query.run(q, feeds)
    except ValidationError as exc:
        return _validation_response(exc)
    except NotFound as exc:
        return error_response(str(exc.detail), 404, field="ids")
    return _csv_response(ids, feeds, [series[i] for i in ids])


def _csv_response(
    ids: list[int], feeds: dict[int, Feed], series: list[list]
) -> StreamingHttpResponse:
    by_time: dict[int, dict[int, float | None]] = {}
    for feed_id, points in zip(ids, series, strict=True):
        for t_ms, value in points:
            by_time.setdefault(t_ms, {})[feed_id] = value
    writer = csv_safe.writer(_Echo())  # a feed named =HYPERLINK(...) stays text
    header = ["time_utc", "unix"] + [
        f"{feeds[i]} ({feeds[i].unit})" if feeds[i].unit else str(feeds[i]) for i in ids
    ]

    def rows():
        yield writer.writerow(header)
        for t_ms in sorted(by_time):
            values = by_time[t_ms]
            stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t_ms / 1000))
            cells = ["" if values.get(i) is None else f"{values[i]:.6g}" for i in ids]
            yield writer.writerow([stamp, t_ms // 1000, *cells])

    response = StreamingHttpResponse(rows(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="feeds.csv"'
    return response


ALARMS_PER_PAGE = 100


@staff_page
def alarm_list(request: HttpRequest) -> HttpResponse:
    """Open alarms, most urgent first, ALARMS_PER_PAGE a page (`?page=N`), with the counts of
    all of them; then the 50 most recently cleared."""
    from staff.overview import open_alarm_summary

    raw = request.GET.get("page", "1")
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 9 or int(raw) < 1:
        return error_response("'page' must be a page number from 1", 400, field="page")
    page = int(raw)
    context = open_alarm_summary(ALARMS_PER_PAGE, (page - 1) * ALARMS_PER_PAGE)
    pages = max(1, -(-context["open_total"] // ALARMS_PER_PAGE))
    recent = Alarm.objects.filter(cleared_at__isnull=False).order_by("-cleared_at")[:50]
    context.update(
        nav="alarms",
        recent=recent,
        can_ack=is_engineer(request.user),
        page=page,
        pages=pages,
        previous_page=page - 1 if page > 1 else None,
        next_page=page + 1 if page < pages else None,
        # "Acknowledge all (N)": every open unacknowledged alarm up to the newest one when the
        # page was drawn, on every page (not one raised since).
        newest_shown=context["newest_unacknowledged"],
    )
    return render(request, "staff/alarms.html", context)


@require_POST
@staff_page
def alarm_acknowledge(request: HttpRequest, pk: int) -> HttpResponse:
    if not is_engineer(request.user):
        raise PermissionDenied("Only engineers may acknowledge alarms.")
    alarm = get_object_or_404(Alarm, pk=pk)
    acknowledge(alarm, request.user)
    messages.info(request, f"Acknowledged: {alarm.message}")
    return redirect(_safe_next(request) or "staff-alarms")


@require_POST
@staff_page
def alarm_acknowledge_all(request: HttpRequest) -> HttpResponse:
    """Acknowledge every open alarm the page showed (up to the newest id it listed)."""
    if not is_engineer(request.user):
        raise PermissionDenied("Only engineers may acknowledge alarms.")
    raw = request.POST.get("up_to", "")
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 18:
        return error_response("'up_to' must be the id of the newest alarm shown", 400)
    count = acknowledge_all(request.user, int(raw))
    messages.info(request, f"Acknowledged {count} alarm{'s' if count != 1 else ''}.")
    return redirect("staff-alarms")


def _safe_next(request: HttpRequest) -> str | None:
    """`next` only if it stays on this site: never an open redirect to another host."""
    target = request.POST.get("next")
    if target and url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return target
    return None


@staff_page
def overview(request: HttpRequest) -> HttpResponse:
    """The site at a glance: nodes, zones, actuators and open alarms."""
    from staff.overview import site_overview

    context = site_overview()
    context.update(nav="overview", can_ack=is_engineer(request.user), live_every=live_every_s())
    if wants_live(request):
        return live_json(request, "staff/_overview_live.html", context)
    return render(request, "staff/overview.html", context)
