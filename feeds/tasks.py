"""Celery tasks of the feed store (queue "commit", or a shard's "commit-<k>": feeds/store/routing.py)."""

from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings

from feeds.store import service

log = logging.getLogger(__name__)


# Idempotent (a re-run rewrites the same bytes and trims only what it wrote), so acks_late is
# safe: a worker killed mid-commit leaves the task to be redelivered.
@shared_task(name="feeds.tasks.commit_buffer", ignore_result=True, acks_late=True)
def commit_buffer(shard: int | None = None) -> dict:
    """Move buffered points from Redis into the PHPFina files, fsync'd: one shard's (beat sends
    one per shard, routed to its queue), or with no shard every shard's. With several shards
    "every shard" is one task per shard on its own queue, so each is still written only by its
    shard's worker (a manual flush: `celery -A bms call feeds.tasks.commit_buffer`)."""
    shards = settings.BMS_FEED_SHARDS
    if shard is None and shards > 1:
        for k in range(shards):
            commit_buffer.apply_async(args=[k])
        return {"fanned_out": shards}
    result = service.commit_all(shard=0 if shard is None else int(shard))
    if result.get("refused") or result.get("dropped"):
        log.warning("feed commit refused/dropped points: %s", result)
    return result
