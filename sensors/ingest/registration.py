"""Nodes a gateway key registers by posting for them, within bounds that hold when promised.

A gateway key (an emonhub) writes any node of its site, and a row naming a node the site does
not have registers it (docs/INGEST.md). The red team's two bulk requests of 2,500 made-up
names registered 4,052 nodes: the room was counted once per name, before any node of the
request existed, and the only bound was the site's input budget, spent later by the worker.
Now, for the new names of one request:

1. names refused for this site in the last BMS_INGEST_REFUSED_NAME_TTL_S (600 s) are refused
   again from Redis, with no database query (a sorted set per site, name -> expiry, at most
   BMS_INGEST_REFUSED_NAMES members: the soonest to expire go first);
2. the rest are looked up in one query (`lookup_refs` in sensors/ingest/node_auth.py);
3. more than BMS_INGEST_MAX_NEW_NODES_PER_REQUEST (32) new names: none is registered (a real
   emonhub names at most the radio ids it hears; a flood registers nothing);
4. otherwise, under the site's lock (input_budget.site_lock, the same one the worker takes to
   create inputs), the site's registered nodes are counted and at most
   BMS_INGEST_MAX_AUTO_NODES_PER_SITE (64) of them exist afterwards, and only while the
   site's input budget has room.

A refused name's rows are skipped and recorded (gateway-input-errors:<key id>); the reply is
still `ok`, as emonhub resends anything else forever. A node saved or deleted by an engineer
drops the refusals of its site (signals below), so a node made by hand is found at once.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models.signals import post_delete, post_save
from redis.exceptions import LockError

from core.redis import REDIS_FAILURES, get_redis, redis_script
from sensors.ingest import input_budget, node_auth
from sensors.ingest.node_auth import GatewayIdentity, NodeIdentity
from sensors.ingest.parse import IngestError
from sensors.models import Node

log = logging.getLogger(__name__)

REFUSED_PREFIX = "sensors:ingest:refused-names:"
# A node registered by a gateway key: emonTH-class nodes post every minute; an engineer sets
# the real interval (the silent alarm is 3 intervals).
AUTO_NODE_INTERVAL_S = 60
# How long a web thread waits for the site's lock before answering 503 (emonhub retries).
LOCK_WAIT_S = 5.0

Ref = str | int


def per_site() -> int:
    return settings.BMS_INGEST_MAX_AUTO_NODES_PER_SITE


def per_request() -> int:
    return settings.BMS_INGEST_MAX_NEW_NODES_PER_REQUEST


def limits_text() -> str:
    return f"{per_request()} new nodes per request, {per_site()} registered nodes per site"


def refused_key(site_id: int) -> str:
    return f"{REFUSED_PREFIX}{int(site_id)}"


def member(ref: Ref) -> str:
    """A ref as a set member: a radio id and a name that is its digits look up differently
    (`#7` first tries radio id 7), and `#` is not a node name character."""
    return f"#{ref}" if isinstance(ref, int) else ref


# KEYS[1]: the site's refused set. ARGV[1]: now; ARGV[2..]: members. Returns 1/0 per member.
_CHECK = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
local out = {}
for i = 2, #ARGV do
  out[#out + 1] = redis.call('ZSCORE', KEYS[1], ARGV[i]) and 1 or 0
end
return out
"""

# KEYS[1]: the set. ARGV: now, expiry, cap, ttl, members. Adds them, drops expired ones and the
# soonest to expire beyond the cap, so one site's set never passes the cap.
_REFUSE = """
local now, expires, cap = ARGV[1], ARGV[2], tonumber(ARGV[3])
for i = 5, #ARGV do redis.call('ZADD', KEYS[1], expires, ARGV[i]) end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local over = redis.call('ZCARD', KEYS[1]) - cap
if over > 0 then redis.call('ZREMRANGEBYRANK', KEYS[1], 0, over - 1) end
redis.call('EXPIRE', KEYS[1], ARGV[4])
return redis.call('ZCARD', KEYS[1])
"""


def recently_refused(site_id: int, refs: list[Ref], now: float | None = None) -> set[Ref]:
    """The refs refused for this site within the TTL: one Redis round trip, no query."""
    if not refs:
        return set()
    now = time.time() if now is None else now
    flags = redis_script(_CHECK)(keys=[refused_key(site_id)], args=[now, *map(member, refs)])
    return {ref for ref, flag in zip(refs, flags, strict=True) if flag}


def remember_refused(site_id: int, refs: list[Ref], now: float | None = None) -> None:
    if not refs:
        return
    now = time.time() if now is None else now
    ttl = settings.BMS_INGEST_REFUSED_NAME_TTL_S
    cap = settings.BMS_INGEST_REFUSED_NAMES
    redis_script(_REFUSE)(
        keys=[refused_key(site_id)], args=[now, now + ttl, cap, ttl, *map(member, refs[-cap:])]
    )


@dataclass
class Resolution:
    """What a gateway request's node refs came to: a node, or why the rows are skipped."""

    nodes: dict[Ref, NodeIdentity] = field(default_factory=dict)
    refused: dict[Ref, str] = field(default_factory=dict)
    registered: list[str] = field(default_factory=list)


