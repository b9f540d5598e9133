"""The scheduled run: the last week, every hour, on the commit worker (never control)."""

from __future__ import annotations

from datetime import UTC, datetime

from celery import shared_task
from django.utils import timezone

from findings import digest
from findings.evaluate import MAX_RANGE, evaluate


@shared_task(ignore_result=True)
def find_waste_recent(now_ts: float | None = None) -> dict:
    """Every rule over the week to `now_ts` (unix s; default now): bounded by MAX_RANGE and
    the evaluator's caps. `now_ts` lets a replay or a test set the clock."""
    end = timezone.now() if now_ts is None else datetime.fromtimestamp(now_ts, UTC)
    summary = evaluate(end - MAX_RANGE, end, now=end)
    return {"opened": summary.opened, "updated": summary.updated, "closed": summary.closed}


@shared_task(ignore_result=True)
def send_weekly_digest(now_ts: float | None = None) -> int:
    """Monday morning (beat, on the commit worker like the hourly run): each site's open
    findings to its recipients; the number of messages sent."""
    now = timezone.now() if now_ts is None else datetime.fromtimestamp(now_ts, UTC)
    return len(digest.send_weekly(now))
