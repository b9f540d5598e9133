"""A task that notes when it ran (Redis list `test:probe`): counts the ticks beat sends."""

from __future__ import annotations

import time

from celery import shared_task

from core.redis import get_redis

PROBE_KEY = "test:probe"


@shared_task(name="tests.reliability.beat_probe.probe", ignore_result=True)
def probe() -> None:
    get_redis().rpush(PROBE_KEY, repr(time.time()))
