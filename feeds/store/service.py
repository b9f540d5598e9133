"""The feeds API other apps call (documented in docs/FEEDS.md): Django settings and the Feed
table wired to the engine (feeds/store/phpfina.py), the Redis buffer (feeds/store/buffer.py) and the
input processes (feeds/processes/run.py).
"""

from __future__ import annotations

import enum
import math
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np
from django.conf import settings

from core import redis_lock
from core.dates import DEFAULT_TIME_ZONE
from core.redis import get_redis
from feeds.emoncms import read as emoncms_read
from feeds.models import Feed
from feeds.processes.run import InputItem, ProcessRunner, RunCall, RunReport
from feeds.store import low_priority, phpfina, shards
from feeds.store.buffer import FLAG_JOIN, LOCK_TTL_S, FeedBuffer
from feeds.store.last_value import file_last_value

Point = tuple[int, int, float]  # (feed_id, t_unix_seconds, value)
# A feed's buffered points as reads merge them: times, values, and whether each joins the line.
Overlay = tuple[np.ndarray, np.ndarray, np.ndarray]


class Unread(enum.Enum):
    """`overlay` not given: the read fetches the feed's buffered points itself."""

    UNREAD = enum.auto()


UNREAD = Unread.UNREAD
__all__ = [
    "InputItem",
    "Overlay",
    "Point",
    "commit_all",
    "last_value",
    "last_values",
    "log_points",
    "overlays",
    "process_inputs",
    "read",
    "read_emoncms",
]


def feed_dir(feed_id: int | None = None) -> Path:
    """The directory holding a feed's files (its shard's, feeds/store/shards.py); without an id the
    feed root, BMS_FEED_DIR (the only directory with one shard)."""
    if feed_id is None:
        return Path(settings.BMS_FEED_DIR)
    return layout().dir_of(feed_id)


def configured_layout() -> shards.Layout:
    """The shards this process is set up to write (BMS_FEED_SHARDS, BMS_FEED_SHARD_DIRS)."""
    return shards.make_layout(
        settings.BMS_FEED_DIR, settings.BMS_FEED_SHARDS, settings.BMS_FEED_SHARD_DIRS
    )


_recorded: dict[Path, tuple[tuple[int, int], shards.Layout]] = {}


def layout() -> shards.Layout:
    """Where the feed files are: the layout recorded in the feed root (re-read when the record
    changes, one stat per call), or the configured one before the first commit."""
    root = Path(settings.BMS_FEED_DIR)
    try:
        st = (root / shards.RECORD_NAME).stat()
    except FileNotFoundError:
        return configured_layout()
    stamp = (st.st_ino, st.st_mtime_ns)
    cached = _recorded.get(root)
    if cached is None or cached[0] != stamp:
        found = shards.read_record(root)
        if found is None:  # removed since the stat
            return configured_layout()
        cached = _recorded[root] = (stamp, found)
    return cached[1]


def get_buffer(shard: int = 0, shard_count: int | None = None) -> FeedBuffer:
    """The buffer; with a shard, the view of that shard's writer (its lock, its dirty feeds)."""
    count = settings.BMS_FEED_SHARDS if shard_count is None else shard_count
    buffer = FeedBuffer(get_redis(), shard=shard, shards=count)
    buffer.write_limits = write_limits()
    buffer.sync_by = settings.BMS_FEED_SYNC_BY
    return buffer


def write_limits() -> dict:
    """How far a point may pad a feed (docs/FEEDS.md, "Padding bounds")."""
    return {
        # 0: no age bound (the default; the site's history budget bounds history instead).
        "max_backfill_s": settings.BMS_FEED_MAX_BACKFILL_DAYS * 86_400 or None,
        "max_gap_slots": settings.BMS_FEED_MAX_GAP_SLOTS,
    }


