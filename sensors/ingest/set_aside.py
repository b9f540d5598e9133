"""Requests the drain cannot process however often it tries: moved aside, not retried forever.

The drain leaves a request pending when Redis or the database fails (sensors/ingest/drain.py,
TRANSIENT_ERRORS), so an outage loses nothing. But some of those errors are the server's
answer to what was sent, and the same request gets the same answer every time: a Redis script
error (#26: `too many results to unpack` for a 9,000-value post), a key of the wrong type, a
database integrity error. Retried forever, such a request stops its node for good and, since
the error stops the whole drain, every node of the shards it held; INGEST.md promises that a
bad request cannot stop its node.

So a request that fails with such an answer ATTEMPTS times running is moved aside: its rows are
copied to its node's aside stream (ASIDE_PREFIX<node id>, the newest ASIDE_MAXLEN kept, for an
engineer to look at, retry or discard on /staff/inputs/set-aside/: aside_review.py), it is
acknowledged, and the node's input errors (admin page, alarm `node-input-errors:<node id>`)
say so. A lost connection, a database that is away, Redis
out of memory or read-only are never counted: they pass, and the request waits for them.
"""

from __future__ import annotations

import json
import logging
import time

import redis
from django.db import DatabaseError, InterfaceError, OperationalError

from sensors.ingest import input_errors
from sensors.ingest.emoncms_input import Skipped

log = logging.getLogger(__name__)

ATTEMPTS = 3  # the same answer this many times running: it will not change by itself
FAILS_KEY = "sensors:ingest:fails"  # "<node id>:<first entry id>" -> failures so far
FAILS_TTL_S = 86_400  # a count nobody added to for a day is forgotten
ASIDE_PREFIX = "sensors:ingest:aside:"
ASIDE_MAXLEN = 100  # requests kept per node (each at most the body bound)
# The nodes that have requests set aside (node id -> when, unix ms): the staff page and API
# (sensors/ingest/aside_review.py) list these nodes' streams, never scan the keyspace.
INDEX_KEY = "sensors:ingest:aside:nodes"

# Redis answers that say "not now" rather than "not this": never counted.
_PASSING = (redis.exceptions.ReadOnlyError, redis.exceptions.OutOfMemoryError)


def repeatable(exc: BaseException) -> bool:
    """Whether the error is the server's answer to this request (the same next time), not an
    outage (a lost connection, a database away) that passes by itself."""
    if isinstance(exc, redis.ResponseError):
        return not isinstance(exc, _PASSING)
    if isinstance(exc, DatabaseError):
        return not isinstance(exc, OperationalError | InterfaceError)
    return False


def failed(client: redis.Redis, node_id: int, entry_id: bytes | str) -> int:
    """Count one more failure of the node's request `entry_id`; the failures so far."""
    field = f"{node_id}:{_text(entry_id)}"
    pipe = client.pipeline(transaction=True)
    pipe.hincrby(FAILS_KEY, field, 1)
    pipe.expire(FAILS_KEY, FAILS_TTL_S)
    count, _ = pipe.execute()
    return int(count)


def move_aside(
    client: redis.Redis, node_id: int, entry_ids: list, rows: list, exc: BaseException
) -> None:
    """Copy the requests' rows to the node's aside stream, forget their failure count and
    record them on the node's input errors. The caller acknowledges them."""
    from sensors.models import Node  # the worker's import, not at module load

    reason = f"{type(exc).__name__}: {exc}"[:300]
    pipe = client.pipeline(transaction=True)
    pipe.xadd(
        ASIDE_PREFIX + str(node_id),
        {"ids": json.dumps([_text(e) for e in entry_ids]), "r": json.dumps(rows), "why": reason},
        maxlen=ASIDE_MAXLEN,
        approximate=False,
    )
    pipe.hdel(FAILS_KEY, f"{node_id}:{_text(entry_ids[0])}")
    pipe.zadd(INDEX_KEY, {str(node_id): int(time.time() * 1000)})
    pipe.execute()
    name = Node.objects.filter(pk=node_id).values_list("name", flat=True).first() or node_id
    values = sum(len(row[1]) for row in rows if isinstance(row, list) and len(row) > 1)
    where = f"request(s) {_text(entry_ids[0])}..{_text(entry_ids[-1])}"
    why = (
        f"failed {ATTEMPTS} times the same way ({reason}); set aside, not stored "
        f"(Redis stream {ASIDE_PREFIX}{node_id})"
    )
    log.error("ingest of node %s: %s %s", node_id, where, why)
    input_errors.record(
        input_errors.node_subject(node_id),
        f"Node '{name}'",
        [Skipped(None, where, why)],
        count=max(1, values),
    )


def _text(entry_id: bytes | str) -> str:
    return entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)
