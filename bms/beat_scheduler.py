"""The beat scheduler: RedBeat (a clock that survives its host) that rides out a Redis restart or failover.

RedBeat renews its lock at the start of every tick, and any Redis error raised there (or while
reading the schedule) ends `celery beat`: one Redis restart, on a single host with nothing to
restart beat, stopped every commit and control tick until someone noticed. Here a tick that
cannot reach Redis is retried a second later, and a lock that lapsed meanwhile (Redis restarted
without it, or this beat stalled past its timeout) is taken again only if it is free, exactly as
a standby takes it: while another beat holds it, this one waits and sends nothing.
"""

from __future__ import annotations

import logging
import time
from types import SimpleNamespace

import redis
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
            try:
                acquire_distributed_beat_lock(sender=SimpleNamespace(scheduler=self))
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