def commit_refusals(
    feed_id: int, interval: int, times: list[int], now: float
) -> list[tuple[int, str]]:
    """(time, reason) of each point the commit would refuse if these were written to the feed's
    file as it is now: phpfina.plan_points, the rule write_points applies, with the limits the
    commit uses. For a sender answered before the commit (feed/insert.json), so a point is
    refused in the answer, never after `ok`. Points still in the write buffer are not seen:
    they only move the file's start earlier or its end later, so this errs towards refusing."""
    meta, data = phpfina.open_feed(feed_dir(feed_id), feed_id)
    t = np.asarray(times, dtype=np.int64)
    plan = phpfina.plan_points(
        t, np.zeros(len(t)), np.zeros(len(t), dtype=bool),
        meta=meta, npoints=len(data), interval=interval, now=now, **write_limits(),
    )  # fmt: skip
    return plan.refused


def _timezone() -> str:
    return settings.TIME_ZONE


def process_inputs(
    items: Iterable[InputItem],
    *,
    input_last: dict[int, float] | None = None,
    input_ids: dict[str, int] | None = None,
    mark: tuple[str, str] | None = None,
) -> RunReport:
    """Run each input's process list; buffered points go to Redis in one pipeline.
    `input_last`/`input_ids` feed the *_input steps; `mark` (key, stream entry id) makes a
    redelivered batch a no-op (see ProcessRunner.run)."""
    runner = ProcessRunner(get_buffer(), _timezone(), file_last=_file_last_values)
    return runner.run(items, input_last=input_last, input_ids=input_ids, mark=mark)


def process_many(calls: list[RunCall]) -> list[RunReport]:
    """process_inputs for several batches in one transaction (ProcessRunner.run_many)."""
    if not calls:
        return []
    runner = ProcessRunner(get_buffer(), _timezone(), file_last=_file_last_values)
    return runner.run_many(calls)


def _file_last_values(feed_ids: Iterable[int]) -> dict[int, tuple[int, float]]:
    """Newest finite (t, value) per feed from its file, each in its own shard's directory."""
    out: dict[int, tuple[int, float]] = {}
    for feed_id in map(int, feed_ids):
        last = file_last_value(feed_dir(feed_id), feed_id)
        if last is not None:
            out[feed_id] = last
    return out


def log_points(points: Iterable[Point]) -> None:
    """Buffer raw points. All or nothing: a non-finite value or a bad time raises InvalidValue
    and nothing of the call is buffered."""
    rows = []
    for feed_id, t, value in points:
        v = float(value)
        if not math.isfinite(v) or abs(v) >= 3.4e38:
            raise phpfina.InvalidValue(f"feed {feed_id}: value {value!r} is not a finite float32")
        if not 0 <= int(t) <= 0xFFFFFFFF:
            raise phpfina.InvalidValue(f"feed {feed_id}: time {t!r} is out of range")
        rows.append((int(feed_id), int(t), v, False))
    get_buffer().add(rows)


def last_value(feed_id: int) -> tuple[int, float] | None:
    return last_values([feed_id]).get(int(feed_id))


def last_values(feed_ids: Iterable[int]) -> dict[int, tuple[int, float]]:
    """Newest (t, value) per feed: Redis's, else the file's last value (as emoncms's
    get_timevalue: an imported feed, or one after Redis lost its data, still has one)."""
    ids = [int(x) for x in feed_ids]
    found = get_buffer().last_values(ids)
    missing = [f for f in ids if f not in found]
    if missing:
        found.update(_file_last_values(missing))
    return found


def _interval_of(feed_id: int) -> int | None:
    return Feed.objects.filter(pk=feed_id).values_list("interval", flat=True).first()


def read(
    feed_id: int,
    start: int,
    end: int,
    interval: int | str,
    *,
    average: bool = False,
    delta: bool = False,
    skipmissing: bool = False,
    timezone: str = DEFAULT_TIME_ZONE,
    feed_interval: int | None = None,
    max_points: int | None = None,
    overlay: Overlay | None | Unread = UNREAD,
) -> list[list]:
    """[[t_ms, value|None], ...] from the file merged with the not-yet-committed buffer;
    at most `max_points` (default BMS_FEED_MAX_POINTS) or phpfina.TooManyPoints. `overlay`:
    the feed's buffered points from `overlays`, when a read of several feeds fetched them."""
    overlay = _overlay(feed_id) if overlay is UNREAD else overlay
    if overlay is not None:
        if feed_interval is None and phpfina.read_meta(feed_dir(feed_id), feed_id) is None:
            feed_interval = _interval_of(feed_id)
    return phpfina.read(
        feed_dir(feed_id),
        feed_id,
        int(start),
        int(end),
        interval,
        average=average,
        delta=delta,
        skipmissing=skipmissing,
        timezone=timezone,
        max_points=settings.BMS_FEED_MAX_POINTS if max_points is None else max_points,
        feed_interval=feed_interval,
        overlay=overlay,
    )


