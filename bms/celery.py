"""The Celery app: one per project, configured from Django settings (CELERY_* names).

Queues: `ingest` (readings), `commit` (feed buffer -> files), `control` (the tick that
switches plant). Run the control queue on its own worker so ingest never delays it.
"""

from __future__ import annotations

import atexit
import gc
import logging
import os
import threading
import time

from celery import Celery, bootsteps
from celery.signals import beat_init, worker_init, worker_ready

from alarms.heartbeat import BEAT_HEARTBEAT_KEY, BEAT_STOPPED_KEY, HEARTBEAT_EVERY_S

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bms.settings")
# Celery's Django fixup runs Django's system checks in every worker and beat at start and
# ignores what they find; running them imports the whole URL conf and every view (DRF, the
# schema generator, markdown, the holiday tables): about 30 MB in each process for nothing.
# The checks run where they can stop a start: `manage.py migrate` (scripts/run-site.sh, the
# docker web role) and `manage.py check`.
os.environ.setdefault("CELERY_SKIP_CHECKS", "1")

app = Celery("bms")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


def is_standby(scheduler) -> bool:
    """A beat waiting for RedBeat's lock (another beat is the active one): it sends nothing,
    so its heartbeat would hide a dead active beat until the standby takes over."""
    return bool(getattr(scheduler, "lock_key", None)) and getattr(scheduler, "lock", None) is None


@beat_init.connect
def _start_beat_heartbeat(sender=None, **_kwargs) -> None:
    """The active beat stamps Redis every few seconds so /healthz can tell it is alive."""
    from core.redis import get_redis

    scheduler = sender.scheduler if sender is not None else None
    # Whether this beat was the active one at its last stamp: only that one's stop is a
    # restart of the site's beat (RedBeat has released the lock by the time atexit runs).
    active = threading.Event()

    def loop() -> None:
        while True:
            try:
                if is_standby(scheduler):
                    active.clear()
                else:
                    get_redis().set(BEAT_HEARTBEAT_KEY, int(time.time()), ex=HEARTBEAT_EVERY_S * 6)
                    active.set()
            except Exception as exc:  # Redis down: healthz reports it; keep trying.
                logging.getLogger(__name__).warning("beat heartbeat failed: %s", exc)
            time.sleep(HEARTBEAT_EVERY_S)

    threading.Thread(target=loop, name="beat-heartbeat", daemon=True).start()
    atexit.register(_mark_beat_stopped, active)


def _mark_beat_stopped(active: threading.Event) -> None:
    """Beat is stopping on a signal (celery turns SIGTERM/SIGINT into SystemExit, so this runs):
    say so, so the watchdog takes the missing heartbeat for a restart, not a dead beat, for
    its grace (alarms/watchdog.py check_beat). A beat that is killed says nothing: that is
    the death the alarm is for."""
    if not active.is_set():
        return  # a standby beat: the active one is still running
    from alarms.watchdog import beat_restart_grace_s
    from core.redis import get_redis

    try:
        get_redis().set(BEAT_STOPPED_KEY, time.time(), ex=int(2 * beat_restart_grace_s()))
    except Exception as exc:  # Redis away as we stop: the watchdog will alarm; say why here
        logging.getLogger(__name__).warning("beat could not mark its planned stop: %s", exc)


# How often beat checks the workers and the control worker checks beat (docs/RELIABILITY.md).
WATCHDOG_EVERY_S = int(os.environ.get("BMS_WATCHDOG_EVERY_S", "60"))


def _start_watch(check, name: str) -> None:
    """Run one watchdog check every WATCHDOG_EVERY_S in a daemon thread of this process."""
    from alarms import watchdog

    threading.Thread(
        target=watchdog.watch_loop,
        args=(check, WATCHDOG_EVERY_S),
        kwargs={"first_after_s": WATCHDOG_EVERY_S, "name": name},
        name=f"watchdog-{name}",
        daemon=True,
    ).start()


@beat_init.connect
def _start_worker_watch(sender=None, **_kwargs) -> None:
    """Beat outlives a dead worker: it checks that every queue still has a consumer."""
    import django
    from django.apps import apps

    # Celery's Django fixup has set Django up already (before beat's logging). A second
    # django.setup() configures logging again, now that Celery has redirected sys.stderr to a
    # logger: the console handler then writes into that redirect, and every line beat logs after
    # "beat: Starting..." was dropped (the tasks it sends, bms.beat's lock and Redis warnings).
    if not apps.ready:
        django.setup()
    from alarms import watchdog

    _start_watch(watchdog.check_workers, "workers")


@worker_ready.connect
def _start_beat_watch(sender=None, **_kwargs) -> None:
    """The control worker outlives a dead beat: it checks beat's heartbeat."""
    from django.conf import settings

    queues = {q.name for q in sender.task_consumer.queues} if sender is not None else set()
    if "control" not in queues or not settings.BMS_WATCHDOG_WATCH_BEAT:
        return
    from alarms import watchdog

    _start_watch(watchdog.check_beat, "beat")


@worker_init.connect
def _freeze_before_fork(**_kwargs) -> None:
    """The worker's main process has imported Django and every task; its pool children are forked
    from it next. Freezing what is there now keeps the children's garbage collector from
    writing into those objects, so their pages stay shared with the main process instead of
    being copied into each child (docs/BENCHMARKS.md, "Footprint")."""
    gc.freeze()


class BeatThread(bootsteps.StartStopStep):
    """BMS_BEAT_THREAD=1 in a worker's environment: beat runs as a thread of that worker's main
    process (the small-box shape of scripts/run-site.sh, docs/DEPLOYMENT.md "Memory") instead
    of a process of its own, which costs a whole copy of Django and the tasks (70-100 MB).
    Still one beat: RedBeat's lock, the heartbeat and the worker watch work as in a beat
    process (beat_init). It wakes at least every second (Celery's embedded thread), so it
    stops with the worker."""

    label = "Beat (thread)"
    conditional = True

    def __init__(self, worker, **kwargs) -> None:
        self.enabled = os.environ.get("BMS_BEAT_THREAD") == "1"
        super().__init__(worker, **kwargs)

    def create(self, worker):
        from celery.beat import EmbeddedService

        return EmbeddedService(worker.app, thread=True)


app.steps["worker"].add(BeatThread)
