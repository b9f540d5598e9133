"""The system watchdog: alarms for what no single app can see about itself.

- feed commit backlog growing (points waiting in Redis, or a buffer that stopped moving),
- data disk nearly full (or not writable),
- a Celery queue that no worker consumes (a dead worker), Celery beat not alive,
- points the feed store refused (too old for a new feed, a gap too large: docs/FEEDS.md),
- alarms whose object or rule was removed (alarms/subjects.py): cleared.

Who runs which check (a dead process cannot report its own death):

- `alarms.tasks.system_watchdog`, every 60 s by beat on the control worker, runs them all but the
  worker check (beat's thread runs that one: its 2 s wait would delay a control tick).
- beat's own process runs `check_workers()` every 60 s in a thread (bms/celery.py), so a dead
  control worker, which can no longer run the task above, is still reported.
- the control worker's main process runs `check_beat()` every 60 s in a thread (bms/celery.py),
  so a dead beat, which can no longer schedule the task above, is still reported.
- /healthz reports both as well, for whoever polls it (docker's healthcheck).

Every alarm goes through alarms.lifecycle: raised once per condition, emailed to
BMS_ALARM_EMAILS in the next digest (alarms/notify.py), cleared here as soon as the condition
ends.
"""

from __future__ import annotations

import errno
import logging
import re
import shutil
import time
import uuid
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

import redis
from celery import current_app
from django.conf import settings

from alarms.heartbeat import BEAT_HEARTBEAT_KEY, BEAT_STOPPED_KEY
from alarms.lifecycle import clear_alarm, in_startup_grace, raise_alarm
from alarms.models import Alarm
from core.redis import get_redis
from feeds.store.service import get_buffer, layout

log = logging.getLogger(__name__)

# Layout of the feed buffer, documented in feeds/store/buffer.py (read here, never written).
FEED_PREFIX = "feeds:"
FEED_DIRTY_KEY = FEED_PREFIX + "dirty"
FEED_RECORD_SIZE = 9
# Which head record each dirty feed had when the watchdog first saw it: feed id -> "hex:t".
HEADS_KEY = "bms:watchdog:feed-heads"

# Control first: without its worker no relay is switched.
QUEUES = ("control", "ingest", "commit")


def watched_queues() -> tuple[str, ...]:
    """The queues that must have a worker: QUEUES (bms/settings.py CELERY_TASK_ROUTES), and
    each feed shard's commit queue."""
    count = int(settings.BMS_FEED_SHARDS)
    if count == 1:
        return QUEUES
    return QUEUES + tuple(f"commit-{k}" for k in range(count))  # feeds/store/shards.py queue_of


BACKLOG_ALARM = "feeds-backlog"
DISK_ALARM = "data-disk"
BEAT_ALARM = "celery-beat"


def worker_alarm(queue: str) -> str:
    return f"celery-worker:{queue}"


# --- feed commit backlog ------------------------------------------------------------------


@dataclass
class Backlog:
    points: int
    feeds: int
    stuck_s: float  # how long the oldest buffered record has been waiting, as far as we saw

    def as_dict(self) -> dict:
        return {"points": self.points, "feeds": self.feeds, "stuck_s": round(self.stuck_s, 1)}


