"""The inputs page and the process-list editor (issue #26 item 10): what emoncms users do on
emoncms's inputs page and its process-list editor, on the staff pages.

Every staff role sees both; only engineers change a process list (is_engineer in core/permissions.py),
and the save refuses anyone else whatever the page showed them.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from core.api_errors import error_response
from core.live import live_every_s, live_json, wants_live
from core.pages import staff_page
from core.permissions import is_engineer
from feeds.models import Feed
from feeds.processes import catalog
from feeds.store import service
from sensors.models import Sensor
from sensors.process_validation import feed_owner_sites
from staff import process_editor
from staff.inputs import input_groups, referenced, step_labels, value_text


@staff_page
def inputs_page(request: HttpRequest) -> HttpResponse:
    """Every node's inputs: last value, its age (stale ones marked), the process list."""
    context = {
        "nav": "inputs",
        "now": timezone.now(),
        "groups": input_groups(),
        "can_edit": is_engineer(request.user),
        "live_every": live_every_s(),
    }
    if wants_live(request):
        return live_json(request, "staff/_inputs_live.html", context)
    return render(request, "staff/inputs.html", context)


def _feed_option(feed: Feed) -> dict:
    return {"id": feed.pk, "label": str(feed), "interval": feed.interval, "unit": feed.unit}


def _offered_feeds(sensor: Sensor) -> list[dict]:
    """The feeds a step of this input may name: none another site's sensors write
    (process_validation refuses those; offering them would only invite the refusal)."""
    site = sensor.node.site_id
    feeds = list(Feed.objects.order_by("tag", "name"))
    owners = feed_owner_sites({f.pk for f in feeds}, exclude_sensor=sensor.pk)
    return [_feed_option(f) for f in feeds if not owners.get(f.pk) or site in owners[f.pk]]


def _offered_inputs(sensor: Sensor) -> list[dict]:
    """Inputs of the same site (process_validation refuses another site's)."""
    # site_id None matches the nodes without a site (IS NULL), as process_validation pairs them.
    same_site = Sensor.objects.select_related("node").filter(node__site_id=sensor.node.site_id)
    return [
        {"id": s.pk, "label": f"{s.node.name}:{s.key}"}
        for s in same_site.order_by("node__name", "key")
    ]


def _catalog() -> list[dict]:
    return [
        {"name": d.name, "args": list(d.args), "daily": d.daily}
        for d in catalog.PROCESSES.values()
        if d.name != "error_found"  # emoncms offers no way to add it either
    ]


@staff_page
def process_list(request: HttpRequest, pk: int) -> HttpResponse:
    """One input's process list: the editor for engineers, read-only for everyone else."""
    sensor = get_object_or_404(Sensor.objects.select_related("node", "node__site"), pk=pk)
    feeds, inputs = referenced([sensor])
    steps = sensor.processes if isinstance(sensor.processes, list) else []
    current = service.last_values(catalog.feed_ids(steps))
    labels = step_labels(steps, feeds, inputs)
    rows = []
    for step, label in zip(steps, labels, strict=True):
        feed_id = step.get("feed") if isinstance(step, dict) else None
        last = current.get(feed_id)
        rows.append(
            {"label": label, "feed_id": feed_id, "now": value_text(last[1] if last else None)}
        )
    can_edit = is_engineer(request.user)
    context = {
        "nav": "inputs",
        "sensor": sensor,
        "rows": rows,
        "can_edit": can_edit,
        "max_steps": catalog.MAX_STEPS,
    }
    if can_edit:
        context["editor"] = {
            "steps": steps,
            # As stored, even if not a list (an old unchecked row): the save compares it.
            "based_on": sensor.processes,
            "catalog": _catalog(),
            "feeds": _offered_feeds(sensor),
            "inputs": _offered_inputs(sensor),
            "max_steps": catalog.MAX_STEPS,
            # The "feed now" column (JSON object keys are strings).
            "feed_now": {str(k): value_text(v) for k, (_, v) in current.items()},
            "defaults": {
                d.name: process_editor.new_feed_defaults(sensor, d.name)
                for d in catalog.PROCESSES.values()
                if "feed" in d.args
            },
        }
    return render(request, "staff/process_list.html", context)


@require_POST
@staff_page
def process_list_save(request: HttpRequest, pk: int) -> HttpResponse:
    """Save the editor's list (JSON in, JSON out: staff/process_editor.py says what is checked)."""
    if not is_engineer(request.user):
        return error_response("only engineers may change a process list", 403)
    sensor = get_object_or_404(Sensor.objects.select_related("node"), pk=pk)
    length = request.META.get("CONTENT_LENGTH") or ""
    if not length.isdigit():
        return error_response("a Content-Length is required", 411, field="body")
    if int(length) > process_editor.MAX_BODY_BYTES:
        # Checked before the body is read: a huge body is refused, never held.
        return error_response(
            f"the body must be JSON of at most {process_editor.MAX_BODY_BYTES} bytes",
            413,
            field="body",
        )
    try:
        steps, based_on = process_editor.parse_body(request.body)
        saved = process_editor.save_process_list(sensor, steps, based_on, request.user)
    except process_editor.EditRefused as refused:
        return JsonResponse(refused.body, status=refused.status)
    return JsonResponse(
        {
            "success": True,
            "steps": saved.steps,
            "new_feeds": [_feed_option(f) for f in saved.new_feeds],
        }
    )
