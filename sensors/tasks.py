"""Celery tasks of the sensors app (queue `ingest`, routed by module in settings).

- drain_ingest_shard: processes the requests the web appended to a shard's streams
  (sensors/ingest_stream.py, sensors/ingest_drain.py); queued by the web and by
- kick_ingest_drains (beat): the safety net, and the ingest backlog alarm.
- check_silent_nodes (beat): alarm for nodes silent for 3× their interval; clear on return.
- poll_modbus_meters (beat): hands each due Modbus meter to its own short poll task.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from bms.redis import get_redis
from sensors import cache as _cache  # noqa: F401  (connects the invalidation signals)
from sensors import state
from sensors.alarms import clear_alarm, in_startup_grace, raise_alarm
from sensors.models import Alarm, Node

log = logging.getLogger(__name__)

MODBUS_TIMEOUT_S = 2.0
MODBUS_FAILURES_BEFORE_ALARM = 2


@shared_task(
    name="sensors.tasks.drain_ingest_shard",
    ignore_result=True,
    # The requests are in their streams until processed (sensors/ingest_drain.py): a drain task
    # lost with its worker is replaced by the next kick or beat's safety net, so the message
    # needs no redelivery.
    acks_late=False,
)
def drain_ingest_shard(shard: int) -> dict:
    """Process the shard's accepted requests: streams -> sensors -> conversions -> feeds."""
    from sensors.ingest_drain import drain_shard

    return drain_shard(shard).as_dict()


BACKLOG_ALARM_KEY = "ingest-backlog"


@shared_task(name="sensors.tasks.kick_ingest_drains", ignore_result=True, acks_late=False)
def kick_ingest_drains() -> dict:
    """Beat, every few seconds: the safety net of the web's kicks. Queue a drain for every shard
    with waiting requests and no drain holding it (a kicked task lost with its worker, a drain
    stopped by an outage or killed), and raise an alarm when the backlog passes
    BMS_INGEST_BACKLOG_ALARM requests (cleared below half of it)."""
    from sensors import ingest_stream as stream
    from sensors.ingest_drain import backlog

    redis = get_redis()
    per_shard = backlog()
    pipe = redis.pipeline(transaction=False)
    for shard in per_shard:
        pipe.exists(stream.lease_key(shard))
    held = dict(zip(per_shard, pipe.execute(), strict=True))
    kicked = [s for s, n in per_shard.items() if n and not held[s]]
    for shard in kicked:
        redis.set(stream.kick_key(shard), 1, ex=stream.KICK_TTL_S)
        stream.kick(shard)
    total = sum(per_shard.values())
    limit = int(getattr(settings, "BMS_INGEST_BACKLOG_ALARM", 20_000))
    if total > limit:
        raise_alarm(
            BACKLOG_ALARM_KEY,
            f"{total} ingest requests waiting (alarm above {limit}): workers are behind",
            source="system",
        )
    elif total < limit // 2:
        clear_alarm(BACKLOG_ALARM_KEY)
    return {"kicked": kicked, "backlog": total}


@shared_task(name="sensors.tasks.check_silent_nodes", ignore_result=True)
def check_silent_nodes(now: float | None = None) -> dict:
    now = time.time() if now is None else now
    seen = state.all_last_seen()
    open_keys = set(
        Alarm.objects.filter(key__startswith="node-silent:", cleared_at__isnull=True).values_list(
            "key", flat=True
        )
    )
    raised, cleared, waiting = [], [], []
    redis = get_redis()
    for node in Node.objects.filter(enabled=True).only("id", "name", "interval", "created"):
        # A node that never posted is measured from when it was registered.
        last = seen.get(node.id, node.created.timestamp())
        key = f"node-silent:{node.id}"
        if now - last > state.SILENT_FACTOR * node.interval:
            if key not in open_keys and in_startup_grace(now, state.SILENT_FACTOR * node.interval):
                waiting.append(node.id)  # just restarted: give it the chance to post first
                continue
            # The message says since when, not "for N s": it stays true while the alarm is
            # open (pages show the running duration from the timestamps).
            since = timezone.localtime(datetime.fromtimestamp(last, UTC))
            _, created = raise_alarm(
                key,
                f"Node {node.name} silent since {since:%a %d %b %H:%M:%S} "
                f"(expected every {node.interval} s)",
                source="node",
            )
            redis.sadd(state.SILENT_KEY, node.id)
            if created:
                raised.append(node.id)
        elif key in open_keys:
            clear_alarm(key)
            redis.srem(state.SILENT_KEY, node.id)
            cleared.append(node.id)
    return {"raised": raised, "cleared": cleared, "waiting": waiting}


@shared_task(name="sensors.tasks.poll_modbus_meters", ignore_result=True)
def poll_modbus_meters() -> list[int]:
    """Queue one poll task per meter that is due (its interval has passed since the last)."""
    redis = get_redis()
    queued = []
    meters = Node.objects.filter(enabled=True, protocol=Node.Protocol.MODBUS).exclude(
        modbus_host=""
    )
    for node in meters.only("id", "interval"):
        # The claim expires just before the next interval so beat jitter cannot skip a poll.
        claim_ms = max(node.interval * 1000 - 500, 500)
        if redis.set(f"sensors:modbus-due:{node.id}", 1, nx=True, px=claim_ms):
            poll_modbus_meter.delay(node.id)
            queued.append(node.id)
    return queued


@shared_task(
    name="sensors.tasks.poll_modbus_meter",
    ignore_result=True,
    acks_late=False,  # a poll is cheap to lose and must not pile up after a worker crash
    soft_time_limit=30,
    time_limit=40,
)
def poll_modbus_meter(node_id: int) -> dict:
    from sensors.modbus_poll import ModbusPollError, RegisterSpec, poll_meter
    from sensors.processing import ingest_rows

    node = Node.objects.filter(pk=node_id, enabled=True).first()
    if node is None or not node.modbus_host:
        return {"skipped": True}
    specs = [
        RegisterSpec(r.key, r.address, r.function, r.data_type, r.word_order, r.scale)
        for r in node.registers.all()
    ]
    if not specs:
        return {"skipped": True}
    alarm_key = f"modbus-meter:{node.pk}"
    failures_key = f"sensors:modbus-failures:{node.pk}"
    redis = get_redis()
    timeout = getattr(settings, "BMS_MODBUS_TIMEOUT_S", MODBUS_TIMEOUT_S)
    try:
        values = poll_meter(
            node.modbus_host, node.modbus_port, node.modbus_device_id, specs, timeout_s=timeout
        )
    except (ModbusPollError, OSError) as exc:
        failures = redis.incr(failures_key)
        redis.expire(failures_key, 24 * 3600)
        log.warning("Modbus meter %s: %s (failure %d)", node.name, exc, failures)
        if failures >= MODBUS_FAILURES_BEFORE_ALARM:
            raise_alarm(
                alarm_key,
                f"Modbus meter {node.name} ({node.modbus_host}:{node.modbus_port}) "
                f"not answering: {exc}",
                source="modbus",
            )
        return {"error": str(exc), "failures": failures}
    redis.delete(failures_key)
    clear_alarm(alarm_key)
    if values:
        ingest_rows(node.pk, [[int(time.time()), values]])
    return {"values": values}
