"""The feeds API other apps call (documented in docs/FEEDS.md): Django settings and the Feed
table wired to the engine (feeds/phpfina.py), the Redis buffer (feeds/buffer.py) and the
input processes (feeds/processes.py).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable

import numpy as np
from django.conf import settings

from bms.redis import get_redis
from feeds import phpfina
from feeds.buffer import FLAG_JOIN, FeedBuffer
from feeds.models import Feed
from feeds.processes import InputItem, ProcessRunner

Point = tuple[int, int, float]  # (feed_id, t_unix_seconds, value)
__all__ = [
    "InputItem",
    "Point",
    "commit_all",
    "last_value",
    "last_values",
    "log_points",
    "process_inputs",
    "read",
]


def feed_dir():
    return settings.BMS_FEED_DIR


def get_buffer() -> FeedBuffer:
    buffer = FeedBuffer(get_redis())
    buffer.write_limits = write_limits()
    return buffer


def write_limits() -> dict:
    """How far a point may pad a feed (docs/FEEDS.md, "Padding bounds")."""
    return {
        "max_backfill_s": settings.BMS_FEED_MAX_BACKFILL_DAYS * 86_400,
        "max_gap_slots": settings.BMS_FEED_MAX_GAP_SLOTS,
    }


def _timezone() -> str:
    return getattr(settings, "TIME_ZONE", None) or "Europe/London"


def process_inputs(items: Iterable[InputItem]) -> None:
    """Run each input's process list; buffered points go to Redis in one pipeline."""
    ProcessRunner(get_buffer(), _timezone()).run(items)


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
    return get_buffer().last_values([feed_id]).get(int(feed_id))


def last_values(feed_ids: Iterable[int]) -> dict[int, tuple[int, float]]:
    return get_buffer().last_values(feed_ids)


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
    timezone: str = "Europe/London",
    feed_interval: int | None = None,
) -> list[list]:
    """[[t_ms, value|None], ...] from the file merged with the not-yet-committed buffer."""
    pending = get_buffer().pending(feed_id)
    overlay = None
    if len(pending):
        overlay = (
            pending["t"].astype(np.int64),
            pending["v"].astype(np.float64),
            (pending["flags"] & FLAG_JOIN).astype(bool),  # log_to_feed_join: line on read too
        )
        if feed_interval is None and phpfina.read_meta(feed_dir(), feed_id) is None:
            feed_interval = _interval_of(feed_id)
    return phpfina.read(
        feed_dir(),
        feed_id,
        int(start),
        int(end),
        interval,
        average=average,
        delta=delta,
        skipmissing=skipmissing,
        timezone=timezone,
        max_points=settings.BMS_FEED_MAX_POINTS,
        feed_interval=feed_interval,
        overlay=overlay,
    )


def commit_all(now: float | None = None, sync: bool | None = None) -> dict:
    """Commit buffered points to the files (the beat task feeds.tasks.commit_buffer).

    `sync` None: fsync and release points from Redis when BMS_FEED_SYNC_INTERVAL has passed
    since the last sync, else only write them (see feeds/buffer.py).
    """
    buffer = get_buffer()
    dirty = buffer.dirty_feeds()
    if not dirty:
        return {"feeds": 0, "points": 0, "refused": {}, "dropped": {}, "skipped": False}
    if sync is None:
        sync = buffer.sync_due(settings.BMS_FEED_SYNC_INTERVAL)
    intervals = dict(Feed.objects.filter(pk__in=dirty).values_list("pk", "interval"))
    started = time.monotonic()
    # Only the feeds looked up: one that turned dirty since would be taken for deleted.
    report = buffer.commit(feed_dir(), intervals, now=now, sync=sync, feeds=dirty)
    result = report.as_dict()
    result["seconds"] = round(time.monotonic() - started, 3)
    return result
