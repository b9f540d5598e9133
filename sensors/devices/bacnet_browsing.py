"""Browsing a controller from the staff BACnet page: an engineer asks, a worker reads the
device's object list (never the web request: a browse asks one object at a time and can take
up to bacnet_client's 120 s deadline), and the page shows the objects to choose from.

Redis key sensors:bacnet-browse, JSON: requested_at, address, instance, by (the engineer's
name), and once the worker has run it done_at, error, device_name, vendor_name, model_name,
objects (each object_type, instance, name, units, description; at most bacnet_client's
MAX_OBJECTS) and truncated (how many more it has, not read). One browse at a time, as one
discovery is: a small controller serves one client at a time, and the page shows one list.
The staff page's Add takes its objects from this list, so adding asks the network nothing.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict

from celery import current_app

from core.redis import get_redis
from sensors.devices import bacnet_client
from sensors.devices.bacnet_client import MAX_INSTANCE, BacnetError, ObjectInfo
from sensors.devices.bacnet_devices import client_instance, local_address

KEY = "sensors:bacnet-browse"
# A request the worker never took up (no worker running) stops blocking then: past the task's
# hard time limit (sensors/tasks.py), so a browse still running is never doubled.
STALE_S = 180
KEPT_S = 7 * 24 * 3600
MAX_ADDRESS = 64  # BacnetDevice.address's length
MAX_INSTANCE_DIGITS = len(str(MAX_INSTANCE))  # 4194302: 7

# The worker's task (sensors/tasks.py), by the name it is registered under.
BROWSE_TASK = "sensors.tasks.browse_bacnet"


class Busy(Exception):
    """A browse is already queued or running."""


def check(address: str, instance: str | int) -> tuple[str, int]:
    """The controller to browse, or ValueError starting with the field it is about."""
    address = str(address).strip()
    if not address:
        raise ValueError("address: give the controller's address, 'host' or 'host:port'")
    if len(address) > MAX_ADDRESS:
        raise ValueError(f"address: at most {MAX_ADDRESS} characters")
    try:
        host, port = bacnet_client.parse_address(address)
    except ValueError as exc:
        raise ValueError(f"address: {exc}") from exc
    text = str(instance).strip()
    # Capped as the address is: 5,000 digits were parsed, and echoed whole in the refusal.
    if len(text) > MAX_INSTANCE_DIGITS:
        raise ValueError(f"instance: at most {MAX_INSTANCE_DIGITS} digits (0-{MAX_INSTANCE})")
    if not (text.isascii() and text.removeprefix("-").isdigit()):  # "²": a digit int() refuses
        raise ValueError(f"instance: '{text}' is not a whole number")
    number = int(text)
    if not 0 <= number <= MAX_INSTANCE:
        raise ValueError(f"instance: {number} is out of range 0-{MAX_INSTANCE}")
    return (host if port == 47808 else f"{host}:{port}"), number


def last() -> dict | None:
    raw = get_redis().get(KEY)
    return json.loads(raw) if raw else None


def request(address: str, instance: str | int, by: str, now: float | None = None) -> dict:
    """Record the request and queue the worker's browse; Busy when one is under way."""
    now = time.time() if now is None else now
    address, number = check(address, instance)
    before = last()
    if before and "done_at" not in before and now - before["requested_at"] < STALE_S:
        raise Busy("A browse is already under way: its objects appear here shortly.")
    state = {"requested_at": now, "address": address, "instance": number, "by": by[:150]}
    get_redis().set(KEY, json.dumps(state), ex=KEPT_S)
    # By name: the task module imports this one (routed to the ingest queue by name).
    current_app.send_task(BROWSE_TASK, (address, number))
    return state


def run(address: str, instance: int, now: float | None = None) -> dict:
    """The worker's part: the browse, its objects kept for the page."""
    state = last() or {"requested_at": time.time() if now is None else now, "by": ""}
    state.update(address=address, instance=instance)
    try:
        found = bacnet_client.browse(
            address, instance, local=local_address(), client_instance=client_instance()
        )
        state.update(
            error="",
            device_name=found.device_name,
            vendor_name=found.vendor_name,
            model_name=found.model_name,
            objects=[asdict(o) for o in found.objects],
            truncated=found.truncated,
        )
    except (BacnetError, ValueError) as exc:
        state.update(error=str(exc), objects=[], truncated=0)
    state["done_at"] = time.time() if now is None else now
    get_redis().set(KEY, json.dumps(state), ex=KEPT_S)
    return state


def browsed(address: str, instance: int) -> dict | None:
    """The finished browse of this controller, if it is the one kept (else None)."""
    state = last()
    if not state or "done_at" not in state or state.get("error"):
        return None
    if (state["address"], state["instance"]) != (address, instance):
        return None
    return state


def objects_of(state: dict) -> dict[str, ObjectInfo]:
    """A finished browse's objects by their ref ('analog-input,1')."""
    infos = (ObjectInfo(**o) for o in state.get("objects", []))
    return {info.ref: info for info in infos}


def forget() -> None:
    """The kept browse is done with (its controller was added)."""
    get_redis().delete(KEY)
