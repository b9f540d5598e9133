"""The findings page: what is wasting energy this week, most costly first (docs/FINDINGS.md).

Everyone on the staff reads it; engineers mark a finding acknowledged, fixed or a false alarm
(who and when are kept, findings.models.Finding.mark).

The page's buttons post a plain form, so a refused mark (a finding gone, or fixed by someone
else since the page was drawn) answers a page saying why, with its 4xx status; a script that
asks for JSON (`Accept: application/json`) gets the API's error shape instead.
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
from findings.models import Finding, StateRefused
from findings.rules import RULES

FINDINGS_PER_PAGE = 200  # open findings shown; a site with more has bigger problems than paging
CLOSED_SHOWN = 50


def _ranked(queryset):
    """Most costly first (the model's order): money, then kWh (a site without a tariff)."""
    return queryset.select_related("state_by")


@staff_page
def finding_list(request: HttpRequest) -> HttpResponse:
    open_findings = _ranked(Finding.objects.filter(closed_at__isnull=True))
    closed = _ranked(Finding.objects.filter(closed_at__isnull=False)).order_by("-closed_at")
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
        "marks": [(s.value, s.label) for s in Finding.MARKS],
    }
    return render(request, "staff/findings.html", context)


def _wants_json(request: HttpRequest) -> bool:
    """A script asking for JSON; a browser's form post asks for text/html."""
    accept = request.headers.get("Accept", "")
    return "application/json" in accept and "text/html" not in accept


def _refused(request: HttpRequest, message: str, status: int, field: str = "") -> HttpResponse:
    """A refusal in the API's one shape (docs/API.md "Errors": `error`, and `fields` when a
    field is refused) for a script, or the page saying it, with the same status, for a person."""
    if _wants_json(request):
        if field:
            return error_response(f"{field}: {message}", status, fields={field: [message]})
        return error_response(message, status)
    context = {"nav": "findings", "message": message, "status": status}
    return render(request, "staff/finding_refused.html", context, status=status)


@require_POST
@staff_page
def finding_state(request: HttpRequest, pk: int) -> HttpResponse:
    if not is_engineer(request.user):
        if _wants_json(request):  # a script reads JSON, not the staff 403 page
            return error_response("detail: Only engineers may mark findings.", 403)
        raise PermissionDenied("Only engineers may mark findings.")
    finding = Finding.objects.filter(pk=pk).first()
    if finding is None:
        return _refused(
            request, f"There is no finding {pk}: it may have been deleted since the page was "
            "drawn.", 404,
        )  # fmt: skip
    try:
        changed = finding.mark(request.POST.get("state", ""), request.user)
    except StateRefused as exc:
        return _refused(request, str(exc), 400, field="state")
    if _wants_json(request):
        return JsonResponse({"success": True, "id": finding.pk, "state": finding.state})
    if changed:
        messages.info(request, f"{finding.subject}: {finding.get_state_display()}")
    return redirect("staff-findings")


@staff_page
def finding_evidence(request: HttpRequest, pk: int) -> JsonResponse:
    """The series of a finding's evidence over its period, for the chart drawn on the page
    when a person opens it (staff/static/staff/finding_chart.js)."""
    return JsonResponse(evidence.series(get_object_or_404(Finding, pk=pk)))
