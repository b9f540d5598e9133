"""The Celery router of feed commits: `commit_buffer(shard)` goes to that shard's queue
(feeds/store/shards.py `queue_of`), so each shard's commits reach the one worker that writes it.
Listed first in CELERY_TASK_ROUTES; any other task falls through to the table after it."""

from __future__ import annotations

from django.conf import settings

from feeds.store import shards

COMMIT_TASK = "feeds.tasks.commit_buffer"


def route_commit(name: str, args, kwargs, options, task=None, **_kw) -> dict | None:
    if name != COMMIT_TASK:
        return None
    shard = (kwargs or {}).get("shard")
    if shard is None and args:
        shard = args[0]
    if shard is None:  # "commit everything": the task fans out to the shard queues itself
        return {"queue": shards.COMMIT_QUEUE}
    return {"queue": shards.queue_of(int(shard), settings.BMS_FEED_SHARDS)}