def _check_known(gateway: GatewayIdentity, ref: Ref, identity: NodeIdentity, out: Resolution):
    if identity.site_id != gateway.site_id:
        out.refused[ref] = f"node {str(ref)[:64]!r} is not a node of this gateway's site"
    elif not identity.enabled:
        out.refused[ref] = f"node {str(ref)[:64]!r} is disabled"
    else:
        out.nodes[ref] = identity


def resolve(gateway: GatewayIdentity, refs: list[Ref]) -> Resolution:
    """The node each ref names, registering new ones within the bounds (module docstring)."""
    out = Resolution()
    cached = {}
    unknown = []
    for ref in refs:
        hit = node_auth.cached_ref(ref, gateway.site_id)
        if hit is None:
            unknown.append(ref)
        else:
            cached[ref] = hit
    for ref, identity in cached.items():
        if identity is node_auth.NOT_FOUND:
            unknown.append(ref)  # no node a moment ago: maybe refused, maybe new
        else:
            _check_known(gateway, ref, identity, out)
    if not unknown:
        return out
    again = recently_refused(gateway.site_id, unknown)
    for ref in again:
        out.refused[ref] = (
            f"node {str(ref)[:64]!r} is not registered: it was refused in the last "
            f"{settings.BMS_INGEST_REFUSED_NAME_TTL_S} s ({limits_text()})"
        )
    looked_up = node_auth.lookup_refs([ref for ref in unknown if ref not in again], gateway.site_id)
    new = [ref for ref, identity in looked_up.items() if identity is None]
    for ref, identity in looked_up.items():
        if identity is not None:
            _check_known(gateway, ref, identity, out)
    if len(new) > per_request():
        why = (
            f"node {{}} is new, and this request names {len(new)} new nodes: more than "
            f"{per_request()} new nodes in one request registers none of them "
            "(BMS_INGEST_MAX_NEW_NODES_PER_REQUEST)"
        )
        _refuse(gateway, new, why, out)
        return out
    if new:
        _register(gateway, new, out)
    return out


def _refuse(gateway: GatewayIdentity, refs: list[Ref], why: str, out: Resolution) -> None:
    for ref in refs:
        out.refused[ref] = why.format(repr(str(ref)[:64]))
    remember_refused(gateway.site_id, refs)


def _register(gateway: GatewayIdentity, new: list[Ref], out: Resolution) -> None:
    """Register what fits, in the order the request named them, under the site's lock."""
    try:
        with input_budget.site_lock(gateway.site_id, blocking_timeout=LOCK_WAIT_S):
            registered = Node.objects.filter(site_id=gateway.site_id, auto_created=True).count()
            room = per_site() - registered
            if room > 0 and input_budget.site_room(gateway.site_id) <= 0:
                room = 0
                why = (
                    "node {} is new but the site may not get more automatically created "
                    f"inputs ({input_budget.limits_text()})"
                )
            else:
                why = (
                    f"node {{}} is new but the site has {registered} nodes registered by "
                    f"gateway keys, its bound (BMS_INGEST_MAX_AUTO_NODES_PER_SITE, {per_site()})"
                )
            fits, over = new[: max(room, 0)], new[max(room, 0) :]
            for ref in fits:
                _register_one(gateway, ref, out)
    except LockError:
        raise IngestError(
            "the site is registering nodes for another request: try again", status=503
        ) from None
    if over:
        _refuse(gateway, over, why, out)


def _register_one(gateway: GatewayIdentity, ref: Ref, out: Resolution) -> None:
    radio_id = ref if isinstance(ref, int) and ref <= 255 else None
    node = Node(
        name=str(ref), node_id=radio_id, site_id=gateway.site_id,
        protocol=Node.Protocol.EMONCMS, interval=AUTO_NODE_INTERVAL_S,
        auto_created=True, registered_by_id=gateway.id,
        description=f"Registered by gateway key '{gateway.name}' when it first posted for it.",
    )  # fmt: skip
    try:
        with transaction.atomic():
            node.save()
    except IntegrityError:
        # Registered by another request a moment ago, or another node of the site holds
        # this radio id.
        node_auth.forget_ref(ref, gateway.site_id)
        identity = node_auth.lookup_ref(ref, gateway.site_id)
        if identity is None:
            out.refused[ref] = f"node {str(ref)[:64]!r} is not a node of this gateway's site"
        else:
            _check_known(gateway, ref, identity, out)
        return
    log.info("gateway %s registered new node %s", gateway.name, node.name)
    identity = NodeIdentity.of(node)
    node_auth.remember_ref(ref, identity)
    out.nodes[ref] = identity
    out.registered.append(node.name)


def _forget_refusals(sender, instance: Node, **kwargs) -> None:
    """A node saved or deleted: its site's refused names get a fresh chance (a name refused a
    minute ago may be this node now, or room was made)."""
    if instance.site_id is None or (kwargs.get("created") and instance.auto_created):
        return  # a node registered here was not refused: the refusals still stand

    def drop() -> None:
        try:
            get_redis().delete(refused_key(instance.site_id))
        except REDIS_FAILURES as exc:  # the refusals expire by themselves within their TTL
            log.warning(
                "could not drop the refused node names of site %s: %s", instance.site_id, exc
            )

    transaction.on_commit(drop)


def connect_signals() -> None:
    post_save.connect(_forget_refusals, sender=Node, dispatch_uid="ingest-refused-save")
    post_delete.connect(_forget_refusals, sender=Node, dispatch_uid="ingest-refused-delete")


connect_signals()