def measure_backlog(client: redis.Redis, now: float) -> Backlog:
    """Points waiting in the feed buffer, and how long its oldest record has not moved.

    A commit trims each feed's buffer from the front, so while commits succeed the first
    record of every buffer changes between two looks. A first record that stays the same
    is a commit that is not happening; its age counts from the first look that saw it.
    (Record times are the devices' clocks, not arrival times, so they cannot say this.)
    """
    feed_ids = sorted(int(x) for x in client.smembers(FEED_DIRTY_KEY))
    pipe = client.pipeline(transaction=False)
    for feed_id in feed_ids:
        key = f"{FEED_PREFIX}buf:{feed_id}"
        pipe.strlen(key)
        pipe.getrange(key, 0, FEED_RECORD_SIZE - 1)
    pipe.hgetall(HEADS_KEY)
    *pairs, seen_raw = pipe.execute()
    seen = {int(k): v.decode() for k, v in seen_raw.items()}
    heads: dict[int, str] = {}
    points = 0
    oldest = now
    for index, feed_id in enumerate(feed_ids):
        length, head = pairs[2 * index], pairs[2 * index + 1]
        if not length:
            continue
        points += length // FEED_RECORD_SIZE
        previous = seen.get(feed_id, "")
        first_seen = now
        if previous.startswith(head.hex() + ":"):
            first_seen = float(previous.rsplit(":", 1)[1])
        heads[feed_id] = f"{head.hex()}:{first_seen}"
        oldest = min(oldest, first_seen)
    pipe = client.pipeline(transaction=True)
    pipe.delete(HEADS_KEY)
    if heads:
        pipe.hset(HEADS_KEY, mapping=heads)
    pipe.execute()
    return Backlog(points=points, feeds=len(heads), stuck_s=now - oldest)


def check_backlog(now: float | None = None) -> dict:
    now = time.time() if now is None else now
    backlog = measure_backlog(get_redis(), now)
    max_points = settings.BMS_ALARM_BACKLOG_POINTS
    max_age = settings.BMS_ALARM_BACKLOG_AGE_S
    if backlog.points >= max_points or (backlog.points and backlog.stuck_s >= max_age):
        raise_alarm(
            BACKLOG_ALARM,
            f"Feed commits are not keeping up: {backlog.points} points waiting in Redis for "
            f"{backlog.feeds} feeds, the oldest for {int(backlog.stuck_s)} s "
            f"(commit interval {settings.BMS_FEED_COMMIT_INTERVAL} s, sync interval "
            f"{settings.BMS_FEED_SYNC_INTERVAL} s). Check the commit worker "
            "and the data disk.",
            source="feeds",
            severity=Alarm.Severity.CRITICAL,
        )
    else:
        clear_alarm(BACKLOG_ALARM)
    return backlog.as_dict()


# --- points the feed store refused ---------------------------------------------------------


# The count the alarm's message states (below): what staff saw when they acknowledged it.
# The feed's name sits between its id and the count (lazily skipped).
REFUSED_COUNT = re.compile(r"Feed \d+\b.*?: (\d+) points refused by the feed store")


def _when_unix(last: str) -> str:
    """The buffer's "t reason" of the latest refused point, its Unix time written as people
    read dates (core/dates.py), in the site's zone (not a raw t=1794861900, which
    nobody reads)."""
    from datetime import UTC, datetime

    from django.utils import timezone

    from core.dates import when_text

    head, _, reason = str(last).partition(" ")
    try:
        moment = datetime.fromtimestamp(int(head), UTC)
    except (ValueError, OverflowError, OSError):
        return str(last)
    return " ".join(filter(None, [when_text(timezone.localtime(moment)), reason]))


def _named(name: str | None) -> str:
    """'hall:temp' after the feed's id, so staff know which feed without looking it up."""
    return f" '{name}'" if name else ""


def refused_alarm(feed_id: int) -> str:
    return f"feed-refused:{feed_id}"


def check_refused() -> dict:
    """One alarm per feed with refused points, its message kept up to date. Once staff have
    acknowledged it, the points it counted are forgotten and it clears; points refused after
    that open a new one."""
    from feeds.models import Feed

    buffer = get_buffer()
    refused = buffer.refused()
    names = {pk: str(f) for pk, f in Feed.objects.in_bulk(list(refused)).items()}
    for feed_id, (count, last) in refused.items():
        key = refused_alarm(feed_id)
        open_alarm = Alarm.objects.filter(key=key, cleared_at__isnull=True).first()
        if open_alarm is not None and open_alarm.acknowledged_at is not None:
            seen = int(REFUSED_COUNT.match(open_alarm.message).group(1))
            buffer.forget_refused(feed_id, seen)
            clear_alarm(key)
            count -= seen
            if count <= 0:
                continue
            open_alarm = None
        message = (
            f"Feed {feed_id}{_named(names.get(feed_id))}: {count} points refused by the feed store "
            "and not written "
            f"(latest: {_when_unix(last)}). A sender's clock is wrong, or the points are older than "
            "BMS_FEED_MAX_BACKFILL_DAYS for a new feed (docs/FEEDS.md)."
        )
        if open_alarm is None:
            raise_alarm(key, message, source="feeds")
        elif open_alarm.message != message:
            Alarm.objects.filter(pk=open_alarm.pk).update(message=message)
    return {str(k): v[0] for k, v in refused.items()}


