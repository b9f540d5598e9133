"""Live staff pages: the part of a page that changes is also served as JSON (`?live=1`) and
swapped in place by core/static/core/live.js, so the page never reloads a form away."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, JsonResponse
from django.template.loader import render_to_string
from django.utils import timezone


def live_every_s() -> int:
    """Seconds between two updates of a live page (BMS_STAFF_LIVE_S)."""
    return int(settings.BMS_STAFF_LIVE_S)


def wants_live(request: HttpRequest) -> bool:
    return request.GET.get("live") == "1"


def live_json(
    request: HttpRequest, template: str, context: dict, more: dict[str, str] | None = None
) -> JsonResponse:
    """The live region (element id "live") rendered with the page's own template, and any
    `more` regions (element id: template) likewise."""
    regions = {"live": render_to_string(template, context, request=request)}
    for region, other in (more or {}).items():
        regions[region] = render_to_string(other, context, request=request)
    response = JsonResponse({"at": timezone.now().isoformat(), "regions": regions})
    response["Cache-Control"] = "no-store"
    return response
