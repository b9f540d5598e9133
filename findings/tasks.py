"""The scheduled run: the last week, every hour, on the commit worker (never control)."""

from __future__ import annotations

from celery import shared_task
from django.utils import timezone

from findings.evaluate import MAX_RANGE, evaluate


@shared_task(ignore_result=True)
def find_waste_recent() -> dict:
    """Every rule over the week to now: bounded by MAX_RANGE and the evaluator's caps."""
    end = timezone.now()
    summary = evaluate(end - MAX_RANGE, end)
    return {"opened": summary.opened, "updated": summary.updated, "closed": summary.closed}
