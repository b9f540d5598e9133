"""The beat scheduler: RedBeat (a clock that survives its host), made to ride out a Redis
restart or failover.

RedBeat renews its lock at the start of every tick, and any Redis error raised there (or while
reading the schedule) ends `celery beat`: one Redis restart, on a single host with nothing to
restart beat, stopped every commit and control tick until someone noticed. Here a tick that
cannot reach Redis is retried a second later, and a lock that lapsed meanwhile (Redis restarted
without it, or this beat stalled past its timeout) is taken again only if it is free, exactly as
a standby takes it: while another beat holds it, this one waits and sends nothing.

RedBeat documents its settings, not its lock: taking it again after beat_init failed uses three
of its internals, because no documented interface takes RedBeat's lock (and re-creating the
lock here would also mean copying its Lua script that renews to a fixed timeout). They are the
beat_init receiver `acquire_distributed_beat_lock`, called with the beat service Celery sent
beat_init (remembered by `remember_beat_service`), and the scheduler's `lock_key` and `lock`
attributes, which RedBeat's tick renews and turns into a LockError once the lock is not ours.
tests/reliability/test_beat_lock_internals.py pins each on a real Redis.
"""

from __future__ import annotations

import logging
import time

import redis
from celery.beat import Service
from celery.signals import beat_init
from redbeat import RedBeatScheduler
from redbeat.schedulers import acquire_distributed_beat_lock
from redis.exceptions import LockError

log = logging.getLogger("bms.beat")

RETRY_S = 1.0  # how soon a tick that met an unreachable Redis is tried again
# How long a starting beat waits for Redis (a restart, a failover) before it gives up and exits
# for its supervisor: bounded, so a beat pointed at a wrong address says so.
STARTUP_WAIT_S = 120.0
NETWORK_ERRORS = (redis.ConnectionError, redis.TimeoutError)


class ResilientRedBeatScheduler(RedBeatScheduler):
    # The beat service that runs this scheduler, as Celery sent it with beat_init: RedBeat's
    # lock receiver takes the lock for it (None until beat_init, or outside `celery beat`).
    beat_service: Service | None = None

    def setup_schedule(self) -> None:
        """RedBeat reads its schedule from Redis when beat starts: wait out a Redis restart."""
        deadline = time.monotonic() + STARTUP_WAIT_S
        while True:
            try:
                return super().setup_schedule()
            except NETWORK_ERRORS as exc:
                if time.monotonic() > deadline:
                    raise
                log.warning("beat: Redis unreachable at start (%s); waiting for it", exc)
                time.sleep(RETRY_S)

    def tick(self, *args, **kwargs) -> float:
        if self.lock_key and self.lock is None:
            # beat_init could not take the lock (Redis unreachable then; Celery swallows the
            # error): take it now, as RedBeat does at start (blocking: a standby waits here).
            if self.beat_service is None:
                log.warning("beat: no lock and no beat_init yet; waiting for it")
                return RETRY_S
            try:
                acquire_distributed_beat_lock(sender=self.beat_service)
            except NETWORK_ERRORS as exc:
                log.warning("beat: Redis unreachable (%s); lock not taken yet", exc)
                return RETRY_S
            return 0.0
        try:
            return super().tick(*args, **kwargs)
        except LockError:
            return self._retake_lock()
        except NETWORK_ERRORS as exc:
            log.warning("beat: Redis unreachable (%s); trying again in %.0f s", exc, RETRY_S)
            return RETRY_S

    def _retake_lock(self) -> float:
        """The lock is no longer ours: take it if free (then tick at once), else stand by."""
        try:
            taken = self.lock.acquire(blocking=False)
        except NETWORK_ERRORS as exc:
            log.warning("beat: lock lost and Redis unreachable (%s); trying again", exc)
            return RETRY_S
        if taken:
            log.warning("beat: lock lost (Redis restarted or this beat stalled); taken again")
            # A Redis that restarted empty lost the schedule with the lock: write it again
            # (RedBeat keeps entries in Redis; without them nothing would ever be due).
            self.setup_schedule()
            return 0.0
        log.warning("beat: lock lost and held by another beat; standing by")
        return float(self.max_interval)


@beat_init.connect
def remember_beat_service(sender: Service | None = None, **_kwargs) -> None:
    """Keep the beat service on its scheduler, so a lock not taken at beat_init can be taken
    later by RedBeat's own receiver with the very sender Celery gave it."""
    scheduler = getattr(sender, "scheduler", None)
    if isinstance(scheduler, ResilientRedBeatScheduler):
        scheduler.beat_service = sender
