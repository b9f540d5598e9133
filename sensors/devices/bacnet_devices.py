"""BACnet/IP controllers as the site has them: points chosen from a browse, polled at a bounded
rate, their readings ingested as the node's inputs, and their alarms.

Alarms, in plain words: `bacnet-device:<node id>` when the controller answers nothing for two
polls in a row (cleared when it answers again); `bacnet-point:<node id>:<key>` when one point
fails two polls in a row while the rest of the controller reads, in the controller's own words
("object: unknown-object"), cleared when it reads again or leaves the map.

And what a point says of itself, raised at once since the controller states it (cleared when a
reading shows the condition gone, or the point leaves the map):
`bacnet-fault:<node id>:<key>` while its reliability is other than no-fault-detected, quoted
("over-range"), its value then not recorded (it is not a measurement); and
`bacnet-out-of-service:<node id>:<key>` while its out-of-service is true, its value (set by hand
at the controller) recorded and the alarm saying so.
"""

from __future__ import annotations

import logging
import time

from django.conf import settings
from django.db import transaction

from alarms.lifecycle import clear_alarm, raise_alarm
from alarms.models import Alarm
from core.redis import get_redis
from sensors.devices import bacnet_client, bacnet_status
from sensors.devices.bacnet_client import BacnetError, Condition, ObjectInfo, Readings
from sensors.models import (
    BACNET_MAX_POINTS_PER_DEVICE,
    BACNET_MIN_INTERVAL_S,
    BacnetDevice,
    BacnetPoint,
    Node,
    Sensor,
)

log = logging.getLogger(__name__)

FAILURES_BEFORE_ALARM = 2
POLL_LOCK_TTL_S = 60  # just over the poll task's hard time limit (sensors/tasks.py)


def local_address(port: int = 0) -> str:
    """Our end: the configured interface (with its prefix, so broadcasts have an address) on
    `port`. Polls and commands use port 0, any free port: they are unicast and several workers
    may talk at once; discovery binds BMS_BACNET_PORT, where broadcast I-Am answers arrive."""
    return f"{settings.BMS_BACNET_ADDRESS}:{port}"


def client_instance() -> int:
    return int(settings.BMS_BACNET_INSTANCE)


def key_for(info: ObjectInfo) -> str:
    """The input key a point's readings arrive as: 'analog-input-1'."""
    return f"{info.object_type}-{info.instance}"


def _node_for(name: str, address: str, interval: int) -> Node:
    """The controller's node (found, or new and unsaved), its interval set: what is refused
    raises ValueError (or ValidationError from the model) naming it."""
    bacnet_client.parse_address(address)  # ValueError names what is wrong
    if interval < BACNET_MIN_INTERVAL_S:
        raise ValueError(f"interval {interval} s is below the {BACNET_MIN_INTERVAL_S} s bound")
    node = Node.objects.filter(name=name).first()
    if node is None:
        node = Node(name=name, protocol=Node.Protocol.BACNET)
        node.set_new_key()  # a polled controller never posts; the key only satisfies the model
    elif node.protocol != Node.Protocol.BACNET:
        raise ValueError(f"node '{name}' exists and is not a BACnet controller")
    node.interval = interval
    node.full_clean()
    return node


def check_device(name: str, address: str, instance: int, *, interval: int = 30) -> None:
    """Refuse what add_device would refuse, before anything asks the network: browsing a
    controller that is not there takes its whole timeout, and an engineer should hear about a
    typing slip in the interval or the name at once."""
    node = _node_for(name, address, interval)
    device = BacnetDevice(address=address.strip(), device_instance=instance)
    existing = getattr(node, "bacnet", None) if node.pk else None
    device.pk = existing.pk if existing is not None else None
    device.full_clean(exclude=["node"])


def add_device(
    name: str, address: str, instance: int, *, interval: int = 30, vendor_name: str = ""
) -> BacnetDevice:
    """Create (or update) the node and device row of a controller."""
    with transaction.atomic():
        node = _node_for(name, address, interval)
        node.save()
        device, _ = BacnetDevice.objects.update_or_create(
            node=node,
            defaults={
                "address": address.strip(),
                "device_instance": instance,
                "vendor_name": vendor_name[:100],
            },
        )
        device.full_clean()
    return device


