"""The BACnet controllers page (#31): each controller with its state in plain words
(answering, or not answering since when and why) and its mapped points with their last value
and time. Every staff role reads it; engineers change a controller's poll interval and timeout
(through the API's serializer, so the same bounds and words apply) and ask for a poll now,
which is queued for the poll worker: the page never waits on the network. Audited.
Engineers also find controllers (Discover), read one's object list (Browse) — both queued for a
worker — and Add it with the objects they tick, as `manage.py bacnet add` does. Below, what our
own BACnet device shows the network: the zones' write switches and the feeds shown
(staff/bacnet_shown.py), switched by engineers."""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.admin.models import ADDITION, CHANGE, LogEntry
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from control.models import Zone
from core.live import live_every_s, live_json, wants_live
from core.pages import staff_page
from core.permissions import is_engineer
from feeds.models import Feed
from sensors.devices.bacnet_devices import UNITS, add_device, check_device, map_points
from sensors.devices.bacnet_status import ControllerReading, last_read
from sensors.models import (
    BACNET_MAX_INTERVAL_S,
    BACNET_MAX_POINTS_PER_DEVICE,
    BACNET_MAX_TIMEOUT_S,
    BACNET_MIN_INTERVAL_S,
    BACNET_MIN_TIMEOUT_S,
    BacnetDevice,
)
from sensors.serializers import BacnetDeviceSerializer
from staff import bacnet_shown
from staff.inputs import value_text

ONLY_ENGINEERS = "Only engineers change BACnet controllers."
ONLY_ENGINEERS_SHOWN = "Only engineers change what the site's BACnet device shows and accepts."
MAX_SHOWN = 200  # controllers on one page (each up to 200 points): a bound on its size


def _at(t: int | None) -> datetime | None:
    return datetime.fromtimestamp(t, UTC) if t is not None else None


def _shown(value: float | None, units: str, ref: str = "") -> str:
    """61.5 °C: the value as the inputs page writes it, BACnet's unit name as our short one;
    a binary point's 1 or 0 as BACnet's active or inactive, "on" or "off"; BACnet's
    "no-units" as nothing (it read "0 no-units")."""
    if value is None:
        return ""
    if ref.startswith("binary-"):
        return "on" if value else "off"
    unit = "" if units == "no-units" else UNITS.get(units, units)
    return f"{value_text(value)} {unit}".rstrip()


def _state(reading: ControllerReading) -> dict:
    """What the page says of a controller, in plain words."""
    if reading.answering:
        return {"ok": True, "text": "Answering", "since": _at(reading.answered_at)}
    if reading.failing_since is not None:
        return {
            "ok": False,
            "text": "Not answering",
            "since": _at(reading.failing_since),
            "error": reading.error,
            "answered": _at(reading.answered_at),
        }
    return {"ok": False, "text": "Not read yet", "since": None}


def _pending(state: dict, stale_s: float) -> dict:
    """A job queued for the worker: until when the page checks for its answer every 2 s
    (core/static/core/live.js), and whether that time is past with no answer (no worker
    took it up). Bounded by the job's own stale time, when another may be asked for."""
    if "done_at" in state:
        return {"done": _at(int(state["done_at"])), "pending_until": None, "stale": False}
    until = int(state["requested_at"] + stale_s)
    return {"done": None, "pending_until": until, "stale": time.time() > until}


def _discovery(state: dict | None) -> dict | None:
    from sensors.devices import bacnet_discovery

    if state is None:
        return None
    return {
        **state,
        "found": bacnet_discovery.recorded_as(state.get("found", [])),
        "requested": _at(int(state["requested_at"])),
        **_pending(state, bacnet_discovery.STALE_S),
    }


def _recorded(address: str, instance: int) -> BacnetDevice | None:
    """The controller we record at this address and instance, if any (as the model judges two
    rows the same controller: the instance and the address's host and port)."""
    from sensors.devices.bacnet_client import parse_address

    try:
        where = parse_address(address)
    except ValueError:
        return None
    same = BacnetDevice.objects.filter(device_instance=instance).select_related("node")
    for device in same.prefetch_related("points"):
        try:
            if parse_address(device.address) == where:
                return device
        except ValueError:  # a row from before the address checks: not this one
            continue
    return None