# --- data disk ----------------------------------------------------------------------------


def _disk_problem(directory: Path, threshold: float) -> tuple[float, str]:
    """(free %, what is wrong or "") of the disk holding `directory`."""
    usage = shutil.disk_usage(directory)
    free_pct = 100.0 * usage.free / usage.total if usage.total else 0.0
    if free_pct < threshold:
        return free_pct, (
            f"Data disk nearly full: {free_pct:.1f}% free ({usage.free // 1_048_576} MB of "
            f"{usage.total // 1_048_576} MB) at {directory}; alarm below {threshold:g}%."
        )
    try:
        probe = directory / f".watchdog-{uuid.uuid4().hex}"
        probe.write_bytes(b"ok")
        probe.unlink()
    except OSError as exc:
        reason = "full" if exc.errno == errno.ENOSPC else "not writable"
        return free_pct, f"Data disk {reason} at {directory}: {exc}"
    return free_pct, ""


def check_disk() -> dict:
    """Free space of the disks holding the feed files (the feed root and, with sharded writers,
    each shard's directory: they may be other disks), and whether a file can be written."""

    root = Path(settings.BMS_FEED_DIR)
    threshold = float(settings.BMS_ALARM_DISK_FREE_PCT)
    # A shard directory is made by its first commit: one not there yet holds nothing.
    directories = [root] + [d for d in layout().dirs if d != root and d.is_dir()]
    found = [_disk_problem(d, threshold) for d in directories]
    free_pct = min(pct for pct, _ in found)
    problem = " ".join(p for _, p in found if p)
    # Clear only a little above the threshold, so a disk hovering at it does not flap.
    if problem:
        raise_alarm(DISK_ALARM, problem, source="system", severity=Alarm.Severity.CRITICAL)
    elif free_pct >= threshold + 1:
        clear_alarm(DISK_ALARM)
    return {"free_pct": round(free_pct, 2), "ok": not problem}


# --- Celery liveness ----------------------------------------------------------------------


def queue_consumers(timeout_s: float = 2.0) -> dict[str, list[str]] | None:
    """Each queue some live worker consumes -> the names of those workers, asked over the
    broker in one broadcast that waits `timeout_s` for replies; None if it cannot ask."""
    try:
        replies = current_app.control.inspect(timeout=timeout_s).active_queues() or {}
    except (OSError, redis.RedisError) as exc:  # broker away: another alarm's business
        log.warning("watchdog: cannot ask workers for their queues: %s", exc)
        return None
    consumers: dict[str, list[str]] = {}
    for worker, queues in sorted(replies.items()):
        for queue in queues:
            consumers.setdefault(queue["name"], []).append(worker)
    return consumers


def unserved_queues(served: Collection[str]) -> list[str]:
    """The queues that must have a worker (watched_queues, control first) that no worker in
    `served` (queue names, or queue_consumers()) consumes. The one answer to "which worker is
    missing" for this watchdog and /healthz (bms/health.py)."""
    return [q for q in watched_queues() if q not in served]


def check_workers(served: Collection[str] | None = None) -> dict:
    served = queue_consumers() if served is None else served
    if served is None:
        return {"checked": False}
    missing = unserved_queues(served)
    for queue in watched_queues():
        if queue in missing:
            raise_alarm(
                worker_alarm(queue),
                f"No Celery worker is consuming the '{queue}' queue: the worker is dead or "
                "stopped" + (" — relays are not being switched." if queue == "control" else "."),
                source="system",
                severity=Alarm.Severity.CRITICAL,
            )
        else:
            clear_alarm(worker_alarm(queue))
    return {"checked": True, "missing": missing}