@transaction.atomic
def map_points(device: BacnetDevice, objects: list[ObjectInfo]) -> list[BacnetPoint]:
    """Add `objects` to the device's points (an object already mapped keeps its key), each with
    an input (a Sensor named and unitised as the controller names it)."""
    existing = {(p.object_type, p.instance): p for p in device.points.all()}
    new = [o for o in objects if (o.object_type, o.instance) not in existing]
    if len(existing) + len(new) > BACNET_MAX_POINTS_PER_DEVICE:
        raise ValueError(
            f"{len(existing) + len(new)} points: a controller is polled for at most "
            f"{BACNET_MAX_POINTS_PER_DEVICE}"
        )
    points = [
        BacnetPoint(
            device=device,
            key=key_for(o),
            object_type=o.object_type,
            instance=o.instance,
            name=o.name[:100],
            units=o.units[:64],
            description=o.description[:255],
        )
        for o in new
    ]
    BacnetPoint.objects.bulk_create(points)
    have = set(device.node.sensors.values_list("key", flat=True))
    Sensor.objects.bulk_create(
        Sensor(node=device.node, key=p.key, name=(p.name or p.key)[:100], unit=_unit(p.units))
        for p in points
        if p.key not in have
    )
    return list(device.points.all())


# BACnet engineering units as the sensor's short unit; others are kept in the point's row.
UNITS = {
    "degrees-celsius": "°C",
    "degrees-fahrenheit": "°F",
    "percent": "%",
    "percent-relative-humidity": "%",
    "kilowatts": "kW",
    "watts": "W",
    "kilowatt-hours": "kWh",
    "bars": "bar",
    "kilopascals": "kPa",
    "liters-per-second": "l/s",
    "cubic-meters-per-hour": "m³/h",
}


def _unit(units: str) -> str:
    return UNITS.get(units, "")


def _where(device: BacnetDevice) -> str:
    return f"device {device.device_instance} at {device.address}"


def record_failure(device: BacnetDevice, error: str) -> dict:
    redis = get_redis()
    bacnet_status.mark_failed(device.node_id, error, time.time())
    failures_key = f"sensors:bacnet-failures:{device.node_id}"
    failures = redis.incr(failures_key)
    redis.expire(failures_key, 24 * 3600)
    log.warning("BACnet controller %s: %s (failure %d)", device.node.name, error, failures)
    if failures >= FAILURES_BEFORE_ALARM:
        raise_alarm(
            f"bacnet-device:{device.node_id}",
            f"BACnet controller {device.node.name} ({_where(device)}) not answering: {error}. "
            "Its readings are not being recorded and its outputs cannot be commanded.",
            source="bacnet",
        )
    return {"error": error, "failures": failures}


def record_result(
    device: BacnetDevice,
    points: list[BacnetPoint],
    result: Readings,
    mapped: list[BacnetPoint] | None = None,
) -> dict:
    """The controller answered: clear its alarm, raise/clear per-point alarms, ingest.
    `points` were read; `mapped` (default: the same) are all the device's points, so a point a
    COV subscription holds keeps its alarms."""
    mapped = points if mapped is None else mapped
    from sensors.ingest.processing import ingest_rows

    node_id = device.node_id
    redis = get_redis()
    redis.delete(f"sensors:bacnet-failures:{node_id}")
    bacnet_status.mark_answered(node_id, time.time())
    clear_alarm(f"bacnet-device:{node_id}")
    by_ref = {p.ref: p for p in points}
    values = {by_ref[ref].key: value for ref, value in result.values.items()}
    counts_key = f"sensors:bacnet-point-failures:{node_id}"
    prefix = f"bacnet-point:{node_id}:"
    pipe = redis.pipeline(transaction=False)
    for ref in result.errors:
        pipe.hincrby(counts_key, by_ref[ref].key, 1)
    if values:
        pipe.hdel(counts_key, *values)
    pipe.expire(counts_key, 24 * 3600)
    counts = pipe.execute()[: len(result.errors)]
    for (ref, error), failures in zip(result.errors.items(), counts, strict=True):
        point = by_ref[ref]
        log.warning("BACnet controller %s point %s: %s", device.node.name, ref, error)
        if failures >= FAILURES_BEFORE_ALARM:
            raise_alarm(
                prefix + point.key,
                f"BACnet controller {device.node.name} ({_where(device)}): {ref} "
                f"'{point.name}' not read: the controller answered '{error}'",
                source="bacnet",
            )
    keys = {p.key for p in mapped}
    _clear_except(prefix, keys, set(values))  # it reads again, or it left the map
    faulty = record_conditions(device, mapped, result.values, result.conditions)
    values = {key: value for key, value in values.items() if key not in faulty}
    if values:
        ingest_rows(node_id, [[int(time.time()), values]])
    return {"values": values, "errors": result.errors, "faults": sorted(faulty)}


