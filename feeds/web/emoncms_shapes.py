"""Feeds as emoncms shapes them in its JSON (Modules/feed/feed_model.php), so its clients
(Home Assistant's emoncms integrations, its apps and graph) read ours unchanged.

emoncms keeps each feed as a Redis hash (`load_feed_to_redis`): every field is a string there
(`"id": "1"`, `"public": "0"`, `"engine": "5"`), and only `time` and `value` are turned back
into numbers (`validate_timevalue`). The last time and value are PHPFina's `lastvalue`: the
start of the last slot and the float32 the file holds (Modules/feed/engine/PHPFina.php).
"""

from __future__ import annotations

import math

import numpy as np

from feeds.models import Feed
from feeds.store import phpfina, service

PHPFINA_ENGINE = 5  # emoncms's engine number for PHPFina (Modules/feed/engine/Engine.php)


def slot_timevalue(
    last: tuple[int, float | None] | None, interval: int
) -> tuple[int | None, float | None]:
    """(start of the slot the last point fell in, the value as stored: float32), as
    PHPFina::lastvalue answers; (None, None) for a feed with no point."""
    if last is None:
        return None, None
    t, v = last
    slot_start = int(t) // interval * interval  # start_time is a multiple of the interval
    if v is None or math.isnan(v):
        return slot_start, None
    return slot_start, float(np.float32(v))


def stored_value(last: tuple[int, float | None] | None) -> float | None:
    """The last value as the file holds it (float32), for value.json and fetch.json."""
    if last is None or last[1] is None or math.isnan(last[1]):
        return None
    return float(np.float32(last[1]))


def timevalues(feeds: list[Feed]) -> dict[int, tuple[int | None, float | None]]:
    last = service.emoncms_timevalues(f.id for f in feeds)
    return {f.id: slot_timevalue(last.get(f.id), f.interval) for f in feeds}


def size_bytes(feed_id: int) -> int:
    try:
        return phpfina.npoints(service.feed_dir(feed_id), feed_id) * phpfina.VALUE_SIZE
    except phpfina.CorruptFeed:
        return -1


def meta(feed: Feed) -> dict:
    """PHPFina::get_meta: the file's interval, start_time, npoints and end_time. A feed with no
    file yet answers as emoncms's freshly created one (start 0, no points)."""
    directory = service.feed_dir(feed.id)
    stored = phpfina.read_meta(directory, feed.id)
    interval = stored.interval if stored else feed.interval
    start = stored.start_time if stored else 0
    count = phpfina.npoints(directory, feed.id) if stored else 0
    # emoncms: start + interval * (npoints - 1), and 0 rather than negative (no points)
    end = max(0, start + interval * (count - 1))
    return {"id": feed.id, "interval": interval, "start_time": start, "npoints": count,
            "end_time": end}  # fmt: skip


def row(feed: Feed, timevalue: tuple[int | None, float | None], userid: int, *, with_meta=False):
    """One feed as feed/list.json and feed/aget.json answer it, key order and types as the
    Redis hash gives them."""
    out = {
        "id": str(feed.id),
        "userid": str(userid),
        "name": feed.name,
        "tag": feed.tag,
        "public": "1" if feed.public else "0",
        "size": str(size_bytes(feed.id)),
        "engine": str(PHPFINA_ENGINE),
        "processList": "",  # only emoncms's virtual feeds have one
        "unit": feed.unit,
        "time": timevalue[0],
        "value": timevalue[1],
    }
    if with_meta:  # feed/list.json?meta=1
        try:
            info = meta(feed)
        except phpfina.CorruptFeed:
            return out  # as emoncms when get_meta fails: the row without the meta fields
        for key in ("start_time", "end_time", "interval", "npoints"):
            out[key] = info[key]
    return out
