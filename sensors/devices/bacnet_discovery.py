"""Discovery from the staff BACnet page: an engineer asks, a worker sends the Who-Is (never the
web request: it listens for seconds), and the page shows what answered.

Redis key sensors:bacnet-discovery, JSON: requested_at, target ("" for the local broadcast),
by (the engineer's name), and once the worker has run it done_at, error and found (each answer's
instance, address and vendor id; which of them we record is said when the page is drawn, by
recorded_as(), so a controller added after the Who-Is shows as recorded). One discovery at a
time: it binds the discovery port, and a second request while one is queued or running is
refused, not queued behind it.
"""

from __future__ import annotations

import json
import time

from celery import current_app
from django.conf import settings

from core.redis import get_redis
from sensors.devices import bacnet_client
from sensors.devices.bacnet_client import BacnetError
from sensors.devices.bacnet_devices import client_instance, local_address
from sensors.models import BacnetDevice

KEY = "sensors:bacnet-discovery"
WAIT_S = 3.0  # how long the worker listens for I-Am answers
STALE_S = 120  # a request the worker never took up (no worker running) stops blocking then
MAX_TARGET = 64


class Busy(Exception):
    """A discovery is already queued or running."""


def check_target(target: str) -> str:
    """'' (the local broadcast), an address or a directed broadcast, 'host[:port]'."""
    target = target.strip()
    if len(target) > MAX_TARGET:
        raise ValueError(f"at most {MAX_TARGET} characters")
    if target:
        host, port = bacnet_client.parse_address(target)
        target = host if port == 47808 else f"{host}:{port}"
    return target


# The worker's task (sensors/tasks.py), by the name it is registered under.
DISCOVER_TASK = "sensors.tasks.discover_bacnet"


def last() -> dict | None:
    raw = get_redis().get(KEY)
    return json.loads(raw) if raw else None


def request(target: str, by: str, now: float | None = None) -> dict:
    """Record the request and queue the worker's Who-Is; Busy when one is under way."""
    now = time.time() if now is None else now
    before = last()
    if before and "done_at" not in before and now - before["requested_at"] < STALE_S:
        raise Busy("A discovery is already under way: its answer appears here shortly.")
    state = {"requested_at": now, "target": check_target(target), "by": by[:150]}
    get_redis().set(KEY, json.dumps(state), ex=7 * 24 * 3600)
    # By name: the task module imports this one (routed to the ingest queue by name).
    current_app.send_task(DISCOVER_TASK, (state["target"],))
    return state


def recorded_as(found: list[dict]) -> list[dict]:
    """The answers, each with the node name we record its instance as ("" when none): asked
    now, not when the Who-Is ran, so one added since says so (#31)."""
    known = dict(
        BacnetDevice.objects.filter(device_instance__in=[f["instance"] for f in found]).values_list(
            "device_instance", "node__name"
        )
    )
    return [{**f, "recorded_as": known.get(f["instance"], "")} for f in found]


def run(target: str, now: float | None = None) -> dict:
    """The worker's part: the Who-Is (through the site's BBMD when there is one), its answers
    kept for the page."""
    state = last() or {"requested_at": time.time() if now is None else now, "target": target}
    try:
        found = bacnet_client.discover(
            target or None,
            local=local_address(settings.BMS_BACNET_PORT),
            client_instance=client_instance(),
            wait_s=WAIT_S,
            bbmd=settings.BMS_BACNET_BBMD or None,
            ttl_s=settings.BMS_BACNET_BBMD_TTL_S,
        )
        state["error"] = ""
    except (BacnetError, ValueError) as exc:
        found, state["error"] = [], str(exc)
    state["found"] = [
        {"instance": f.instance, "address": f.address, "vendor_id": f.vendor_id} for f in found
    ]
    state["done_at"] = time.time() if now is None else now
    get_redis().set(KEY, json.dumps(state), ex=7 * 24 * 3600)
    return state
