"""beat's log says what beat does (found by the multi-host test): a real beat process
logs the tasks it sends and, when its RedBeat lock is taken by another, that it stands by.

bms/celery.py called django.setup() a second time at beat_init, after Celery had redirected
sys.stderr to a logger: Django's console handler was then built on that redirect, and every log
line of beat after "beat: Starting..." was dropped (no "Sending due task", none of
bms/beat_scheduler.py's warnings), so which beat held the lock could not be read from any log."""

from __future__ import annotations

import pytest

from tests.reliability.beat_probe import PROBE_KEY
from tests.wait import wait_for

pytestmark = pytest.mark.integration

LOCK_KEY = "bms:redbeat::lock"
HA = {
    "DJANGO_SETTINGS_MODULE": "tests.reliability.beat_ha_settings",
    "BMS_PROBE_EVERY_S": "1",
    "BMS_BEAT_MAX_LOOP_S": "1",
    "BMS_BEAT_LOCK_TIMEOUT": "3",
}


def test_beat_logs_the_tasks_it_sends_and_a_lock_taken_by_another(fault_site, tmp_path):
    client = fault_site.redis.client()
    fault_site.start_worker("worker", "ingest", **HA)  # runs the probe task beat sends
    fault_site.start_beat("beat", **HA)
    log = tmp_path / "beat.log"
    wait_for(lambda: client.llen(PROBE_KEY) >= 2, 60, "beat's first ticks")
    wait_for(
        lambda: "Sending due task probe" in log.read_text(errors="replace"),
        10, "beat to log the task it sent",
    )  # fmt: skip

    # Another beat's lock (as after this beat's host was cut off and the standby took over).
    client.set(LOCK_KEY, "another beat's token", ex=30)
    wait_for(
        lambda: "lock lost and held by another beat; standing by" in log.read_text(errors="replace"),
        10, "beat to log that it stands by",
    )  # fmt: skip
    standing = client.llen(PROBE_KEY)
    client.delete(LOCK_KEY)  # the other beat is gone: this one takes the lock again and ticks
    wait_for(lambda: client.llen(PROBE_KEY) > standing, 15, "beat ticking again")
    wait_for(lambda: "taken again" in log.read_text(errors="replace"), 5, "beat to log the retake")
