"""Modbus meters as the site has them: register maps applied to nodes, polls of TCP meters and of
RS-485 buses (several meters polled in turn under one bus lock), and their alarms.

Alarms: `modbus-meter:<node id>` when the meter answers nothing for two polls in a row;
`modbus-register:<node id>:<key>` when one register fails two polls in a row while the rest of
the meter reads (it names the meter, the register and what the meter answered), cleared when the
register reads again.
"""

from __future__ import annotations

import logging
import time

from django.conf import settings
from django.db import transaction
from redis.exceptions import LockError

from alarms.lifecycle import clear_alarm, raise_alarm
from alarms.models import Alarm
from core.redis import get_redis
from sensors.devices.modbus_maps import validate_register_map
from sensors.devices.modbus_poll import (
    MeterReader,
    ModbusPollError,
    PollResult,
    RegisterSpec,
    poll_meter,
    serial_client,
)
from sensors.models import ModbusBus, ModbusRegister, Node, Sensor

log = logging.getLogger(__name__)

FAILURES_BEFORE_ALARM = 2
METER_DEADLINE_S = 8.0  # one meter's poll; a bus of 32 meters stays inside its task's limit
BUS_LOCK_TTL_S = 290  # just under the bus task's hard time limit (sensors/tasks.py)


def specs_for(node: Node) -> list[RegisterSpec]:
    return [
        RegisterSpec(r.key, r.address, r.function, r.data_type, r.word_order, r.scale, r.offset)
        for r in node.registers.all()
    ]


@transaction.atomic
def apply_register_map(node: Node, rows: list[dict], max_block: int | None = None) -> int:
    """Replace the node's register map with `rows` (validated here), and give each register an
    input (a Sensor with its name and unit) unless one exists. Returns the register count."""
    clean = validate_register_map(rows)
    node.registers.all().delete()
    ModbusRegister.objects.bulk_create(
        ModbusRegister(
            node=node,
            key=row["key"],
            address=row["address"],
            function=row["function"],
            data_type=row["data_type"],
            word_order=row["word_order"],
            scale=row["scale"],
            offset=row["offset"],
        )
        for row in clean
    )
    existing = set(node.sensors.values_list("key", flat=True))
    Sensor.objects.bulk_create(
        Sensor(node=node, key=row["key"], name=row["name"][:100], unit=row["unit"])
        for row in clean
        if row["key"] not in existing
    )
    if max_block is not None and node.modbus_max_block != max_block:
        node.modbus_max_block = max_block
        node.save(update_fields=["modbus_max_block"])
    return len(clean)


def _timeout() -> float:
    return float(settings.BMS_MODBUS_TIMEOUT_S)


def _retries() -> int:
    return int(settings.BMS_MODBUS_RETRIES)


def _where(node: Node) -> str:
    if node.modbus_bus_id:
        return f"bus {node.modbus_bus.name}, unit {node.modbus_device_id}"
    return f"{node.modbus_host}:{node.modbus_port}, unit {node.modbus_device_id}"


def record_failure(node: Node, error: str) -> dict:
    redis = get_redis()
    failures_key = f"sensors:modbus-failures:{node.pk}"
    failures = redis.incr(failures_key)
    redis.expire(failures_key, 24 * 3600)
    log.warning("Modbus meter %s: %s (failure %d)", node.name, error, failures)
    if failures >= FAILURES_BEFORE_ALARM:
        raise_alarm(
            f"modbus-meter:{node.pk}",
            f"Modbus meter {node.name} ({_where(node)}) not answering: {error}",
            source="modbus",
        )
    return {"error": error, "failures": failures}


