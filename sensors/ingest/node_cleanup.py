"""What Redis keeps for a node goes when the node goes.

A deleted node's ingest stream stayed behind (4,061 empty streams for 13 nodes in the red team's
run): the drain re-creates a stream with its consumer group (XGROUP CREATE ... MKSTREAM) for any
node in its shard's ready set, and nothing ever deleted a stream. Now:

- deleting a Node (admin, API, shell, cascade) removes, once the deletion is committed, its
  stream, its place in its shard's ready set and its live state (last seen, last values,
  silent flag), in one pipeline;
- beat's `sensors.tasks.check_silent_nodes` (every 60 s) sweeps, at most every SWEEP_EVERY_S,
  the streams whose node no longer exists: the ones left before this fix, and any a drain that
  was mid-pass re-created just after a deletion.
"""

from __future__ import annotations

import logging

from django.db import transaction
from django.db.models.signals import post_delete

from core.redis import REDIS_FAILURES, get_redis
from sensors.ingest import node_state, set_aside, stream
from sensors.models import Node

log = logging.getLogger(__name__)

SWEEP_CLAIM_KEY = "sensors:ingest:orphan-sweep"
SWEEP_EVERY_S = 600


def remove_nodes(node_ids: list[int]) -> None:
    """Delete the ingest streams, requests set aside and live state of these (deleted) nodes:
    one round trip."""
    if not node_ids:
        return
    pipe = get_redis().pipeline(transaction=False)
    for node_id in node_ids:
        pipe.delete(stream.stream_key(node_id), node_state.last_key(node_id))
        pipe.srem(stream.ready_key(stream.shard_of(node_id)), node_id)
        pipe.hdel(node_state.SEEN_KEY, str(node_id))
        pipe.srem(node_state.SILENT_KEY, node_id)
        # Its requests set aside: nobody could retry them onto a node that is gone.
        pipe.delete(set_aside.ASIDE_PREFIX + str(node_id))
        pipe.zrem(set_aside.INDEX_KEY, str(node_id))
    pipe.execute()


def sweep_orphans(force: bool = False) -> list[int]:
    """Remove the streams of nodes that no longer exist. Returns their node ids.

    Runs at most every SWEEP_EVERY_S (a Redis claim) unless forced. The streams are listed
    before the nodes are read, so a node created meanwhile is never taken for an orphan."""
    redis = get_redis()
    if not force and not redis.set(SWEEP_CLAIM_KEY, 1, nx=True, ex=SWEEP_EVERY_S):
        return []
    in_redis = {stream.node_of(key) for key in redis.scan_iter(match=stream.STREAM_PREFIX + "*")}
    if not in_redis:
        return []
    existing = set(Node.objects.filter(pk__in=in_redis).values_list("pk", flat=True))
    orphans = sorted(in_redis - existing)
    remove_nodes(orphans)
    if orphans:
        log.info("removed the ingest streams of %d deleted node(s)", len(orphans))
    return orphans


def _on_node_deleted(sender, instance: Node, **kwargs) -> None:
    node_id = instance.pk

    def remove() -> None:
        try:
            remove_nodes([node_id])
        except REDIS_FAILURES as exc:  # the sweep removes it later
            log.warning("could not remove the ingest stream of deleted node %s: %s", node_id, exc)

    transaction.on_commit(remove)


def connect_signals() -> None:
    post_delete.connect(_on_node_deleted, sender=Node, dispatch_uid="ingest-node-cleanup")


connect_signals()
