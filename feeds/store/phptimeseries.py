"""PHPTimeSeries: emoncms's variable-interval feed format, read and converted to PHPFina.

    feed_<id>.MYD   9 bytes per point, RECORD_FORMAT "<BIf": one byte emoncms writes as 249
                    (read back with "x", so any value is accepted), the time (unix seconds,
                    uint32 little-endian), the value (float32). Points are appended in time
                    order; a point at an existing time overwrites it in place.

We keep only PHPFina, so an imported PHPTimeSeries feed becomes a PHPFina pair. Its interval
is not stored anywhere: `pick_interval` takes the median spacing of the points, rounded up to
the next of emoncms's usual intervals, and coarsens it further if the file would otherwise
span more than `max_slots` slots. Points that share a slot keep the later one, as PHPFina
itself does.

No Django here: callers pass paths and bounds (as feeds/store/phpfina.py).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from feeds.store import phpfina

RECORD_FORMAT = "<BIf"
RECORD_SIZE = struct.calcsize(RECORD_FORMAT)  # 9
RECORD_DTYPE = np.dtype([("flag", "u1"), ("time", "<u4"), ("value", "<f4")])
MARKER = 249  # what emoncms's pack("CIf", 249, ...) writes first
# emoncms's feed interval choices, plus the daily slot of kWh/d feeds.
INTERVALS = (5, 10, 15, 20, 30, 60, 120, 180, 300, 600, 900, 1200, 1800, 3600, 7200, 10800,
             14400, 21600, 43200, 86400)  # fmt: skip
DEFAULT_MAX_SLOTS = phpfina.MAX_PADDING_SLOTS  # 15.8 M slots, 63 MB of .dat
DEFAULT_MAX_BYTES = 2 * 1024**3


class PHPTimeSeriesError(Exception):
    """A .MYD file that cannot be converted (its size, its times)."""


@dataclass(frozen=True)
class Converted:
    interval: int
    start_time: int
    points: int  # points read from the .MYD
    slots: int  # slots in the .dat written
    last: tuple[int, float] | None  # time and value of the newest finite point


def pack(points: list[tuple[int, float]]) -> bytes:
    """The bytes emoncms writes for these points (used by tests and fixtures)."""
    return b"".join(struct.pack(RECORD_FORMAT, MARKER, t, v) for t, v in points)


def read(path: str | os.PathLike, max_bytes: int = DEFAULT_MAX_BYTES) -> np.ndarray:
    size = Path(path).stat().st_size
    if size % RECORD_SIZE:
        raise PHPTimeSeriesError(f"{Path(path).name} is {size} bytes, not a multiple of 9")
    if size > max_bytes:
        raise PHPTimeSeriesError(f"{Path(path).name} is {size} bytes, over {max_bytes}")
    return np.fromfile(path, dtype=RECORD_DTYPE)


def pick_interval(times: np.ndarray, max_slots: int = DEFAULT_MAX_SLOTS) -> int:
    """The smallest usual interval at least the median spacing that fits `max_slots`."""
    ordered = np.unique(times.astype(np.int64))
    spacing = float(np.median(np.diff(ordered))) if len(ordered) > 1 else 10.0
    span = int(ordered[-1] - ordered[0]) if len(ordered) else 0
    for interval in INTERVALS:
        if interval >= spacing and span // interval + 1 <= max_slots:
            return interval
    raise PHPTimeSeriesError(
        f"{span} s of data does not fit {max_slots} slots even at one point a day"
    )


def convert(
    src: str | os.PathLike,
    directory: str | os.PathLike,
    feed_id: int,
    *,
    interval: int | None = None,
    max_slots: int = DEFAULT_MAX_SLOTS,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> Converted:
    """Write `<feed_id>.meta/.dat` in `directory` from the .MYD at `src`. Refuses to overwrite."""
    records = read(src, max_bytes)
    times = records["time"].astype(np.int64)
    values = records["value"].astype(np.float32)
    if len(records) == 0:
        interval = interval or 10
        start, slots_data = 0, np.empty(0, np.float32)
    else:
        interval = interval or pick_interval(times, max_slots)
        start = int(times.min()) // interval * interval
        slot = (times - start) // interval
        n = int(slot.max()) + 1
        if n > max_slots:
            raise PHPTimeSeriesError(f"{n} slots at {interval} s is over {max_slots}")
        slots_data = np.full(n, np.nan, np.float32)
        order = np.argsort(times, kind="stable")  # in time order, so the later point wins
        slots_data[slot[order]] = values[order]
    meta_file = phpfina.meta_path(directory, feed_id)
    dat_file = phpfina.dat_path(directory, feed_id)
    if meta_file.exists() or dat_file.exists():
        raise PHPTimeSeriesError(f"{meta_file.name} exists already; refusing to overwrite it")
    _write_durably(dat_file, slots_data.astype("<f4").tobytes())
    _write_durably(meta_file, phpfina.pack_meta(interval, start))  # meta last: marks it whole
    return Converted(
        interval, start, len(records), len(slots_data), last_point(interval, start, slots_data)
    )


def last_point(interval: int, start: int, data: np.ndarray) -> tuple[int, float] | None:
    """(time, value) of the last finite slot of a PHPFina series, or None."""
    finite = np.flatnonzero(np.isfinite(data))
    if not len(finite):
        return None
    i = int(finite[-1])
    return start + i * interval, float(data[i])


def _write_durably(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".importing")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
