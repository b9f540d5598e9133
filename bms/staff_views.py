"""Staff pages that span apps: the feed explorer, CSV export and the alarm list.

bms/ wires the apps together, so these views may use feeds, sensors and control alike.
"""

from __future__ import annotations

import csv
import time

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from bms.api_errors import error_response
from bms.permissions import has_staff_role, is_engineer
from feeds import service
from feeds.models import Feed
from sensors.alarms import acknowledge
from sensors.models import Alarm

MAX_EXPORT_FEEDS = 20


def staff_required(view):
    """Logged in and in a role group (or superuser); others go to the login page."""

    @login_required
    def wrapper(request: HttpRequest, *args, **kwargs):
        if not has_staff_role(request.user):
            return render(request, "bms/forbidden.html", status=403)
        return view(request, *args, **kwargs)

    wrapper.__name__ = view.__name__
    wrapper.__doc__ = view.__doc__
    return wrapper


@staff_required
def feed_explorer(request: HttpRequest) -> HttpResponse:
    feeds = Feed.objects.order_by("tag", "name")
    return render(request, "bms/feeds.html", {"nav": "feeds", "feeds": feeds})


class _Echo:
    """csv.writer target that hands each row straight to the streaming response."""

    def write(self, value: str) -> str:
        return value


def _int_param(request: HttpRequest, name: str, default: int | None = None) -> int:
    raw = request.GET.get(name)
    if raw is None or raw == "":
        if default is None:
            raise ValueError(f"'{name}' is required")
        return default
    try:
        return int(float(raw))
    except ValueError as exc:
        raise ValueError(f"'{name}' must be a number, got {raw!r}") from exc


@staff_required
def feed_export_csv(request: HttpRequest) -> HttpResponse:
    """CSV of averaged data for the chosen feeds: time, then one column per feed."""
    try:
        ids = [int(x) for x in request.GET.get("ids", "").split(",") if x.strip()]
    except ValueError:
        return error_response("'ids' must be a comma-separated list of feed ids", 400)
    if not ids:
        return error_response("'ids' is required", 400)
    if len(ids) > MAX_EXPORT_FEEDS:
        return error_response(f"'ids': at most {MAX_EXPORT_FEEDS} feeds per export", 400)
    feeds = {f.pk: f for f in Feed.objects.filter(pk__in=ids)}
    missing = [i for i in ids if i not in feeds]
    if missing:
        return error_response(f"'ids': no feed with id {missing[0]}", 404)
    now = int(time.time())
    try:
        end = _int_param(request, "end", now)
        start = _int_param(request, "start", end - 86400)
        interval = _int_param(request, "interval", max(60, (end - start) // 1000))
    except ValueError as exc:
        return error_response(str(exc), 400)
    if end <= start or interval <= 0:
        return error_response("'end' must be after 'start' and 'interval' positive", 400)
    try:
        series = [service.read(i, start, end, interval, average=True) for i in ids]
    except Exception as exc:  # the feed store's own errors name the problem (too many points...)
        if exc.__class__.__module__.startswith("feeds"):
            return error_response(str(exc), 400)
        raise
    return _csv_response(ids, feeds, series)


def _csv_response(
    ids: list[int], feeds: dict[int, Feed], series: list[list]
) -> StreamingHttpResponse:
    by_time: dict[int, dict[int, float | None]] = {}
    for feed_id, points in zip(ids, series, strict=True):
        for t_ms, value in points:
            by_time.setdefault(t_ms, {})[feed_id] = value
    writer = csv.writer(_Echo())
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


@staff_required
def alarm_list(request: HttpRequest) -> HttpResponse:
    open_alarms = Alarm.objects.filter(cleared_at__isnull=True).select_related("acknowledged_by")
    recent = Alarm.objects.filter(cleared_at__isnull=False).order_by("-cleared_at")[:50]
    return render(
        request,
        "bms/alarms.html",
        {
            "nav": "alarms",
            "open_alarms": open_alarms,
            "recent": recent,
            "can_ack": is_engineer(request.user),
        },
    )


@require_POST
@staff_required
def alarm_acknowledge(request: HttpRequest, pk: int) -> HttpResponse:
    if not is_engineer(request.user):
        return render(request, "bms/forbidden.html", status=403)
    alarm = get_object_or_404(Alarm, pk=pk)
    acknowledge(alarm, request.user)
    messages.info(request, f"Acknowledged: {alarm.message}")
    return redirect(_safe_next(request) or "staff-alarms")


def _safe_next(request: HttpRequest) -> str | None:
    """`next` only if it stays on this site: never an open redirect to another host."""
    target = request.POST.get("next")
    if target and url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return target
    return None


@staff_required
def overview(request: HttpRequest) -> HttpResponse:
    """The site at a glance: nodes, zones, actuators and open alarms."""
    from bms.overview import site_overview

    context = site_overview()
    context.update(nav="overview", can_ack=is_engineer(request.user))
    return render(request, "bms/overview.html", context)
