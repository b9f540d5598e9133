"""The system tasks: the worker heartbeat, the system watchdog and the alarm e-mail digest."""

from __future__ import annotations

import time

from celery import shared_task

from alarms.heartbeat import HEARTBEAT_EVERY_S, WORKER_HEARTBEAT_KEY
from core.redis import get_redis


@shared_task(ignore_result=True)
def heartbeat() -> None:
    """Run by a worker on beat's schedule: proves both are alive to /healthz."""
    get_redis().set(WORKER_HEARTBEAT_KEY, int(time.time()), ex=HEARTBEAT_EVERY_S * 6)


@shared_task(name="alarms.tasks.system_watchdog", ignore_result=True)
def system_watchdog() -> dict:
    """Commit backlog, data disk, beat, refused points: raise or clear their alarms. Workers per
    queue are beat's thread's check (bms/celery.py), never a wait on the control worker."""
    from alarms import watchdog

    return watchdog.run_all()


@shared_task(name="alarms.tasks.send_alarm_digest", ignore_result=True, acks_late=False)
def send_alarm_digest() -> int:
    """Beat, every BMS_ALARM_EMAIL_CHECK_S: e-mail the alarms raised since the last digest, at
    most one message per BMS_ALARM_EMAIL_EVERY_S (alarms/notify.py)."""
    from alarms import notify

    return notify.send_digest()
