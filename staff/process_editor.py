"""Saving an input's process list from the staff editor (issue #26 item 10).

The editor posts the whole list as JSON: {"based_on": [the list as it was loaded], "steps":
[...]}. A step is a saved step ({"process": "log_to_feed", "feed": 3}) or one whose feed is
created with it ({"process": "log_to_feed", "new_feed": {"name": ..., "tag": ..., "interval":
..., "unit": ...}}). Checked as the API checks it: each new feed through the feed API's own
serializer (feeds/web/serializers.py), then the list through check_process_list
(sensors/process_validation.py), the check Sensor.clean runs for the API and
the admin. Nothing here repeats a rule of theirs.

All or nothing: the new feeds and the list are saved in one transaction, so a list refused at
its last step leaves no half-made feeds behind. `based_on` makes a save that would silently
overwrite another engineer's change since the page was opened a 409 instead.

Each error is returned under the index of the step it is about, in words, for the editor to
show beside that step; errors about the whole list (its length) under "list".
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from django.conf import settings
from django.contrib.admin.models import ADDITION, CHANGE, LogEntry
from django.db import transaction

from core.parsers import nesting_depth_exceeds
from feeds.models import Feed
from feeds.processes import catalog
from feeds.web.serializers import FeedSerializer
from sensors.models import Sensor
from sensors.process_validation import DAY_S, check_process_list

# The whole request: 64 steps each creating a feed with 100-character names is ~20 KB.
MAX_BODY_BYTES = 64 * 1024
NEW_FEED_FIELDS = ("name", "tag", "interval", "unit")
_STEP_PREFIX = re.compile(r"^step (\d+)\b")


class EditRefused(Exception):
    """The save was refused: `status` and the JSON body saying why."""

    def __init__(self, status: int, message: str, **extra: object) -> None:
        super().__init__(message)
        self.status = status
        self.body = {"success": False, "error": message, **extra}


@dataclass
class Saved:
    steps: list[dict]
    new_feeds: list[Feed] = field(default_factory=list)


def new_feed_defaults(sensor: Sensor, process: str) -> dict:
    """What the editor fills in for a feed created with a step: tagged with the node and at
    its interval, as ingest names the feed of a new input (sensors/ingest/processing.py),
    but daily for a daily process (it writes one value a day: process_validation)."""
    daily = process in catalog.DAILY
    return {
        "name": f"{sensor.key}_{process}" if process != "log_to_feed" else sensor.key,
        "tag": sensor.node.name,
        "interval": DAY_S if daily else sensor.node.interval,
        "unit": "",
    }


def parse_body(raw: bytes) -> tuple[list, object]:
    """(steps, based_on) from the posted JSON, or EditRefused naming the field."""
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise EditRefused(400, 'the body must be JSON: {"steps": [...]}', field="body") from None
    except RecursionError:  # json's own failure on deep nesting: a 400, not a 500
        raise EditRefused(400, "the body is nested too deeply", field="body") from None
    depth = settings.BMS_JSON_MAX_DEPTH
    if isinstance(body, dict | list) and nesting_depth_exceeds(body, depth):
        # The API's bound (core/parsers.py), so nothing below walks a 10,000-deep value.
        raise EditRefused(400, f"the body is nested deeper than {depth} levels", field="body")
    if not isinstance(body, dict) or not isinstance(body.get("steps"), list):
        raise EditRefused(400, "'steps' must be a list of process steps", field="steps")
    steps = body["steps"]
    if len(steps) > catalog.MAX_STEPS:
        # Before any feed is made: a list that long is refused whatever else it holds.
        raise EditRefused(
            400,
            f"'steps': at most {catalog.MAX_STEPS} steps, got {len(steps)}",
            field="steps",
            errors={"list": [f"at most {catalog.MAX_STEPS} steps, got {len(steps)}"]},
        )
    return steps, body.get("based_on")


def save_process_list(sensor: Sensor, steps: list, based_on: object, user) -> Saved:
    """Create the steps' new feeds, check the list, save it and audit it; or EditRefused."""
    with transaction.atomic():
        locked = Sensor.objects.select_for_update().select_related("node").get(pk=sensor.pk)
        before = locked.processes
        if based_on is not None and based_on != before:
            raise EditRefused(
                409,
                "this input's process list was changed by someone else since the page was "
                "opened: reload to see it, then make your change again",
                field="based_on",
            )
        resolved, new_feeds, errors = _create_new_feeds(locked, steps)
        if not errors:
            resolved, problems = check_process_list(
                resolved, site_id=locked.node.site_id, exclude_sensor=locked.pk
            )
            errors = _by_step(problems)
        if errors:
            transaction.set_rollback(True)  # the feeds made for this list go with it
            first = next(iter(errors.values()))[0]
            raise EditRefused(400, first, field="steps", errors=errors)
        locked.processes = resolved
        locked.save(update_fields=["processes"])
        _audit(user, locked, before, resolved, new_feeds)
    return Saved(resolved, new_feeds)


def _create_new_feeds(sensor: Sensor, steps: list) -> tuple[list, list[Feed], dict]:
    """Steps with each `new_feed` replaced by the id of the feed made for it."""
    resolved: list = []
    made: list[Feed] = []
    errors: dict[str, list[str]] = {}
    for i, step in enumerate(steps):
        if not (isinstance(step, dict) and "new_feed" in step):
            resolved.append(step)
            continue
        spec = step["new_feed"]
        rest = {k: v for k, v in step.items() if k != "new_feed"}
        if not isinstance(spec, dict):
            errors[str(i)] = ["the new feed must have a name, tag and interval"]
            resolved.append(rest)
            continue
        data = {k: spec[k] for k in NEW_FEED_FIELDS if k in spec}
        serializer = FeedSerializer(data=data)
        if not serializer.is_valid():
            errors[str(i)] = [
                _feed_error(name, str(message), data)
                for name, messages in serializer.errors.items()
                for message in messages
            ]
            resolved.append(rest)
            continue
        feed = serializer.save()
        made.append(feed)
        resolved.append({**rest, "feed": feed.pk})
    return resolved, made, errors


def _feed_error(name: str, message: str, data: dict) -> str:
    if name == "non_field_errors":  # DRF's word for the unique (tag, name) pair
        label = f"{data.get('tag')}:{data.get('name')}" if data.get("tag") else data.get("name")
        return f"new feed 'name': a feed {label} already exists; pick it from the list instead"
    return f"new feed {name!r}: {message}"


def _by_step(problems: list[str]) -> dict[str, list[str]]:
    """process_validation's messages ("step 2 (scale): 'arg' must be ...") keyed by step."""
    errors: dict[str, list[str]] = {}
    for message in problems:
        match = _STEP_PREFIX.match(message)
        errors.setdefault(match.group(1) if match else "list", []).append(message)
    return errors


def _audit(user, sensor: Sensor, before: object, after: list, new_feeds: list[Feed]) -> None:
    """The admin's history of the sensor (and of each new feed) says who changed what, when:
    the same LogEntry the API's key rotation and register maps write (sensors/api.py). Keys
    sorted: PostgreSQL's jsonb hands a step back in its own key order, and a history that
    reads differently for the same step would look like a change."""
    for feed in new_feeds:
        LogEntry.objects.log_actions(
            user.pk, [feed], ADDITION, change_message="Created in the process-list editor."
        )
    LogEntry.objects.log_actions(
        user.pk,
        [sensor],
        CHANGE,
        change_message=(
            "Process list changed (staff inputs page): before "
            f"{json.dumps(before, sort_keys=True)}; after {json.dumps(after, sort_keys=True)}"
        ),
    )
