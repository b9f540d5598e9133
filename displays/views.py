"""Public kiosk pages: one display, its data.json, and a rotation of several displays.

No login: visitors' screens just open the address. Private displays answer 404 to anyone not
logged in as staff, so their existence is not revealed.
"""

from __future__ import annotations

import math

from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.clickjacking import xframe_options_sameorigin
from django.views.decorators.http import require_GET

from core.api_errors import error_response
from core.throttle import public_throttle
from displays import kiosk_data
from displays.models import Display

MIN_REFRESH_S = 0.05  # the browser tests poll this fast; a real screen uses Display.refresh_s
MAX_REFRESH_S = 3600.0
MAX_ROTATE = 20


class BadParameter(ValueError):
    pass


def _viewable(request: HttpRequest, slug: str) -> Display:
    display = kiosk_data.displays_with_panels().filter(slug=slug).first()
    if display is None or not kiosk_data.can_view(display, request.user):
        raise Http404(f"No display '{slug}'.")
    return display


def _refresh_override(request: HttpRequest) -> float | None:
    raw = request.GET.get("refresh")
    if raw is None or raw == "":
        return None
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (MIN_REFRESH_S <= value <= MAX_REFRESH_S):
        raise BadParameter(
            f"refresh: seconds between polls, from {MIN_REFRESH_S} to {MAX_REFRESH_S:g}."
        )
    return value


def _bad_request(message: str) -> HttpResponse:
    return HttpResponse(message, status=400, content_type="text/plain; charset=utf-8")


@public_throttle
@require_GET
@xframe_options_sameorigin  # the rotation page shows each display in a same-origin frame
def kiosk(request: HttpRequest, slug: str) -> HttpResponse:
    display = _viewable(request, slug)
    try:
        refresh = _refresh_override(request)
    except BadParameter as exc:
        return _bad_request(str(exc))
    public_only = not kiosk_data.is_staff_reader(request.user)
    layout = kiosk_data.describe(display, public_only)
    config = {
        "dataUrl": f"/kiosk/{display.slug}/data.json",
        "refreshMs": round((refresh or display.refresh_s) * 1000),
        "timeZone": layout["time_zone"],
        "panels": layout["panels"],
    }
    context = {"display": display, "layout": layout, "config": config}
    return render(request, "displays/kiosk.html", context)


@public_throttle
@require_GET
@never_cache
def kiosk_json(request: HttpRequest, slug: str) -> JsonResponse:
    display = kiosk_data.displays_with_panels().filter(slug=slug).first()
    if display is None or not kiosk_data.can_view(display, request.user):
        return error_response(f"No display '{slug}'.", 404)
    data = kiosk_data.build(display, public_only=not kiosk_data.is_staff_reader(request.user))
    return JsonResponse(data, json_dumps_params={"ensure_ascii": False})


@public_throttle
@require_GET
def kiosk_index(request: HttpRequest) -> HttpResponse:
    """`/kiosk/?rotate=pv,thermal,hydro` rotates displays; plain `/kiosk/` lists them."""
    try:
        refresh = _refresh_override(request)
    except BadParameter as exc:
        return _bad_request(str(exc))
    rotate = request.GET.get("rotate")
    if rotate is None:
        displays = kiosk_data.displays_with_panels()
        if not kiosk_data.is_staff_reader(request.user):
            displays = displays.filter(public=True)
        return render(request, "displays/index.html", {"displays": displays})
    slugs = [s.strip() for s in rotate.split(",") if s.strip()]
    if not slugs:
        return _bad_request("rotate: a comma-separated list of display slugs, e.g. pv,hydro.")
    if len(slugs) > MAX_ROTATE:
        return _bad_request(f"rotate: at most {MAX_ROTATE} displays.")
    every = request.GET.get("every")
    if every is not None:
        try:
            every_s = float(every)
        except ValueError:
            every_s = math.nan
        if not (1 <= every_s <= MAX_REFRESH_S):
            return _bad_request(f"every: seconds per display, from 1 to {MAX_REFRESH_S:g}.")
    displays = [_viewable(request, slug) for slug in slugs]
    suffix = f"?refresh={refresh:g}" if refresh else ""
    frames = [
        {
            "slug": d.slug,
            "title": d.title,
            "src": f"/kiosk/{d.slug}/{suffix}",
            "seconds": float(every) if every is not None else d.rotate_s,
        }  # fmt: skip
        for d in displays
    ]
    return render(request, "displays/rotate.html", {"frames": frames})