def _clear_except(prefix: str, mapped: set[str], cleared: set[str]) -> None:
    """Clear the open alarms `prefix<key>` whose key is in `cleared` or no longer mapped."""
    open_keys = Alarm.objects.filter(key__startswith=prefix, cleared_at__isnull=True).values_list(
        "key", flat=True
    )
    for alarm_key in list(open_keys):
        key = alarm_key[len(prefix) :]
        if key in cleared or key not in mapped:
            clear_alarm(alarm_key)


def _raise_or_update(key: str, message: str) -> None:
    """Raise it, or give the open alarm the device's newest words (over-range -> open-loop)."""
    alarm, created = raise_alarm(key, message, source="bacnet")
    if not created and alarm.message != message:
        Alarm.objects.filter(pk=alarm.pk).update(message=message)


def record_conditions(
    device: BacnetDevice,
    points: list[BacnetPoint],
    values: dict[str, float],
    conditions: dict[str, Condition],
) -> set[str]:
    """Raise or clear each read point's fault and out-of-service alarms, in the controller's
    words. Returns the keys in fault, whose values are not to be recorded."""
    node_id = device.node_id
    by_ref = {p.ref: p for p in points}
    faulty, out = set(), set()
    for ref, value in values.items():
        point, condition = by_ref[ref], conditions.get(ref, bacnet_client.NORMAL)
        what = f"BACnet controller {device.node.name} ({_where(device)}): {ref} '{point.name}'"
        if condition.fault:
            faulty.add(point.key)
            _raise_or_update(
                f"bacnet-fault:{node_id}:{point.key}",
                f"{what} reports a fault: reliability '{condition.reliability}' (present value "
                f"{value:g}). Its value is not recorded while it does.",
            )
        if condition.out_of_service:
            out.add(point.key)
            _raise_or_update(
                f"bacnet-out-of-service:{node_id}:{point.key}",
                f"{what} is out of service at the controller: its present value ({value:g}) "
                "is set by hand there, not measured or commanded by its programme.",
            )
    keys = {p.key for p in points}
    read = {by_ref[ref].key for ref in values}
    _clear_except(f"bacnet-fault:{node_id}:", keys, read - faulty)
    _clear_except(f"bacnet-out-of-service:{node_id}:", keys, read - out)
    return faulty


def poll_device(device: BacnetDevice) -> dict:
    """Read every mapped point once. One poll of a controller at a time (a Redis lock): a poll
    still running when the next falls due is not doubled, so the rate stays bounded."""
    mapped = list(device.points.all()[:BACNET_MAX_POINTS_PER_DEVICE])
    if not mapped:
        return {"skipped": True}
    # Points a COV subscription holds are told to us on change (bacnet_cov_service.py); one
    # is still read when all are, so a controller that stops answering is still alarmed.
    covered = bacnet_status.covered_keys(device.node_id, time.time())
    points = [p for p in mapped if p.key not in covered] or mapped[:1]
    lock = get_redis().lock(
        f"sensors:bacnet-poll-lock:{device.node_id}", timeout=POLL_LOCK_TTL_S, blocking=False
    )
    if not lock.acquire(blocking=False):
        return {"busy": True}
    try:
        try:
            result = bacnet_client.read_present_values(
                device.address,
                [p.ref for p in points],
                local=local_address(),
                client_instance=client_instance(),
                timeout_s=device.timeout_s,
                deadline_s=min(float(settings.BMS_BACNET_POLL_DEADLINE_S), POLL_LOCK_TTL_S - 15),
            )
        except BacnetError as exc:
            return record_failure(device, str(exc))
        return record_result(device, points, result, mapped)
    finally:
        lock.release()
