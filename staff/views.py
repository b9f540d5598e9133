"""Staff pages that span apps: the feed explorer and the alarm list (the export: staff/export.py).

Above every other app but bms, so these views may use feeds, sensors and control alike.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from alarms.lifecycle import acknowledge, acknowledge_all
from alarms.models import Alarm
from core.api_errors import error_response
from core.live import live_every_s, live_json, wants_live
from core.pages import staff_page
from core.permissions import is_engineer
from feeds.models import Feed
from sensors.ingest.history_budget import usage
from sensors.models import Site
from staff.export import EXPORT_INTERVALS

MAX_BUDGET_SITES = 50  # sites listed with their history budget (one Redis read each)


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
        # The date pickers start at the last 7 whole days, in the site's zone.
        "export_to": timezone.localdate() - timedelta(days=1),
        "export_from": timezone.localdate() - timedelta(days=7),
    }
    return render(request, "staff/feeds.html", context)


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
