"""Step 1 of ingest, in the web: append an accepted request to its node's Redis Stream.

The web answers only once the request is in Redis: one script, one round trip (count the
request against its node's throttle allowance, and if it is allowed, for each node of the
request: XADD, mark the node ready in its shard, take the shard's kick flag; and for a batch
with nothing skipped, whether its sender's input-error alarm is due to clear). Workers drain the streams
(sensors/ingest/drain.py). No Celery message is built per request: the web queues a drain task
through Celery's public API only when its shard has none pending (the kick flag, SET NX with a
TTL), and one drain task takes many requests.

Keys (all on the app's Redis, core.redis):
- `sensors:ingest:stream:<node id>`: one stream per node, so one node's requests stay in the
  order they were accepted and a drain can take a bounded slice of each node (fairness). An
  entry is `{"r": "<JSON rows [[t, {key: number}], ...]>"}`; it is deleted once its points are
  in the feed buffer. Nothing trims it (no MAXLEN): memory is bounded by the per-node throttle
  (core/throttle.py) and watched by the backlog alarm (`BMS_INGEST_BACKLOG_ALARM`).
- `sensors:ingest:ready:<shard>`: the set of nodes of the shard (`node id % BMS_INGEST_SHARDS`)
  whose stream has entries not yet processed.
- `sensors:ingest:kick:<shard>`: a drain task for the shard is queued or running.
- `sensors:ingest:lease:<shard>`: the drain that holds the shard (one at a time, so a node's
  requests are processed in order).
- `sensors:ingest:bell:<shard>`: a list of at most one item, pushed with every append to the
  shard: the drain holding the shard blocks on it (BLPOP with a timeout) between passes, so it
  takes each request as it arrives instead of polling (issue #29).
- `sensors:ingest:done:<node id>`: the id of the node's last entry whose points are in the
  feed buffer, written in the same transaction as those points and the input processes' state
  (feeds/processes/run.py). A redelivered entry at or before it is acknowledged unprocessed:
  each request is counted once, whatever times its readings carry.
"""

from __future__ import annotations

import json
import logging
from typing import NamedTuple

from celery import current_app
from django.conf import settings

from core import throttle
from core.redis import REDIS_FAILURES, durably, get_redis, redis_script
from sensors.ingest import input_errors

log = logging.getLogger(__name__)

STREAM_PREFIX = "sensors:ingest:stream:"
READY_PREFIX = "sensors:ingest:ready:"
KICK_PREFIX = "sensors:ingest:kick:"
LEASE_PREFIX = "sensors:ingest:lease:"
DONE_PREFIX = "sensors:ingest:done:"
BELL_PREFIX = "sensors:ingest:bell:"
GROUP = "drain"  # the one consumer group of every node stream
FIELD = "r"
# A kicked drain that never ran (its worker was killed before it started) stops holding the
# flag after this long; beat's safety net (sensors.tasks.kick_ingest_drains) does not wait for it.
KICK_TTL_S = 30


def shards() -> int:
    return int(settings.BMS_INGEST_SHARDS)


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


def bell_key(shard: int) -> str:
    return f"{BELL_PREFIX}{int(shard)}"


def done_key(node_id: int) -> str:
    return f"{DONE_PREFIX}{int(node_id)}"


NEWEST_PER_CALL = 1000  # streams asked in one pipeline (bounds a reply's size)


def newest_accepted(node_ids: list[int]) -> dict[int, float]:
    """When the web accepted each node's newest request still in its stream (not yet drained
    and acknowledged), as unix seconds: the time part of the entry's id, which Redis gave it
    at XADD. Nodes with an empty stream are left out."""
    found: dict[int, float] = {}
    client = get_redis()
    for start in range(0, len(node_ids), NEWEST_PER_CALL):
        chunk = node_ids[start : start + NEWEST_PER_CALL]
        pipe = client.pipeline(transaction=False)
        for node_id in chunk:
            pipe.xrevrange(stream_key(node_id), count=1)
        for node_id, entries in zip(chunk, pipe.execute(), strict=True):
            if entries:
                entry_id = entries[0][0]
                ms = (entry_id.decode() if isinstance(entry_id, bytes) else entry_id).split("-")[0]
                found[node_id] = int(ms) / 1000
    return found