def record_result(node: Node, specs: list[RegisterSpec], result: PollResult) -> dict:
    """The meter answered: clear its alarm, raise/clear per-register alarms, ingest the values."""
    from sensors.ingest.processing import ingest_rows

    redis = get_redis()
    redis.delete(f"sensors:modbus-failures:{node.pk}")
    clear_alarm(f"modbus-meter:{node.pk}")
    by_key = {spec.key: spec for spec in specs}
    counts_key = f"sensors:modbus-register-failures:{node.pk}"
    prefix = f"modbus-register:{node.pk}:"
    pipe = redis.pipeline(transaction=False)
    for key in result.errors:
        pipe.hincrby(counts_key, key, 1)
    if result.values:
        pipe.hdel(counts_key, *result.values)
    pipe.expire(counts_key, 24 * 3600)
    counts = pipe.execute()[: len(result.errors)]
    for (key, error), failures in zip(result.errors.items(), counts, strict=True):
        log.warning("Modbus meter %s register %s: %s", node.name, key, error)
        if failures >= FAILURES_BEFORE_ALARM:
            spec = by_key[key]
            raise_alarm(
                prefix + key,
                f"Modbus meter {node.name} ({_where(node)}): register {spec.describe()} "
                f"not read: {error}",
                source="modbus",
            )
    open_keys = Alarm.objects.filter(key__startswith=prefix, cleared_at__isnull=True).values_list(
        "key", flat=True
    )
    for alarm_key in list(open_keys):
        register = alarm_key[len(prefix) :]
        if register in result.values or register not in by_key:
            clear_alarm(alarm_key)  # it reads again, or it left the map
    if result.values:
        ingest_rows(node.pk, [[int(time.time()), result.values]])
    return {"values": result.values, "errors": result.errors, "requests": result.requests}


def poll_tcp_node(node: Node) -> dict:
    specs = specs_for(node)
    if not specs:
        return {"skipped": True}
    try:
        result = poll_meter(
            node.modbus_host,
            node.modbus_port,
            node.modbus_device_id,
            specs,
            timeout_s=_timeout(),
            max_block=node.modbus_max_block,
            retries=_retries(),
            deadline_s=METER_DEADLINE_S,
        )
    except (ModbusPollError, OSError) as exc:
        return record_failure(node, str(exc))
    return record_result(node, specs, result)


def bus_lock_key(bus_id: int) -> str:
    return f"sensors:modbus-bus-lock:{bus_id}"


def poll_bus(bus: ModbusBus, node_ids: list[int] | None = None) -> dict:
    """Poll the bus's meters in turn over one serial client, holding the bus lock (a Redis lock,
    so no other worker or command talks on the line at the same time). A bus already held is
    skipped: its previous poll is still running and the next beat comes soon."""
    lock = get_redis().lock(bus_lock_key(bus.pk), timeout=BUS_LOCK_TTL_S, blocking=False)
    if not lock.acquire(blocking=False):
        return {"busy": True}
    try:
        meters = bus.meters.filter(enabled=True, protocol=Node.Protocol.MODBUS).select_related(
            "modbus_bus"
        )
        if node_ids is not None:
            meters = meters.filter(pk__in=node_ids)
        client = serial_client(
            bus.port,
            baudrate=bus.baudrate,
            parity=bus.parity,
            stopbits=bus.stopbits,
            timeout_s=bus.timeout,
        )
        report: dict[int, dict] = {}
        try:
            opened = client.connect()
            for node in meters.order_by("modbus_device_id"):
                specs = specs_for(node)
                if not specs:
                    continue
                if not opened:
                    report[node.pk] = record_failure(node, f"cannot open {bus.port}")
                    continue
                reader = MeterReader(
                    client,
                    node.modbus_device_id,
                    max_block=node.modbus_max_block,
                    retries=_retries(),
                    deadline_s=METER_DEADLINE_S,
                )
                try:
                    result = reader.read(specs)
                except (ModbusPollError, OSError) as exc:
                    report[node.pk] = record_failure(node, str(exc))
                    continue
                report[node.pk] = record_result(node, specs, result)
        finally:
            client.close()
        return {"meters": report}
    finally:
        try:
            lock.release()
        except LockError:  # the lock expired under a very long poll: nothing left to release
            log.warning("Modbus bus %s: its lock had expired before the poll ended", bus.name)
