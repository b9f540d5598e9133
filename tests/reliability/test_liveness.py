"""Dead Celery processes are reported by the ones still alive (real processes, private Redis):
beat's thread raises "no worker on queue X", the control worker's thread raises "beat not
alive"; both clear once the process is back."""

from __future__ import annotations

import pytest

from alarms.models import Alarm
from tests.wait import wait_for

pytestmark = pytest.mark.integration

FAST = {"BMS_WATCHDOG_EVERY_S": "1"}


def open_keys() -> set[str]:
    return set(Alarm.objects.filter(cleared_at__isnull=True).values_list("key", flat=True))


def test_beat_reports_dead_workers_and_the_control_worker_reports_a_dead_beat(fault_site):
    workers = {"celery-worker:ingest", "celery-worker:commit", "celery-worker:control"}
    fault_site.start_beat(**FAST)  # no worker at all yet
    wait_for(lambda: workers <= open_keys(), 30, "beat to raise the three worker alarms")
    assert Alarm.objects.filter(key="celery-worker:control").count() == 1  # once, not per round

    fault_site.start_worker(
        "worker", "ingest,commit,control", BMS_WATCHDOG_WATCH_BEAT="true", **FAST
    )
    wait_for(lambda: not (workers & open_keys()), 30, "the worker alarms to clear")

    fault_site.kill("beat")
    fault_site.redis.client().delete("bms:health:beat")  # its stamp would outlive it by 60 s
    wait_for(lambda: "celery-beat" in open_keys(), 30, "the worker to raise the beat alarm")

    fault_site.start_beat(**FAST)
    wait_for(lambda: "celery-beat" not in open_keys(), 30, "the beat alarm to clear")