def _overlay(feed_id: int) -> Overlay | None:
    return _as_overlay(get_buffer().pending(feed_id))


# Feeds whose buffered points one round trip of `overlays` fetches: a read of 50 feeds makes 5
# round trips instead of 50, and holds at most this many feeds' buffers at once (a buffer has
# no bound of its own while commits are stopped, and the feeds after a refused one are never
# fetched).
OVERLAY_GROUP = 10


def overlays(feed_ids: list[int]) -> Iterator[Overlay | None]:
    """Each feed's buffered points, in order, for a read of several feeds to pass to `read` or
    `read_emoncms` in turn, fetched OVERLAY_GROUP feeds a round trip (MGET) as the read reaches
    them: each feed's own read makes a round trip, 0.1-0.25 ms of CPU on a 2-core machine
    (docs/BENCHMARKS.md). A group is fetched before its files are read, as a single read does:
    a commit writes a point to its file before it leaves the buffer, so each point is in this
    snapshot or in the file read after it."""
    for start in range(0, len(feed_ids), OVERLAY_GROUP):
        group = feed_ids[start : start + OVERLAY_GROUP]
        for pending in get_buffer().pending_many(group):
            yield _as_overlay(pending)


def _as_overlay(pending: np.ndarray) -> Overlay | None:
    if not len(pending):
        return None
    return (
        pending["t"].astype(np.int64),
        pending["v"].astype(np.float64),
        (pending["flags"] & FLAG_JOIN).astype(bool),  # log_to_feed_join: line on read too
    )


def emoncms_timevalues(feed_ids: Iterable[int]) -> dict[int, tuple[int, float | None]]:
    """Last (time, value) per feed as emoncms's get_timevalue: the buffer's (Redis) last value,
    else the file's last slot (None when that slot is a gap, as PHPFina::lastvalue; not the
    last finite value that accumulators continue from); feeds with neither are left out."""
    ids = [int(i) for i in feed_ids]
    out: dict[int, tuple[int, float | None]] = dict(get_buffer().last_values(ids))
    for feed_id in ids:
        if feed_id not in out:
            try:
                last = emoncms_read.file_last(feed_dir(feed_id), feed_id)
            except phpfina.CorruptFeed:
                last = None
            if last is not None:
                out[feed_id] = last
    return out


def read_emoncms(
    feed_id: int,
    request: emoncms_read.Request,
    *,
    feed_interval: int,
    max_points: int,
    overlay: Overlay | None | Unread = UNREAD,
) -> tuple[np.ndarray, np.ndarray]:
    """(times s, values with NaN) as emoncms's /feed/data.json computes them (docs/FEEDS.md),
    from the file merged with the not-yet-committed buffer (`overlay` as for `read`)."""
    return emoncms_read.read(
        feed_dir(feed_id),
        feed_id,
        request,
        feed_interval=feed_interval,
        overlay=_overlay(feed_id) if overlay is UNREAD else overlay,
        last=emoncms_timevalues([feed_id]).get(feed_id) if request.delta else None,
        max_points=max_points,
    )


def value_at(feed_id: int, t: int, *, feed_interval: int) -> float | None:
    """emoncms's PHPFina get_value: the slot nearest `t` (round half away from zero), file and
    buffer merged; None when missing or outside the feed."""
    view = phpfina.open_view(
        feed_dir(feed_id), feed_id, feed_interval=feed_interval, overlay=_overlay(feed_id)
    )
    if view is None:
        return None
    slot = int(emoncms_read.php_round((int(t) - view.start_time) / view.interval))
    if slot < 0:
        return None
    value = phpfina.window_values(view, np.array([slot, slot + 1]), "sample")[0]
    return None if math.isnan(value) else float(value)


