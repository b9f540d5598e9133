"""Celery tasks of the sensors app (queue `ingest`, routed by module in settings).

- ingest_batch: one per HTTP request; the whole batch of rows for one node.
- check_silent_nodes (beat): alarm for nodes silent for 3× their interval; clear on return.
- poll_modbus_meters (beat): hands each due Modbus meter to its own short poll task.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime

from celery import shared_task
from django.conf import settings
from django.db import DatabaseError
from django.utils import timezone
from redis.exceptions import LockError, RedisError

from bms.redis import get_redis
from sensors import cache as _cache  # noqa: F401  (connects the invalidation signals)
from sensors import ingest_order, publish, state
from sensors.alarms import clear_alarm, in_startup_grace, raise_alarm
from sensors.models import Alarm, Node

log = logging.getLogger(__name__)

MODBUS_TIMEOUT_S = 2.0
MODBUS_FAILURES_BEFORE_ALARM = 2


# Transient failures (database locked or restarting, Redis briefly away) must not lose an
# accepted batch: retry it with backoff. Retrying is safe for the reason given below.
TRANSIENT_ERRORS = (DatabaseError, RedisError, LockError)


RETRY_BACKOFF_MAX_S = 60


@shared_task(
    bind=True,
    name="sensors.tasks.ingest_batch",
    ignore_result=True,
    acks_late=True,
    autoretry_for=TRANSIENT_ERRORS,
    retry_backoff=1,
    retry_backoff_max=RETRY_BACKOFF_MAX_S,
    retry_jitter=True,
    max_retries=10,
)
def ingest_batch(self, node_id: int, rows: list[list]) -> dict:
    """Rows `[t, {key: number}]` for one node -> sensors -> conversions -> feeds.

    Safe to redeliver or retry: feed slots are overwritten with the same values, and pulse
    counters and accumulating processes ignore points not newer than the last they processed.
    That is also why a node's batches run in the order they were accepted: a batch parks
    until its node's older ones have run (sensors/ingest_order.py). The batch leaves the
    web's outbox only once it has run.
    """
    from sensors.processing import ingest_rows, node_needs_order

    task_id = self.request.id
    try:
        # Only a node with pulse counters or accumulating processes waits for its older
        # batches: ordering a node that only logs would serialise it for nothing.
        if node_needs_order(node_id):
            waited_for = ingest_order.park_if_waiting(node_id, task_id)
            if waited_for is not None:
                # Parked: it runs when the node's older batch is done.
                log.info(
                    "ingest batch %s of node %s parked behind an older batch accepted %.1f s ago",
                    task_id,
                    node_id,
                    waited_for,
                )
                return {"parked": True}
        report = ingest_rows(node_id, rows)
    except TRANSIENT_ERRORS:
        # Celery retries it after a countdown of up to RETRY_BACKOFF_MAX_S: not lost.
        publish.hold_batch(task_id, RETRY_BACKOFF_MAX_S + publish.lost_after_s())
        raise
    ingest_order.finish(task_id, node_id)
    return {"rows": report.rows, "items": report.items, "created": report.created_sensors}


@shared_task(name="sensors.tasks.requeue_lost_batches", ignore_result=True)
def requeue_lost_batches() -> dict:
    """Beat: push again the ingest batches the broker lost (see sensors/publish.py)."""
    return publish.requeue_lost()


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