def _browse(state: dict | None) -> dict | None:
    """The kept browse for the page; when its controller is recorded already, its node name
    and interval (the Add form's defaults, so adding points leaves its interval alone) and its
    recorded objects, each marked with its input rather than offered again."""
    from sensors.devices import bacnet_browsing

    if state is None:
        return None
    device = None
    if "done_at" in state and not state.get("error"):
        device = _recorded(state["address"], state["instance"])
    keys = {p.ref: p.key for p in device.points.all()} if device else {}
    objects = []
    for o in state.get("objects", []):
        ref = f"{o['object_type']},{o['instance']}"
        objects.append({**o, "ref": ref, "recorded_as": keys.get(ref, "")})
    return {
        **state,
        "requested": _at(int(state["requested_at"])),
        **_pending(state, bacnet_browsing.STALE_S),
        "objects": objects,
        "recorded": {
            "name": device.node.name,
            "interval": device.node.interval,
            "points": len(keys),
        }
        if device
        else None,
        # The Add form's defaults: the recorded controller's own, else a blank name and 30 s.
        "default_name": device.node.name if device else "",
        "default_interval": device.node.interval if device else 30,
    }


def _controllers() -> tuple[list[dict], int]:
    devices = BacnetDevice.objects.select_related("node").prefetch_related("points")
    total = devices.count()
    page = list(devices[:MAX_SHOWN])
    shown = []
    for device, reading in zip(page, last_read(page), strict=True):
        shown.append(
            {
                "device": device,
                "state": _state(reading),
                "points": [
                    {**vars(p), "at": _at(p.time), "shown": _shown(p.value, p.units, p.ref)}
                    for p in reading.points
                ],
            }
        )
    return shown, total


def _page(
    request: HttpRequest,
    errors: dict | None = None,
    status: int = 200,
    discover_error: str = "",
    browse_error: str = "",
    add_error: str = "",
    shown_error: str = "",
) -> HttpResponse:
    from sensors.devices import bacnet_browsing, bacnet_discovery

    controllers, total = _controllers()
    context = {
        "nav": "bacnet",
        "now": timezone.now(),
        "controllers": controllers,
        "total": total,
        "max_shown": MAX_SHOWN,
        "can_edit": is_engineer(request.user),
        "live_every": live_every_s(),
        "errors": errors or {},
        "discovery": _discovery(bacnet_discovery.last()),
        "discover_error": discover_error,
        "discover_target": request.POST.get("target", "") if discover_error else "",
        "browse": _browse(bacnet_browsing.last()),
        "browse_error": browse_error,
        "add_error": add_error,
        # What the engineer sent, shown again when it is refused (ticks kept).
        "typed": request.POST if browse_error or add_error else {},
        "ticked": set(request.POST.getlist("point")) if add_error else set(),
        "shown_error": shown_error,
    }
    # The section on our own device, live too (a switch changed through the API shows at the
    # next update): its state and the search's matches; the search box itself is outside the
    # live regions, so what an engineer is typing there is never wiped.
    search = request.GET.get("feed") or request.POST.get("feed_search", "")
    context.update(bacnet_shown.context(search))
    if wants_live(request):
        return live_json(
            request,
            "staff/_bacnet_live.html",
            context,
            {
                "browse": "staff/_bacnet_browse.html",
                "shown-live": "staff/_bacnet_shown_live.html",
                "shown-matches": "staff/_bacnet_shown_matches.html",
            },
        )
    if context["feed_search"].error and status == 200:
        status = 400
    return render(request, "staff/bacnet.html", context, status=status)


@staff_page
def bacnet_page(request: HttpRequest) -> HttpResponse:
    return _page(request)


def _engineers_device(request: HttpRequest, pk: int) -> BacnetDevice:
    """The controller an engineer's POST is about; anyone else refused whatever they sent."""
    if not is_engineer(request.user):
        raise PermissionDenied(ONLY_ENGINEERS)
    return get_object_or_404(BacnetDevice.objects.select_related("node"), pk=pk)


