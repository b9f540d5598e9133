"""The findings page: what is wasting energy this week, most costly first (docs/FINDINGS.md).

Everyone on the staff reads it; engineers mark a finding acknowledged, fixed or a false alarm
(who and when are kept, findings.models.Finding.mark).
"""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from core.api_errors import error_response
from core.pages import staff_page
from core.permissions import is_engineer
from findings import evidence
from findings.models import Finding
from findings.rules import RULES

FINDINGS_PER_PAGE = 200  # open findings shown; a site with more has bigger problems than paging
CLOSED_SHOWN = 50
MARKS = {Finding.State.ACKNOWLEDGED, Finding.State.FIXED, Finding.State.FALSE_ALARM}


def _ranked(queryset):
    """Most costly first (the model's order): money, then kWh (a site without a tariff)."""
    return queryset.select_related("state_by")


@staff_page
def finding_list(request: HttpRequest) -> HttpResponse:
    open_findings = _ranked(Finding.objects.filter(closed_at__isnull=True))
    closed = Finding.objects.filter(closed_at__isnull=False).order_by("-closed_at")
    rows = list(open_findings[:FINDINGS_PER_PAGE])
    for f in rows:
        f.title = RULES[f.rule].title if f.rule in RULES else f.rule
    context = {
        "nav": "findings",
        "time_zone": settings.TIME_ZONE,
        "findings": rows,
        "open_total": open_findings.count(),
        "closed": closed[:CLOSED_SHOWN],
        "can_mark": is_engineer(request.user),
        "marks": [(s.value, s.label) for s in Finding.State if s in MARKS],
    }
    return render(request, "staff/findings.html", context)


@require_POST
@staff_page
def finding_state(request: HttpRequest, pk: int) -> HttpResponse:
    if not is_engineer(request.user):
        raise PermissionDenied("Only engineers may mark findings.")
    state = request.POST.get("state", "")
    if state not in MARKS:
        return error_response(
            "'state' is one of acknowledged, fixed, false_alarm", 400, field="state"
        )
    finding = get_object_or_404(Finding, pk=pk)
    finding.mark(state, request.user)
    messages.info(request, f"{finding.subject}: {finding.get_state_display()}")
    return redirect("staff-findings")


@staff_page
def finding_evidence(request: HttpRequest, pk: int) -> JsonResponse:
    """The series of a finding's evidence over its period, for the chart drawn on the page
    when a person opens it (staff/static/staff/finding_chart.js)."""
    return JsonResponse(evidence.series(get_object_or_404(Finding, pk=pk)))
