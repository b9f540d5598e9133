"""Celery tasks of the feed store (queue "commit", see CELERY_TASK_ROUTES)."""

from __future__ import annotations

import logging

from celery import shared_task

from feeds import service

log = logging.getLogger(__name__)


# Idempotent (a re-run rewrites the same bytes and trims only what it wrote), so acks_late is
# safe: a worker killed mid-commit leaves the task to be redelivered.
@shared_task(name="feeds.tasks.commit_buffer", ignore_result=True, acks_late=True)
def commit_buffer() -> dict:
    """Move buffered points from Redis into the PHPFina files, fsync'd."""
    result = service.commit_all()
    if result.get("refused") or result.get("dropped"):
        log.warning("feed commit refused/dropped points: %s", result)
    return result