def commit_all(
    now: float | None = None, sync: bool | None = None, shard: int | None = None
) -> dict:
    """Commit buffered points to the files (the beat task feeds.tasks.commit_buffer): one
    shard's feeds, or with `shard` None every shard's in turn, each under its own lock.

    `sync` None: fsync and release points from Redis when BMS_FEED_SYNC_INTERVAL has passed
    since the shard's last sync, else only write them (see feeds/store/buffer.py). Raises
    shards.LayoutMismatch, writing nothing, when the files were re-sharded under this process.
    """
    configured = configured_layout()
    shards.check_or_record(settings.BMS_FEED_DIR, configured)
    todo = range(configured.shards) if shard is None else [int(shard)]
    total = {"feeds": 0, "points": 0, "refused": {}, "dropped": {}, "skipped": False}
    started = time.monotonic()
    for k in todo:
        buffer = get_buffer(k, configured.shards)
        result = commit_shard(buffer, configured.dirs[k], now=now, sync=sync)
        for name in ("feeds", "points"):
            total[name] += result[name]
        for name in ("refused", "dropped"):
            total[name].update(result[name])
        total["skipped"] = total["skipped"] or result["skipped"]
        if "synced" in result:
            total["synced"] = total.get("synced", True) and result["synced"]
    if total["feeds"]:
        total["seconds"] = round(time.monotonic() - started, 3)
    return total


def commit_shard(
    buffer: FeedBuffer,
    directory: Path,
    *,
    now: float | None = None,
    sync: bool | None = None,
    token: str | None = None,
) -> dict:
    """Commit one shard's dirty feeds into `directory`; with `token`, under a lock the caller
    already holds (the re-shard's drain)."""
    dirty = buffer.dirty_feeds()
    if not dirty:
        return {"feeds": 0, "points": 0, "refused": {}, "dropped": {}, "skipped": False}
    if sync is None:
        sync = buffer.sync_due(settings.BMS_FEED_SYNC_INTERVAL)
    intervals = dict(Feed.objects.filter(pk__in=dirty).values_list("pk", "interval"))
    # Only the feeds looked up: one that turned dirty since would be taken for deleted.
    if token is None:
        report = low_priority.run(
            lambda: buffer.commit(directory, intervals, now=now, sync=sync, feeds=dirty),
            settings.BMS_FEED_COMMIT_NICE,
        )
    else:
        report = buffer.commit_holding(token, directory, intervals, now=now, sync=sync, feeds=dirty)
    return report.as_dict()


def acquire_all_commit_locks(count: int, wait_s: float) -> list[tuple[FeedBuffer, str]]:
    """Hold the commit lock of shards 0..count-1 (waiting up to `wait_s` for commits that run
    now to end): no shard writes while the caller moves files. Release with
    `release_commit_locks`. Raises TimeoutError, holding nothing, if one stays taken."""
    held: list[tuple[FeedBuffer, str]] = []
    deadline = time.monotonic() + wait_s
    try:
        for k in range(count):
            buffer = get_buffer(k, count)
            while (token := redis_lock.acquire(buffer.redis, buffer.lock_key, LOCK_TTL_S)) is None:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the commit lock of shard {k} stayed taken {wait_s:g} s")
                time.sleep(0.2)
            held.append((buffer, token))
    except BaseException:
        release_commit_locks(held)
        raise
    return held


def renew_commit_locks(held: list[tuple[FeedBuffer, str]]) -> None:
    for buffer, token in held:
        if not redis_lock.renew(buffer.redis, buffer.lock_key, token, LOCK_TTL_S):
            raise RuntimeError(f"lost the commit lock {buffer.lock_key}")


def release_commit_locks(held: list[tuple[FeedBuffer, str]]) -> None:
    for buffer, token in held:
        redis_lock.release(buffer.redis, buffer.lock_key, token)
