"""Queue an ingest batch from the web process in one Redis round trip.

`ingest_batch.apply_async` costs ~0.5 ms a call on this machine, most of it not I/O: kombu's
Redis transport builds a new redis client (and its table of ~170 response callbacks) for
every publish, and Celery walks its layered configuration for each option. On the single-post
path that is a quarter of the request. Here Celery still builds the task message (its own
`amqp.as_task_v2`, the documented protocol 2, the same headers and body apply_async sends);
we add kombu's Redis envelope (base64 body, delivery tag, anonymous exchange routed by queue
name) and LPUSH it on the process's pooled Redis connection. The worker cannot tell the
difference (tests/sensors/test_publish.py compares both messages and runs one on a real
worker).

Only when the broker is the Redis that bms.redis talks to; any other broker takes the
ordinary apply_async path.

The outbox. kombu's Redis transport takes a message with BRPOP, which removes it from the
queue on the server, and only then records it in its `unacked` hash. A worker killed between
the two (the reply is in its socket, or Redis hands a just-pushed message to a consumer whose
socket is already dead) loses the message: the kill-9 fault test lost one batch of 20 in most
runs that way (150 posts answered 202, 149 tasks ever received). So every batch published here
is also kept in an outbox hash until its task has run (`ingest_order.finish`); the beat task
`sensors.tasks.requeue_lost_batches` pushes again a batch that is in neither the queue nor
kombu's unacked hash nor held for a retry (`requeue_lost`). A batch running twice is safe
(see sensors.tasks.ingest_batch); a batch lost is not.

Per-node order: each published batch is also entered in its node's `pending_key` sorted set
until its task has run, so that sensors/ingest_order.py can run a node's batches in the order
they were accepted.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import socket
import time
import uuid
from functools import lru_cache

import redis
from django.conf import settings

from bms.redis import get_redis, redis_script

log = logging.getLogger(__name__)

TASK_NAME = "sensors.tasks.ingest_batch"
QUEUE = "ingest"
OUTBOX_KEY = "sensors:ingest:outbox"  # hash task id -> the message as pushed
OUTBOX_DUE_KEY = "sensors:ingest:outbox:due"  # zset task id -> when to check it next
OUTBOX_REQUEUED_KEY = "sensors:ingest:outbox:requeued"  # hash task id -> times pushed again
UNACKED_KEY = "unacked"  # kombu's Redis transport: delivery tag -> message being worked on
UNACKED_INDEX_KEY = "unacked_index"  # kombu's: delivery tag -> when a worker took it (unix s)
# A batch taken by a worker within this long before a Redis restart is not taken back (uptime
# is in whole seconds, and the worker's clock may differ a little from ours).
RESTART_MARGIN_S = 5.0
PENDING_PREFIX = "sensors:ingest:pending:"  # zset per node: task id -> accepted at (µs)
PARKED_KEY = "sensors:ingest:parked"  # set of task ids waiting for an older batch of their node
MAX_REQUEUES = 10  # a batch pushed again this often is poison: dropped with an error
CHECK_BATCH = 200  # outbox entries looked at per requeue run
# Each look searches the ingest queue (LPOS) inside a script, which blocks Redis while it runs.
# With a long backlog that search over thousands of ~10 KB messages stalled Redis for seconds
# (bench/ingest.py: socket timeouts, 500s). A batch cannot be lost while a backlog stands in
# front of it being worked through, so the looks wait until the queue is short again.
MAX_QUEUE_TO_SCAN = 200


@lru_cache(maxsize=1)
def _constants() -> tuple[str, list]:
    """(origin, timelimit header) as apply_async would set them, computed once."""
    from sensors.tasks import ingest_batch

    conf = ingest_batch.app.conf
    # Per-task limits win over the global ones, exactly as Celery's send_task picks them.
    hard = ingest_batch.time_limit if ingest_batch.time_limit is not None else conf.task_time_limit
    soft = (
        ingest_batch.soft_time_limit
        if ingest_batch.soft_time_limit is not None
        else conf.task_soft_time_limit
    )
    return f"gen{os.getpid()}@{socket.gethostname()}", [hard, soft]


def direct_publish_possible() -> bool:
    return _broker_is_our_redis(settings.CELERY_BROKER_URL, settings.REDIS_URL)


@lru_cache(maxsize=4)
def _broker_is_our_redis(broker_url: str, redis_url: str) -> bool:
    return broker_url == redis_url and broker_url.startswith(("redis://", "rediss://"))


def build_message(node_id: int, rows: list[list], task_id: str | None = None) -> bytes:
    """The broker message for ingest_batch(node_id, rows), as kombu's Redis transport writes it."""
    from sensors.tasks import ingest_batch

    task_id = task_id or str(uuid.uuid4())
    origin, timelimit = _constants()
    message = ingest_batch.app.amqp.as_task_v2(
        task_id,
        TASK_NAME,
        args=(node_id, rows),
        kwargs={},
        argsrepr="",
        kwargsrepr="",
        origin=origin,
        ignore_result=True,
        time_limit=timelimit[0],
        soft_time_limit=timelimit[1],
    )
    body = json.dumps(message.body, separators=(",", ":")).encode()
    properties = dict(message.properties)
    properties.update(
        delivery_mode=2,  # persistent
        delivery_info={"exchange": "", "routing_key": QUEUE},
        priority=0,
        body_encoding="base64",
        delivery_tag=str(uuid.uuid4()),
    )
    envelope = {
        "body": base64.b64encode(body).decode(),
        "content-encoding": "utf-8",
        "content-type": "application/json",
        "headers": message.headers,
        "properties": properties,
    }
    return json.dumps(envelope, separators=(",", ":")).encode()