def beat_restart_grace_s() -> float:
    """How long a missing heartbeat may be a planned restart: the start-up grace, and at least
    the stale bound (a beat that came back within it never looked dead anyway)."""
    return max(float(settings.BMS_ALARM_STARTUP_GRACE), float(settings.BMS_ALARM_BEAT_STALE_S))


def check_beat(now: float | None = None) -> dict:
    """Raise `celery-beat` when beat's heartbeat is missing or stale, except during a restart.

    An ordinary restart (all services, or beat alone) left beat without a heartbeat for a
    minute or two and raised a critical alarm, and its e-mail, every time (#28). Two things are
    a restart, not a dead beat, for beat_restart_grace_s(): beat said it was stopping
    (BEAT_STOPPED_KEY, written on its way out: bms/celery.py), or the process watching it has
    only just started itself. An alarm already open stays open; past the grace a beat that has
    not come back is raised as before."""
    now = time.time() if now is None else now
    stale_after = settings.BMS_ALARM_BEAT_STALE_S
    client = get_redis()
    stamp, stopped = client.mget(BEAT_HEARTBEAT_KEY, BEAT_STOPPED_KEY)
    age = now - int(stamp) if stamp is not None else None
    if age is not None and age <= stale_after:
        clear_alarm(BEAT_ALARM)
        return {"beat_age_s": round(age, 1)}
    grace = beat_restart_grace_s()
    stopped_ago = now - float(stopped) if stopped is not None else None
    planned_stop = stopped_ago is not None and 0 <= stopped_ago < grace
    # in_startup_grace is off when BMS_ALARM_STARTUP_GRACE is 0; a planned stop is not.
    just_started = in_startup_grace(now, grace)
    already_open = Alarm.objects.open().filter(key=BEAT_ALARM).exists()
    if (planned_stop or just_started) and not already_open:
        held = "beat stopped for a restart" if planned_stop else "this process just started"
        return {"beat_age_s": None if age is None else round(age, 1), "held": held}
    raise_alarm(
        BEAT_ALARM,
        "Celery beat is not alive: "
        + ("no heartbeat" if age is None else f"last heartbeat {int(age)} s ago")
        + (
            f" (it stopped for a restart {int(stopped_ago)} s ago and has not come back)"
            if stopped_ago is not None and stopped_ago >= 0
            else ""
        )
        + " — no commits, control ticks or checks are being scheduled.",
        source="system",
        severity=Alarm.Severity.CRITICAL,
    )
    return {"beat_age_s": None if age is None else round(age, 1)}


def _sweep_removed() -> dict:
    from alarms.subjects import sweep_removed

    return sweep_removed()


def run_all(now: float | None = None) -> dict:
    """Every check but the workers', each on its own: one failing (say Redis away) does not
    skip the others. The worker check is not here: it waits up to its inspect timeout (2 s)
    for the workers' replies, and this runs on the control worker, where that wait delayed a
    control tick by ~2 s once a minute (seen in the multi-host runs); beat's own thread runs
    it every BMS_WATCHDOG_EVERY_S (bms/celery.py)."""
    results: dict[str, dict] = {}
    for name, check in (
        ("backlog", lambda: check_backlog(now)),
        ("disk", check_disk),
        ("beat", lambda: check_beat(now)),
        ("refused", check_refused),
        ("removed", _sweep_removed),
    ):
        try:
            results[name] = check()
        except Exception as exc:  # reported and logged; the next run tries again
            log.exception("watchdog check %s failed", name)
            results[name] = {"error": f"{type(exc).__name__}: {exc}"}
    return results


# --- the out-of-band loops (threads in beat and in the control worker) ----------------------


def watch_loop(check, every_s: float, *, first_after_s: float, name: str) -> None:
    """Run `check` every `every_s` forever, in a daemon thread of a Celery process."""
    from django.db import connection

    time.sleep(first_after_s)  # let the other processes start and stamp first
    while True:
        try:
            check()
        except Exception as exc:  # database or Redis away: say so, try again next round
            log.warning("watchdog %s: %s", name, exc)
        finally:
            connection.close()  # this thread's own connection: never hold one between rounds
        time.sleep(every_s)