# The throttle count (core/throttle.py's COUNT_LUA), the append, and whether the sender's input
# errors are due to close (sensors/ingest/input_errors.py's DUE_LUA, asked for a batch with
# nothing skipped) in one script: an accepted post costs the web one round trip. Nothing is
# stored, and nothing asked, when the count is over the limit.
# KEYS: the throttle counter (or a placeholder), the open input errors' set, then per node:
# stream, ready set, kick flag, bell (rung only when empty, so it holds one item at most whether
# or not a drain listens).
# ARGV: the limit ('' = not charged), the counter's TTL, the kick TTL, the input-error subject
# ('' = none) and its cutoff, then per node: id, rows.
# Returns {count, due (1 = close the subject's input errors), kicked per node (1 = this request
# took the shard's kick flag)}.
_APPEND = (
    throttle.COUNT_LUA
    + input_errors.DUE_LUA
    + """
local count = 0
if ARGV[1] ~= '' then
  count = count_hit(KEYS[1], ARGV[2])
  if count > tonumber(ARGV[1]) then return {count} end
end
local out = {count, input_errors_due(KEYS[2], ARGV[4], ARGV[5])}
for i = 0, (#KEYS - 2) / 4 - 1 do
  local k = 3 + 4 * i
  local a = 6 + 2 * i
  redis.call('XADD', KEYS[k], '*', '"""
    + FIELD
    + """', ARGV[a + 1])
  redis.call('SADD', KEYS[k + 1], ARGV[a])
  if redis.call('LLEN', KEYS[k + 3]) == 0 then redis.call('RPUSH', KEYS[k + 3], 1) end
  out[#out + 1] = redis.call('SET', KEYS[k + 2], 1, 'NX', 'EX', ARGV[3]) and 1 or 0
end
return out
"""
)


def append(node_id: int, rows: list[list]) -> None:
    """Store one accepted request for node_id (rows `[t, {key: number}]`), durably, in order.

    Raises a Redis error (the view answers 503) when Redis cannot take it; once this returns
    the request is in Redis and will be processed.
    """
    append_charged(None, [(node_id, rows)])


class Appended(NamedTuple):
    """What `append_charged` did: `wait` (seconds) if the count was over the limit, and then
    nothing was stored, else None; `due`: the clean subject's input errors are due to close
    (input_errors.close, which the caller runs: it writes the database)."""

    wait: float | None
    due: bool = False


def append_charged(
    charge: throttle.Charge | None,
    batches: list[tuple[int, list[list]]],
    clean: str | None = None,
    now: float | None = None,
) -> Appended:
    """Count one request against `charge` (None: not counted here) and, if it is allowed, store
    each node's rows in the node's stream and ask whether `clean`'s input errors (a subject
    whose batch had nothing skipped) are due to close; one round trip.

    With BMS_REDIS_WAIT_REPLICAS, on a replica too before this returns (core/redis.py)."""
    keys = [charge.key if charge else stream_key(batches[0][0]) if batches else "-"]
    keys.append(input_errors.OPEN_KEY)
    args: list = ["" if charge is None else charge.limit, charge.ttl_s if charge else 0, KICK_TTL_S]
    args += [clean or "", repr(input_errors.cutoff(now))]
    for node_id, rows in batches:
        shard = shard_of(node_id)
        keys += [stream_key(node_id), ready_key(shard), kick_key(shard), bell_key(shard)]
        args += [int(node_id), json.dumps(rows, separators=(",", ":"))]
    script = redis_script(_APPEND)
    reply = durably(lambda client: script(keys=keys, args=args, client=client))
    if charge is not None:
        wait = charge.wait(int(reply[0]))
        if wait is not None:
            return Appended(wait)
    for (node_id, _), kicked in zip(batches, reply[2:], strict=True):
        if kicked:
            kick(shard_of(node_id))
    return Appended(None, bool(reply[1]))


# The drain task (sensors/tasks.py), by the name it is registered under.
DRAIN_TASK = "sensors.tasks.drain_ingest_shard"


def kick(shard: int) -> None:
    """Queue a drain task for the shard (Celery's public API). A failure is logged, not raised:
    the request is stored already, and beat's safety net queues a drain within seconds.

    Sent by name: the task module imports the drain, which imports this module, and the web
    side needs only the message (routed to the ingest queue by name, as settings say)."""
    try:
        current_app.send_task(DRAIN_TASK, (shard,), expires=KICK_TTL_S)
    except Exception as exc:  # kombu's OperationalError and friends: logged, beat retries
        log.warning("could not queue a drain for ingest shard %s: %s", shard, exc)
        try:
            get_redis().delete(kick_key(shard))  # so the next request tries again
        except REDIS_FAILURES as redis_exc:
            log.warning("could not clear the kick flag of shard %s: %s", shard, redis_exc)
