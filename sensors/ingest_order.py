"""Run each node's ingest batches in the order they were accepted.

Why: accumulating processes and pulse counters take a point not newer than the last they
processed for a replay and skip it; that is what makes a redelivered batch harmless. So when a
node's older batch runs after a newer one (it was lost by the broker and queued again, held
by a retry, or two worker processes took two batches of the node at once), its kWh and pulses
would be skipped. The kill -9 fault test found exactly that (tests/reliability).

How: sensors/publish.py enters every batch in its node's pending set (task id -> accepted at,
in µs) until `finish`. A task whose node has an older pending batch *parks*: it returns at
once, leaving its batch in the outbox, marked parked. When a batch is done, `finish` forgets
it and pushes the node's next batch, if it is parked, to the front of the queue. Both steps
are Lua scripts, so a batch cannot park just after the batch it waits for has woken nobody.
No polling and no retry storm: a node with many parked batches costs nothing until its older
batch runs.

Bounded: a batch waits at most BMS_INGEST_ORDER_HOLD_S for an older batch (one that never
comes back must not stop its node). A parked batch stays in the outbox, so if its wake-up is
lost (a worker killed between claiming it and pushing it) the outbox's beat task pushes it
again after BMS_INGEST_LOST_AFTER_S, and it looks again.
"""

from __future__ import annotations

import time

from django.conf import settings

from bms.redis import redis_script
from sensors import publish

# KEYS: _order_keys (the requeued hash unused).
# ARGV: task id, now (µs), hold (µs), next look at (unix s).
# Returns the age in µs of the older batch waited for (parked), or -1 (run now).
_PARK = """
local mine = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not mine then return -1 end
local older = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. mine, 'WITHSCORES')
local now, hold = tonumber(ARGV[2]), tonumber(ARGV[3])
for i = 1, #older, 2 do
  local age = now - tonumber(older[i + 1])
  if age <= hold then
    redis.call('SADD', KEYS[2], ARGV[1])
    redis.call('ZADD', KEYS[4], 'XX', ARGV[4], ARGV[1])
    return math.max(age, 0)
  end
  if redis.call('HEXISTS', KEYS[3], older[i]) == 0 then
    redis.call('ZREM', KEYS[1], older[i])  -- neither pending in the outbox nor young: forget it
  end
end
return -1
"""

# The batch has run (ARGV[1]): take it out of the outbox and its node's order,
# then claim the node's next batch if it is parked (unpark it). One round trip per
# batch on the hot path. KEYS: _order_keys. Returns [task id, message] of the claimed
# batch, else nil.
_FINISH_AND_CLAIM_NEXT = """
redis.call('HDEL', KEYS[3], ARGV[1])
redis.call('ZREM', KEYS[4], ARGV[1])
redis.call('HDEL', KEYS[5], ARGV[1])
redis.call('SREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[1], ARGV[1])
local nxt = redis.call('ZRANGE', KEYS[1], 0, 0)[1]
if not nxt or redis.call('SREM', KEYS[2], nxt) == 0 then return nil end
local message = redis.call('HGET', KEYS[3], nxt)
if not message then return nil end
return {nxt, message}
"""

# KEYS: queue, outbox hash, outbox due zset. ARGV: task id, message claimed, fresh message,
# next look at. Pushes to the end BRPOP takes from: the woken batch runs next.
_PUSH_FRONT = """
if redis.call('HGET', KEYS[2], ARGV[1]) ~= ARGV[2] then return 0 end
redis.call('RPUSH', KEYS[1], ARGV[3])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
redis.call('ZADD', KEYS[3], ARGV[4], ARGV[1])
return 1
"""


def _order_keys(node_id: int) -> list[str]:
    """KEYS of the park and finish scripts, in this order: the node's pending zset, the parked
    set, the outbox hash, its due zset, its requeued hash."""
    return [
        publish.pending_key(node_id),
        publish.PARKED_KEY,
        publish.OUTBOX_KEY,
        publish.OUTBOX_DUE_KEY,
        publish.OUTBOX_REQUEUED_KEY,
    ]


def order_hold_s() -> float:
    """How long a node's batch waits for an older one of the same node (settings)."""
    return float(getattr(settings, "BMS_INGEST_ORDER_HOLD_S", 300))


def park_if_waiting(node_id: int, task_id: str | None, now: float | None = None) -> float | None:
    """Park the batch if an older batch of its node is pending: the age of that batch in
    seconds (the task must return without running), else None (run it now).

    A batch not in its node's order (published by apply_async, or done already) never parks.
    An older batch past order_hold_s() is not waited for; one that has also left the outbox
    (dropped as poison) is forgotten.
    """
    if not task_id:
        return None
    now = time.time() if now is None else now
    age_us = redis_script(_PARK)(
        keys=_order_keys(node_id),
        args=[
            task_id,
            int(now * 1_000_000),
            int(order_hold_s() * 1_000_000),
            now + publish.lost_after_s(),
        ],  # fmt: skip
    )
    return None if age_us < 0 else age_us / 1_000_000


def finish(task_id: str | None, node_id: int) -> str | None:
    """The batch has run: forget it, then push the node's next batch if it is parked.
    Returns the task id of the batch woken, or None."""
    if not task_id:  # not published by us (apply_async): in no outbox and no order
        return None
    claimed = redis_script(_FINISH_AND_CLAIM_NEXT)(
        keys=_order_keys(node_id),
        args=[task_id],
    )
    if not claimed:
        return None
    woken, message = claimed[0].decode(), claimed[1]
    pushed = redis_script(_PUSH_FRONT)(
        keys=[publish.QUEUE, publish.OUTBOX_KEY, publish.OUTBOX_DUE_KEY],
        args=[
            woken,
            message,
            publish.fresh_delivery(message),
            time.time() + publish.lost_after_s(),
        ],  # fmt: skip
    )
    return woken if pushed else None
