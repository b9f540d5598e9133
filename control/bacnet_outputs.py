"""Weather-compensated plants whose output is a BACnet controller's analog-output or
analog-value (the old BMS's mixing valve or boiler set point): written at our priority every
tick, confirmed by read-back (present value, and our priority the one in force), and handed
back (NULL at our priority) once the plant no longer drives it, so the controller's own logic
has the point again. Called by control/outputs.py, which audits and alarms them as it does the
holding registers.

Redis: control:bacnet-analogue, hash plant id -> JSON of the output we hold (controller,
object, priority, last value), so it is relinquished even after the plant's weather
compensation was switched off, its output moved, or the worker restarted.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

from django.conf import settings
from django.db import DatabaseError

from control import config_cache
from control.drivers import bacnet
from control.drivers.bacnet import OutputTarget, PointResult
from control.engine.specs import OutputDecision, WeatherSpec
from control.models import AnalogueCommand, HeatingPlant
from control.runtime import PREFIX
from core.redis import get_redis

log = logging.getLogger(__name__)

HELD_KEY = f"{PREFIX}:bacnet-analogue"


def where(w: WeatherSpec) -> str:
    return (
        f"BACnet controller {w.bacnet_name} ({w.bacnet_address}) {w.bacnet_ref} at priority "
        f"{w.bacnet_priority}"
    )


def _held(pid: int, w: WeatherSpec, out: OutputDecision) -> dict:
    return {
        "address": w.bacnet_address,
        "ref": w.bacnet_ref,
        "priority": w.bacnet_priority,
        "timeout_s": w.bacnet_timeout_s,
        "value": round(out.value, 2),
        "unit": out.unit,
    }


def write(
    outputs: dict[int, tuple[WeatherSpec, OutputDecision]],
) -> dict[int, PointResult]:
    """Write each plant's value at its priority and read it back; remember what we hold."""
    targets = [
        OutputTarget(
            pid, w.bacnet_address, w.bacnet_ref, w.bacnet_priority, w.bacnet_timeout_s,
            round(out.value, 2),
        )
        for pid, (w, out) in outputs.items()
    ]  # fmt: skip
    if outputs:
        # Before the write: a write that reached the controller but was not confirmed still
        # holds our slot, and must be handed back if the plant lets go of it.
        get_redis().hset(
            HELD_KEY,
            mapping={str(pid): json.dumps(_held(pid, w, out)) for pid, (w, out) in outputs.items()},
        )
    return bacnet.apply(
        targets,
        deadline_s=settings.BMS_CONTROL_DEVICE_DEADLINE,
        timeout_s=settings.BMS_CONTROL_DEVICE_TIMEOUT,
    )


def release_unheld(current: dict[int, WeatherSpec], now: datetime, offline: str) -> int:
    """Relinquish each output we hold that no plant drives now (or that moved to another
    object); audited once confirmed, retried each tick until then. Returns how many were
    handed back."""
    redis = get_redis()
    held = {int(pid): json.loads(raw) for pid, raw in redis.hgetall(HELD_KEY).items()}
    gone = {}
    for pid, info in held.items():
        w = current.get(pid)
        if w is None or (w.bacnet_address, w.bacnet_ref, w.bacnet_priority) != (
            info["address"], info["ref"], info["priority"],
        ):  # fmt: skip
            gone[pid] = info
    if not gone:
        return 0
    targets = [
        OutputTarget(pid, i["address"], i["ref"], i["priority"], i["timeout_s"], None)
        for pid, i in gone.items()
    ]
    results = bacnet.apply(
        targets,
        deadline_s=settings.BMS_CONTROL_DEVICE_DEADLINE,
        timeout_s=settings.BMS_CONTROL_DEVICE_TIMEOUT,
    )
    done = [pid for pid, res in results.items() if res.confirmed]
    for pid, res in results.items():
        if res.error:
            log.warning("BACnet output of plant %d not handed back yet: %s", pid, res.error)
    if not done:
        return 0
    # Compare-and-delete is not needed: only the control tick (one at a time) writes this hash.
    redis.hdel(HELD_KEY, *[str(pid) for pid in done])
    _audit(done, gone, results, now, offline)
    return len(done)


def _audit(
    done: list[int], gone: dict[int, dict], results: dict[int, PointResult], now: datetime,
    offline: str,
) -> None:  # fmt: skip
    """One "Released" row per output handed back; while the database is away (or fails here)
    queued in Redis and written by the first tick that has it (control/runner.py _catch_up, which
    also drops the rows of a plant deleted meanwhile), as the holding registers' rows are."""
    rows = {
        pid: AnalogueCommand(
            plant_id=pid,
            value=gone[pid]["value"],
            unit=gone[pid]["unit"],
            reason=f"Released: NULL at priority {gone[pid]['priority']} of {gone[pid]['ref']} "
            f"({gone[pid]['address']}), so the controller's own logic has it again",
            strategy="released",
            requested_at=now,
            sent_at=_at(results[pid].sent_at),
            confirmed_at=_at(results[pid].confirmed_at),
        )
        for pid in done
    }
    if not offline:
        try:
            plants = set(HeatingPlant.objects.filter(pk__in=done).values_list("pk", flat=True))
            # A deleted plant has no audit trail to add to.
            AnalogueCommand.objects.bulk_create(r for pid, r in rows.items() if pid in plants)
            return
        except DatabaseError:
            log.exception("control: cannot audit the BACnet outputs handed back: queued")
    for row in rows.values():
        row.pk = None
        log.warning(
            "output of plant %d (database unavailable, queued): %s", row.plant_id, row.reason
        )
    config_cache.queue_analogue(list(rows.values()))


def _at(value: float | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(value, UTC)