def publish_ingest_batch(node_id: int, rows: list[list]) -> None:
    """Queue one ingest_batch task. Raises redis.RedisError (or kombu's OperationalError on the
    apply_async path) when the broker cannot take it."""
    if not direct_publish_possible():
        from sensors.tasks import ingest_batch

        ingest_batch.apply_async((node_id, rows), argsrepr="", kwargsrepr="")
        return
    task_id = str(uuid.uuid4())
    message = build_message(node_id, rows, task_id)
    now = time.time()
    # One script, atomic like a MULTI but a single reply to parse on the hot path: the batch
    # is in the queue, the outbox and its node's order, or in none of them (then a 503).
    redis_script(_PUBLISH)(
        keys=[QUEUE, OUTBOX_KEY, OUTBOX_DUE_KEY, pending_key(node_id)],
        args=[message, task_id, now + lost_after_s(), int(now * 1_000_000)],
    )


# KEYS: queue, outbox hash, outbox due zset, the node's pending zset.
# ARGV: message, task id, next look at (unix s), accepted at (µs).
_PUBLISH = """
redis.call('LPUSH', KEYS[1], ARGV[1])
redis.call('HSET', KEYS[2], ARGV[2], ARGV[1])
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[2])
redis.call('ZADD', KEYS[4], ARGV[4], ARGV[2])
return 1
"""


def pending_key(node_id: int) -> str:
    """The node's batches not yet run, by acceptance time (sensors/ingest_order.py)."""
    return f"{PENDING_PREFIX}{int(node_id)}"


def fresh_delivery(message: bytes) -> bytes:
    """The same message under a new delivery tag, so that kombu's unacked entries of two
    copies of a batch never collide."""
    envelope = json.loads(message)
    envelope["properties"]["delivery_tag"] = str(uuid.uuid4())
    return json.dumps(envelope, separators=(",", ":")).encode()


def lost_after_s() -> float:
    """How long after a look a batch may go unseen before the next look (settings)."""
    return float(getattr(settings, "BMS_INGEST_LOST_AFTER_S", 30))


def hold_batch(task_id: str | None, seconds: float) -> None:
    """The task failed and Celery will retry it after a countdown, as a new message the worker
    holds under another delivery tag: do not take the batch for lost meanwhile."""
    if task_id:
        get_redis().zadd(OUTBOX_DUE_KEY, {task_id: time.time() + seconds}, xx=True)