@staff_page
@require_POST
def bacnet_settings(request: HttpRequest, pk: int) -> HttpResponse:
    """An engineer's change of a controller's poll interval and answer timeout."""
    device = _engineers_device(request, pk)
    # Both are asked for: a box left empty is refused naming it, not taken as "unchanged" (an
    # empty form was a 302 and a history entry saying what it already was). The page's own
    # words first, as Add says them ("interval: 4 s is outside 5-86400 s"); then the API's
    # serializer, so nothing it refuses is stored.
    errors = {}
    try:
        interval = _interval(request.POST.get("interval", ""))
    except ValueError as exc:
        errors.update([str(exc).split(": ", 1)])
    try:
        timeout_s = _timeout(request.POST.get("timeout_s", ""))
    except ValueError as exc:
        errors.update([str(exc).split(": ", 1)])
    if errors:
        return _page(request, {pk: errors}, status=400)
    if (interval, timeout_s) == (device.node.interval, device.timeout_s):
        messages.info(request, f"{device.node.name}: no change.")
        return redirect("staff-bacnet")
    data = {"interval": interval, "timeout_s": timeout_s}
    serializer = BacnetDeviceSerializer(device, data=data, partial=True)
    if not serializer.is_valid():
        errors = {pk: {f: " ".join(map(str, m)) for f, m in serializer.errors.items()}}
        return _page(request, errors, status=400)
    serializer.save()
    LogEntry.objects.log_actions(
        request.user.pk,
        [device],
        CHANGE,
        change_message=f"Poll every {device.node.interval} s, timeout {device.timeout_s} s "
        "(staff BACnet page).",
    )
    messages.success(request, f"Saved: {device.node.name} polled every {device.node.interval} s.")
    return redirect("staff-bacnet")


@staff_page
@require_POST
def bacnet_poll_now(request: HttpRequest, pk: int) -> HttpResponse:
    """Queue one poll of the controller for the poll worker (its own bounded time limits)."""
    from sensors.tasks import poll_bacnet_device

    device = _engineers_device(request, pk)
    poll_bacnet_device.delay(device.node_id)
    messages.info(request, f"A poll of {device.node.name} is queued: this page shows its answer.")
    return redirect("staff-bacnet")


@staff_page
@require_POST
def bacnet_discover(request: HttpRequest) -> HttpResponse:
    """Queue a Who-Is for the worker; the page shows what answers (sensors/devices/
    bacnet_discovery.py). A bad target is a 400 naming the field."""
    from sensors.devices import bacnet_discovery

    if not is_engineer(request.user):
        raise PermissionDenied(ONLY_ENGINEERS)
    target = request.POST.get("target", "")
    try:
        bacnet_discovery.request(target, request.user.get_username())
    except ValueError as exc:
        return _page(request, discover_error=f"target: {exc}", status=400)
    except bacnet_discovery.Busy as exc:
        messages.warning(request, str(exc))
        return redirect("staff-bacnet")
    messages.info(request, "A Who-Is is queued for the worker: what answers appears below.")
    return redirect("staff-bacnet")


@staff_page
@require_POST
def bacnet_browse(request: HttpRequest) -> HttpResponse:
    """Queue a browse of one controller for the worker; the page shows its objects
    (sensors/devices/bacnet_browsing.py). A bad address or instance is a 400 naming it."""
    from sensors.devices import bacnet_browsing

    if not is_engineer(request.user):
        raise PermissionDenied(ONLY_ENGINEERS)
    address, instance = request.POST.get("address", ""), request.POST.get("instance", "")
    try:
        bacnet_browsing.request(address, instance, request.user.get_username())
    except ValueError as exc:
        return _page(request, browse_error=str(exc), status=400)
    except bacnet_browsing.Busy as exc:
        messages.warning(request, str(exc))
        return redirect("staff-bacnet")
    messages.info(request, "A browse is queued for the worker: its objects appear below.")
    return redirect("staff-bacnet")


MAX_NUMBER = 20  # characters of a number field echoed back: 5,000 digits are not repeated


def _echo(text: str) -> str:
    return text if len(text) <= MAX_NUMBER else f"{text[:MAX_NUMBER]}…"


