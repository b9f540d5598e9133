"""Step 1 of ingest, in the web: append an accepted request to its node's Redis Stream.

The web answers only once the request is in Redis (one MULTI/EXEC round trip: XADD, mark the
node ready in its shard, take the shard's kick flag). Workers drain the streams
(sensors/ingest_drain.py). No Celery message is built per request: the web queues a drain task
through Celery's public API only when its shard has none pending (the kick flag, SET NX with a
TTL), and one drain task takes many requests.

Keys (all on the app's Redis, bms.redis):
- `sensors:ingest:stream:<node id>`: one stream per node, so one node's requests stay in the
  order they were accepted and a drain can take a bounded slice of each node (fairness). An
  entry is `{"r": "<JSON rows [[t, {key: number}], ...]>"}`; it is deleted once its points are
  in the feed buffer. Nothing trims it (no MAXLEN): memory is bounded by the per-node throttle
  (bms/throttle.py) and watched by the backlog alarm (`BMS_INGEST_BACKLOG_ALARM`).
- `sensors:ingest:ready:<shard>`: the set of nodes of the shard (`node id % BMS_INGEST_SHARDS`)
  whose stream has entries not yet processed.
- `sensors:ingest:kick:<shard>`: a drain task for the shard is queued or running.
- `sensors:ingest:lease:<shard>`: the drain that holds the shard (one at a time, so a node's
  requests are processed in order).
"""

from __future__ import annotations

import json
import logging

from django.conf import settings

from bms.redis import REDIS_FAILURES, get_redis

log = logging.getLogger(__name__)

STREAM_PREFIX = "sensors:ingest:stream:"
READY_PREFIX = "sensors:ingest:ready:"
KICK_PREFIX = "sensors:ingest:kick:"
LEASE_PREFIX = "sensors:ingest:lease:"
GROUP = "drain"  # the one consumer group of every node stream
FIELD = "r"
# A kicked drain that never ran (its worker was killed before it started) stops holding the
# flag after this long; beat's safety net (sensors.tasks.kick_ingest_drains) does not wait for it.
KICK_TTL_S = 30


def shards() -> int:
    return int(getattr(settings, "BMS_INGEST_SHARDS", 8))


def shard_of(node_id: int) -> int:
    return int(node_id) % shards()


def stream_key(node_id: int) -> str:
    return f"{STREAM_PREFIX}{int(node_id)}"


def node_of(stream: bytes | str) -> int:
    name = stream.decode() if isinstance(stream, bytes) else stream
    return int(name.removeprefix(STREAM_PREFIX))


def ready_key(shard: int) -> str:
    return f"{READY_PREFIX}{int(shard)}"


def kick_key(shard: int) -> str:
    return f"{KICK_PREFIX}{int(shard)}"


def lease_key(shard: int) -> str:
    return f"{LEASE_PREFIX}{int(shard)}"


def append(node_id: int, rows: list[list]) -> None:
    """Store one accepted request for node_id (rows `[t, {key: number}]`), durably, in order.

    Raises a Redis error (the view answers 503) when Redis cannot take it; once this returns
    the request is in Redis and will be processed.
    """
    shard = shard_of(node_id)
    pipe = get_redis().pipeline(transaction=True)
    pipe.xadd(stream_key(node_id), {FIELD: json.dumps(rows, separators=(",", ":"))})
    pipe.sadd(ready_key(shard), node_id)
    pipe.set(kick_key(shard), 1, nx=True, ex=KICK_TTL_S)
    kicked = pipe.execute()[-1]
    if kicked:
        kick(shard)


def kick(shard: int) -> None:
    """Queue a drain task for the shard (Celery's public API). A failure is logged, not raised:
    the request is stored already, and beat's safety net queues a drain within seconds."""
    from sensors.tasks import drain_ingest_shard

    try:
        drain_ingest_shard.apply_async((shard,), expires=KICK_TTL_S)
    except Exception as exc:  # kombu's OperationalError and friends: logged, beat retries
        log.warning("could not queue a drain for ingest shard %s: %s", shard, exc)
        try:
            get_redis().delete(kick_key(shard))  # so the next request tries again
        except REDIS_FAILURES as redis_exc:
            log.warning("could not clear the kick flag of shard %s: %s", shard, redis_exc)
