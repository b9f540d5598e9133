"""emoncms feed files brought into our feed store: a PHPFina pair copied under a new feed id,
a PHPTimeSeries file converted (feeds/store/phptimeseries.py), and the feed's last value seeded in
Redis from the file.

Why seed: accumulating processes (power_to_kwh, wh_accumulator) start from the feed's last
value when they have no state of their own; an imported kWh feed has none in Redis, so
without the seed the first reading after a move would start the total again from 0.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np

from feeds.store import phpfina

COPY_CHUNK = 8 * 1024 * 1024
SCAN_CHUNK = 1 << 20  # slots read at a time looking back for the last value


def copy_durably(src: Path, dst: Path) -> None:
    """Copy `src` to `dst` through a temporary name, fsync'd: a crash leaves no half file."""
    if dst.exists():
        raise FileExistsError(f"{dst} exists already; refusing to overwrite it")
    tmp = dst.with_name(dst.name + ".importing")
    with open(src, "rb") as fin, open(tmp, "wb") as fout:
        shutil.copyfileobj(fin, fout, COPY_CHUNK)
        fout.flush()
        os.fsync(fout.fileno())
    os.replace(tmp, dst)


def copy_phpfina(meta_file: Path, dat_file: Path, target: Path, feed_id: int) -> phpfina.Meta:
    """Check an emoncms pair and copy it to `target` as feed `feed_id` (.dat first, meta
    last: a meta marks a complete pair). Raises phpfina.CorruptFeed or FileExistsError."""
    meta = phpfina.check_files(meta_file, dat_file)
    target.mkdir(parents=True, exist_ok=True)
    copy_durably(dat_file, phpfina.dat_path(target, feed_id))
    copy_durably(meta_file, phpfina.meta_path(target, feed_id))
    return meta


def last_point(directory: str | os.PathLike, feed_id: int) -> tuple[int, float] | None:
    """(time, value) of the newest finite slot in the feed's file, or None. Reads backwards
    a chunk at a time, so a long trailing gap costs little and a big file is never loaded."""
    meta, data = phpfina.open_feed(directory, feed_id)
    if meta is None:
        return None
    end = len(data)
    while end > 0:
        begin = max(0, end - SCAN_CHUNK)
        finite = np.flatnonzero(np.isfinite(data[begin:end]))
        if len(finite):
            i = begin + int(finite[-1])
            return meta.start_time + i * meta.interval, float(data[i])
        end = begin
    return None


def seed_last_value(buffer, directory: str | os.PathLike, feed_id: int) -> tuple[int, float] | None:
    """Set the feed's last value in Redis from its file, unless it has one already."""
    last = last_point(directory, feed_id)
    if last is not None:
        buffer.seed_last(feed_id, *last)
    return last