def _interval(text: str) -> int:
    """Seconds between polls as typed, or ValueError naming `interval` in the page's words."""
    bounds = f"{BACNET_MIN_INTERVAL_S}-{BACNET_MAX_INTERVAL_S} s"
    text = text.strip()
    if not text:
        raise ValueError(f"interval: give the seconds between polls, {bounds}")
    if len(text) > MAX_NUMBER or not text.isascii() or not text.lstrip("-").isdigit():
        raise ValueError(f"interval: '{_echo(text)}' is not a whole number of seconds")
    interval = int(text)
    if not BACNET_MIN_INTERVAL_S <= interval <= BACNET_MAX_INTERVAL_S:
        raise ValueError(f"interval: {interval} s is outside {bounds}")
    return interval


def _timeout(text: str) -> float:
    """Seconds to wait for each answer as typed, or ValueError naming `timeout_s`."""
    bounds = f"{BACNET_MIN_TIMEOUT_S:g}-{BACNET_MAX_TIMEOUT_S:g} s"
    text = text.strip()
    if not text:
        raise ValueError(f"timeout_s: give the seconds to wait for each answer, {bounds}")
    try:
        timeout_s = float(text) if len(text) <= MAX_NUMBER else math.nan
    except ValueError:
        timeout_s = math.nan
    if not math.isfinite(timeout_s):
        raise ValueError(f"timeout_s: '{_echo(text)}' is not a number of seconds")
    if not BACNET_MIN_TIMEOUT_S <= timeout_s <= BACNET_MAX_TIMEOUT_S:
        raise ValueError(f"timeout_s: {timeout_s:g} s is outside {bounds}")
    return timeout_s


def _first_error(exc: ValidationError) -> str:
    field, words = next(iter(exc.message_dict.items()))
    return f"{field}: {' '.join(words)}"


def _add(request: HttpRequest) -> tuple[BacnetDevice, bool, list[str], list[str]]:
    """The engineer's Add, checked as `manage.py bacnet add` checks it, the objects taken from
    the page's browse of that controller (so nothing asks the network here). Each refusal is a
    ValueError starting with the field it is about; nothing is stored then. Returns the device,
    whether it is new, the points added and the ticked ones it already had (said, not
    skipped in silence)."""
    from sensors.devices import bacnet_browsing

    address, instance = bacnet_browsing.check(
        request.POST.get("address", ""), request.POST.get("instance", "")
    )
    state = bacnet_browsing.browsed(address, instance)
    if state is None:
        raise ValueError(
            f"point: browse device {instance} at {address} first, then tick its objects"
        )
    name = request.POST.get("name", "").strip()
    if not name:
        raise ValueError("name: give the controller a node name, e.g. boiler-house")
    interval = _interval(request.POST.get("interval", ""))
    refs = list(dict.fromkeys(request.POST.getlist("point")))  # a ref sent twice counts once
    if not refs:
        raise ValueError("point: tick at least one object to record")
    if len(refs) > BACNET_MAX_POINTS_PER_DEVICE:
        raise ValueError(f"point: at most {BACNET_MAX_POINTS_PER_DEVICE} points per controller")
    objects = bacnet_browsing.objects_of(state)
    missing = [ref for ref in refs if ref not in objects]
    if missing:
        raise ValueError(f"point: the controller's list has no {', '.join(missing[:5])}")
    try:  # the command's checks, before anything is stored
        check_device(name, address, instance, interval=interval)
    except ValidationError as exc:
        raise ValueError(_first_error(exc)) from exc
    except ValueError as exc:  # the address and interval were checked above: the name is left
        raise ValueError(f"name: {exc}") from exc
    try:
        with transaction.atomic():
            existing = BacnetDevice.objects.filter(node__name=name).select_related("node").first()
            had = set(existing.points.values_list("key", flat=True)) if existing else set()
            before = (existing.address, existing.node.interval) if existing else None
            device = add_device(
                name, address, instance, interval=interval, vendor_name=state["vendor_name"]
            )
            points = map_points(device, [objects[ref] for ref in refs])
            added = [f"{p.ref} '{p.name}'" for p in points if p.key not in had]
            ticked = set(refs)  # map_points answers all the device's points
            already = [f"{p.ref} (as {p.key})" for p in points if p.key in had and p.ref in ticked]
            # An Add that changes nothing (its points all recorded, the same address and
            # interval) leaves nothing in the history: there is nothing to tell.
            if added or before != (device.address, device.node.interval):
                _log_add(request, device, existing is None, added)
    except ValidationError as exc:  # a row recorded meanwhile
        raise ValueError(_first_error(exc)) from exc
    except ValueError as exc:  # map_points: past the points bound with those it had
        raise ValueError(f"point: {exc}") from exc
    return device, existing is None, added, already