# Atomically: still queued (searched from the oldest end) or in kombu's unacked hash -> look
# again later; gone from the outbox or replaced meanwhile -> nothing; else push it again under
# a fresh delivery tag. Returns 1 pushed, 0 still alive, -1 dropped as poison.
# An unacked entry delivered before this Redis server started (ARGV[7]) was held by a worker
# whose connection died in the restart, and AOF kept the entry: kombu would restore it only
# after its visibility timeout (300 s). It is taken back now, as kombu's restore would do; if
# that worker is in fact still running the batch, the batch runs twice, which is safe.
_REQUEUE = """
local id, msg, tag, fresh, due, max = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], tonumber(ARGV[6])
if redis.call('HGET', KEYS[3], id) ~= msg then return 0 end
local held = redis.call('HEXISTS', KEYS[2], tag) == 1
if held then
  local since = redis.call('ZSCORE', KEYS[8], tag)
  if since and tonumber(since) < tonumber(ARGV[7]) then
    redis.call('HDEL', KEYS[2], tag)
    redis.call('ZREM', KEYS[8], tag)
    held = false
  end
end
if held or redis.call('LPOS', KEYS[1], msg, 'RANK', -1) then
  redis.call('ZADD', KEYS[4], due, id)
  return 0
end
-- A parked batch (waiting for an older one of its node) is not failing: look at it again by
-- pushing it, without counting toward poison.
if redis.call('SREM', KEYS[7], id) == 0 and redis.call('HINCRBY', KEYS[5], id, 1) > max then
  redis.call('HDEL', KEYS[3], id)
  redis.call('ZREM', KEYS[4], id)
  redis.call('HDEL', KEYS[5], id)
  redis.call('ZREM', KEYS[6], id)
  return -1
end
redis.call('LPUSH', KEYS[1], fresh)
redis.call('HSET', KEYS[3], id, fresh)
redis.call('ZADD', KEYS[4], due, id)
return 1
"""


def requeue_lost(now: float | None = None) -> dict:
    """Push again every outbox batch due for a look that no queue, worker or retry holds."""
    client = get_redis()
    now = time.time() if now is None else now
    if client.llen(QUEUE) > MAX_QUEUE_TO_SCAN:
        return {"requeued": 0, "alive": 0, "dropped": 0, "deferred": True}
    script = redis_script(_REQUEUE)
    before_restart = _server_started_at(client) - RESTART_MARGIN_S
    pushed = alive = dropped = 0
    for raw_id in client.zrangebyscore(OUTBOX_DUE_KEY, "-inf", now, start=0, num=CHECK_BATCH):
        task_id = raw_id.decode()
        message = client.hget(OUTBOX_KEY, task_id)
        if message is None:  # done between the two reads
            client.zrem(OUTBOX_DUE_KEY, task_id)
            continue
        envelope = json.loads(message)
        node_id = message_node_id(envelope)
        tag = envelope["properties"]["delivery_tag"]
        fresh = fresh_delivery(message)
        outcome = script(
            keys=[
                QUEUE,
                UNACKED_KEY,
                OUTBOX_KEY,
                OUTBOX_DUE_KEY,
                OUTBOX_REQUEUED_KEY,
                pending_key(node_id),
                PARKED_KEY,
                UNACKED_INDEX_KEY,
            ],
            args=[task_id, message, tag, fresh, now + lost_after_s(), MAX_REQUEUES, before_restart],
        )
        if outcome == 1:
            pushed += 1
            log.warning("ingest batch %s was lost by the broker: queued again", task_id)
        elif outcome == -1:
            dropped += 1
            log.error(
                "ingest batch %s queued %d times without running: dropped", task_id, MAX_REQUEUES
            )
        else:
            alive += 1
    return {"requeued": pushed, "alive": alive, "dropped": dropped}


def _server_started_at(client) -> float:
    """When the Redis server started, by our clock, as kombu's workers stamp their deliveries
    (0 if INFO is refused: nothing is taken back)."""
    try:
        return time.time() - float(client.info("server")["uptime_in_seconds"])
    except (KeyError, ValueError, redis.ResponseError) as exc:
        log.warning("no Redis uptime (%s): batches held across a restart wait for kombu", exc)
        return 0.0


def message_node_id(envelope: dict) -> int:
    """The node id of an ingest_batch message (the first task argument) from its envelope."""
    args, _kwargs, _embed = json.loads(base64.b64decode(envelope["body"]))
    return int(args[0])
