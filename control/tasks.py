"""Celery tasks of the control app: the tick on queue "control" (never behind ingest); the iCal
sync on "commit" (bms/settings.py CELERY_TASK_ROUTES), so a big feed never delays a tick."""

from __future__ import annotations

from celery import shared_task


@shared_task(ignore_result=True, acks_late=False)
def control_tick(now: str | None = None) -> dict:
    """Evaluate every zone and switch what changed. Beat sends it every BMS_CONTROL_TICK s.

    acks_late is off: a tick that died half way must not be redelivered later — the next
    tick from beat re-evaluates from the present, which is what the plant needs.
    `now` (ISO 8601, tests only; beat sends none): the moment to evaluate, so a test drives a
    real worker through an expiry or an overrun without waiting for it."""
    from datetime import datetime

    from control.runner import run_tick

    return run_tick(datetime.fromisoformat(now) if now is not None else None)


@shared_task(ignore_result=True)
def sync_ical_feeds() -> dict:
    """Sync bookings of every zone that subscribes to an iCal URL (on the commit worker)."""
    from control.ical import sync_all

    return sync_all()