def _log_add(request: HttpRequest, device: BacnetDevice, new: bool, added: list[str]) -> None:
    """In the controller's admin history, as the API's changes are."""
    where = f"device {device.device_instance} at {device.address}"
    points = ", ".join(added) if added else "none new"
    message = (
        f"Added {where}, polled every {device.node.interval} s, with points {points} "
        "(staff BACnet page)."
        if new
        else f"Set {where}, polled every {device.node.interval} s; added points {points} "
        "(staff BACnet page)."
    )
    LogEntry.objects.log_actions(
        request.user.pk, [device], ADDITION if new else CHANGE, change_message=message
    )


@staff_page
@require_POST
def bacnet_add(request: HttpRequest) -> HttpResponse:
    """Record a browsed controller with the objects the engineer ticked."""
    from sensors.devices import bacnet_browsing

    if not is_engineer(request.user):
        raise PermissionDenied(ONLY_ENGINEERS)
    try:
        device, new, added, already = _add(request)
    except ValueError as exc:
        return _page(request, add_error=str(exc), status=400)
    bacnet_browsing.forget()  # its list has served: the page shows the controller instead
    what = "added" if new else "updated"
    had = f"; already recorded: {', '.join(already)}" if already else ""
    messages.success(
        request,
        f"{device.node.name} {what}: {len(added)} point{'s' if len(added) != 1 else ''} "
        f"recorded, polled every {device.node.interval} s{had}.",
    )
    return redirect("staff-bacnet")


def _back_to_shown(request: HttpRequest) -> HttpResponse:
    """The page again at its section, with the engineer's feed search (if any) kept."""
    url = reverse("staff-bacnet")
    search = request.POST.get("feed_search", "").strip()[: bacnet_shown.MAX_SEARCH]
    if search:
        url += "?" + urlencode({"feed": search})
    return redirect(url + "#shown")


@staff_page
@require_POST
def bacnet_zone_writes(request: HttpRequest, pk: int) -> HttpResponse:
    """An engineer switches one of a zone's BACnet writes (setting: setpoint or occupancy,
    to: on or off); audited. A bad value is a 400 naming the field."""
    if not is_engineer(request.user):
        raise PermissionDenied(ONLY_ENGINEERS_SHOWN)
    zone = get_object_or_404(Zone, pk=pk)
    setting = request.POST.get("setting", "")
    try:
        said = bacnet_shown.switch_zone(request.user, zone, setting, request.POST.get("to", ""))
    except ValueError as exc:
        return _page(request, shown_error=f"{zone.name}: {exc}", status=400)
    messages.success(
        request, f"{zone.name}: {'; '.join(said)}." if said else f"{zone.name}: no change."
    )
    return _back_to_shown(request)


@staff_page
@require_POST
def bacnet_feed_export(request: HttpRequest, pk: int) -> HttpResponse:
    """An engineer shows a feed on BACnet or takes it off (to: on or off); audited, bounded
    as on the API (the 201st refused, a 400 naming bacnet_export)."""
    if not is_engineer(request.user):
        raise PermissionDenied(ONLY_ENGINEERS_SHOWN)
    feed = get_object_or_404(Feed, pk=pk)
    try:
        said = bacnet_shown.switch_feed(request.user, feed, request.POST.get("to", ""))
    except ValueError as exc:
        return _page(request, shown_error=f"{feed}: {exc}", status=400)
    messages.success(
        request,
        f"{feed}: {'; '.join(said)} (from the server's next refresh)."
        if said
        else f"{feed}: no change.",
    )
    return _back_to_shown(request)
