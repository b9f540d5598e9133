"""PHPFina: emoncms's fixed-interval feed format, read and written byte for byte.

    <id>.meta  16 bytes, META_FORMAT "<4I": 0 (id, unused), 0 (npoints, unused),
               interval (seconds), start_time (unix seconds, normally a multiple of interval)
    <id>.dat   VALUE_FORMAT "<f" per slot, NaN = missing; slot = (t - start_time) // interval,
               npoints = filesize // 4. No timestamps, no index: reads are arithmetic.

A point before start_time, up to MAX_PREPEND_S earlier, rebuilds the pair with an earlier
start_time (NaN slots for the gap, then the old data): see `_prepend` for how a crash or a
concurrent read never sees a meta that disagrees with its .dat.

This module knows nothing of Django, Redis or settings: callers pass the directory, the limits
and `now`, so it is testable on its own and usable from scripts (bench/, an emoncms folder).
"""

from __future__ import annotations

import fcntl
import math
import os
import shutil
import struct
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import numpy as np

from feeds.store import mapped, scratch, summaries

META_FORMAT = "<4I"
META_SIZE = struct.calcsize(META_FORMAT)  # 16
VALUE_FORMAT = "<f"
VALUE_SIZE = struct.calcsize(VALUE_FORMAT)  # 4
VALUE_DTYPE = np.dtype("<f4")

# emoncms refuses to pad more than this many slots in one write (a year of 2 s data): a wrong
# clock must not fill the disk with NaN.
MAX_PADDING_SLOTS = 15_768_000
# A point at most this far before the feed's start_time is kept: the file is rebuilt with an
# earlier start (history uploaded after live data created the file, a batch held back by
# retries). The bound is emoncms's padding bound read backwards (5 years of 10 s slots, and
# never more than MAX_PADDING_SLOTS slots): history is bounded by what it costs on disk (the
# site's history budget, sensors/ingest/history_budget.py), not by its age. emoncms itself
# skips a point before start_time; we keep it.
MAX_PREPEND_S = 5 * 365 * 86_400
# A point this far ahead of `now` is a wrong clock, not a reading.
MAX_FUTURE_S = 3600
# Inside the file, write holes of up to this many slots back unchanged instead of splitting the
# write: they share the same 4 KiB pages, so one pwrite dirties no more than several would.
COALESCE_SLOTS = 1024
DEFAULT_MAX_POINTS = 20_000
CALENDAR_INTERVALS = ("daily", "weekly", "monthly")
BEFORE_START = "further before the feed's start_time than a prepend may pad"
TOO_OLD = "would extend the feed back before now minus the backfill bound"


class FeedError(Exception):
    """Base of everything this module raises on purpose."""


class CorruptFeed(FeedError):
    """The meta is not 16 bytes, the .dat is not a whole number of floats, or the interval is 0."""


class InvalidValue(FeedError):
    """NaN or infinity was offered as a value, or a time outside uint32."""


class TimestampBeforeStart(FeedError):
    """The point is more than MAX_PREPEND_S before the feed's first slot."""


class GapTooLarge(FeedError):
    """Writing the point would pad more than MAX_PADDING_SLOTS missing slots."""


class TimestampInFuture(FeedError):
    """The point is more than MAX_FUTURE_S ahead of now: a wrong clock."""


class TooManyPoints(FeedError):
    """A read would return more points than the caller allows."""


class BadReadRequest(FeedError):
    """A read parameter is unusable; `param` names it (for a 400 that says which)."""

    def __init__(self, param: str, message: str) -> None:
        super().__init__(f"{param}: {message}")
        self.param = param


@dataclass(frozen=True)
class Meta:
    interval: int
    start_time: int


@dataclass
class WriteReport:
    written: int = 0
    refused: list[tuple[int, str]] = field(default_factory=list)  # (t, reason)


def meta_path(directory: str | os.PathLike, feed_id: int) -> Path:
    return Path(directory) / f"{int(feed_id)}.meta"


def dat_path(directory: str | os.PathLike, feed_id: int) -> Path:
    return Path(directory) / f"{int(feed_id)}.dat"


def _file(directory: str | os.PathLike, feed_id: int, suffix: str) -> str:
    # A plain string path for the write path: a commit of 10,000 feeds makes several of
    # these per feed, and pathlib's parsing cost more than the syscalls they name.
    return f"{os.fspath(directory)}{os.sep}{int(feed_id)}{suffix}"


def max_prepend_slots(interval: int) -> int:
    """How many slots a write may add before a feed's start_time (MAX_PREPEND_S of them, at
    most MAX_PADDING_SLOTS: a prepend pads no more than a write past the end may)."""
    return min(MAX_PREPEND_S // int(interval), MAX_PADDING_SLOTS)


# The new pair of a prepend, before it replaces the originals (see _prepend).
def _prepend_paths(directory: str | os.PathLike, feed_id: int) -> tuple[Path, Path]:
    return Path(directory) / f"{int(feed_id)}.meta.tmp", Path(directory) / f"{int(feed_id)}.dat.tmp"


# --- meta ------------------------------------------------------------------------------------


def pack_meta(interval: int, start_time: int) -> bytes:
    return struct.pack(META_FORMAT, 0, 0, interval, start_time)


def unpack_meta(raw: bytes) -> Meta:
    if len(raw) != META_SIZE:
        raise CorruptFeed(f"meta is {len(raw)} bytes, expected {META_SIZE}")
    _id, _npoints, interval, start_time = struct.unpack(META_FORMAT, raw)
    if interval < 1:
        raise CorruptFeed("meta interval is 0")
    return Meta(interval=interval, start_time=start_time)


def read_meta(directory: str | os.PathLike, feed_id: int) -> Meta | None:
    """The feed's meta, or None when the feed has no files yet."""
    try:
        fd = os.open(_file(directory, feed_id, ".meta"), os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:  # os.read, not open(): a buffered file object costs more than the read itself
        raw = os.read(fd, 1 << 16)  # any meta longer than 16 bytes is refused, so 64 KiB is all
    finally:
        os.close(fd)
    return unpack_meta(raw)


def _write_meta(directory: str | os.PathLike, feed_id: int, meta: Meta) -> None:
    # Written to a temporary name and renamed, so a crash never leaves a short meta behind.
    # Not ".meta.tmp": that name marks a prepend in progress (see _prepend).
    final = meta_path(directory, feed_id)
    tmp = final.with_suffix(".meta.new")
    with open(tmp, "wb") as fh:
        fh.write(pack_meta(meta.interval, meta.start_time))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, final)


def create(directory: str | os.PathLike, feed_id: int, interval: int) -> Meta:
    """An empty feed, as emoncms creates one: meta with start_time 0 and an empty .dat."""
    if interval < 1:
        raise FeedError("interval must be at least 1 second")
    os.makedirs(directory, exist_ok=True)
    meta = Meta(interval=int(interval), start_time=0)
    _write_meta(directory, feed_id, meta)
    dat_path(directory, feed_id).touch()
    return meta


def npoints(directory: str | os.PathLike, feed_id: int) -> int:
    try:
        size = os.stat(_file(directory, feed_id, ".dat")).st_size
    except FileNotFoundError:
        return 0
    if size % VALUE_SIZE:
        raise CorruptFeed(f"{feed_id}.dat is {size} bytes, not a multiple of {VALUE_SIZE}")
    return size // VALUE_SIZE


def check_files(meta_file: str | os.PathLike, dat_file: str | os.PathLike) -> Meta:
    """Validate a meta/dat pair (for import); raise CorruptFeed saying what is wrong."""
    meta_size = os.path.getsize(meta_file)
    if meta_size != META_SIZE:
        raise CorruptFeed(f"{meta_file}: meta is {meta_size} bytes, expected {META_SIZE}")
    dat_size = os.path.getsize(dat_file)
    if dat_size % VALUE_SIZE:
        raise CorruptFeed(f"{dat_file}: {dat_size} bytes is not a multiple of {VALUE_SIZE}")
    with open(meta_file, "rb") as fh:
        return unpack_meta(fh.read())


# --- prepend: rebuilding the pair with an earlier start_time --------------------------------
#
# PHPFina has no way to insert before slot 0, so a prepend writes a new pair and switches to
# it. Two renames cannot be atomic together, so:
#   1. write <id>.dat.tmp (NaN gap + old data) and fsync it, then <id>.meta.tmp and fsync it;
#   2. under an exclusive flock on the feed directory: rename .dat.tmp over .dat, fsync the
#      directory, rename .meta.tmp over .meta, fsync the directory.
# What a crash leaves is then told apart by the names alone (`_recover`):
#   .dat.tmp still there   -> the switch never started: the originals are intact, delete both
#                             temporaries (the buffered records are still in Redis; the next
#                             commit does the prepend again);
#   only .meta.tmp there   -> .dat is already the new one: .meta.tmp is its meta, finish the
#                             rename (readers use .meta.tmp meanwhile, see `_current_meta`).
# Readers take a shared flock on the directory while they read the meta and open the .dat
# (`open_feed`), so they see the old pair or the new one, never the new .dat with the old meta
# (a memmap keeps the inode it opened, so the lock is held only for the opens). The lock is
# per directory, not per feed, so no extra file sits beside emoncms's two; it is held only for
# two renames, microseconds.


class _DirectoryLock:
    def __init__(self, directory: str | os.PathLike, exclusive: bool) -> None:
        self.directory = directory
        self.mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
        self.fd = -1

    def __enter__(self) -> int:
        self.fd = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(self.fd, self.mode)
        except BaseException:
            os.close(self.fd)
            raise
        return self.fd

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)  # closing the descriptor releases the flock


def _current_meta(directory: str | os.PathLike, feed_id: int) -> Meta | None:
    """The meta that goes with the .dat now on disk: normally <id>.meta, but after a crash
    between a prepend's two renames the new meta still waiting in <id>.meta.tmp.

    Call it holding the directory lock (shared is enough). .meta.tmp is read before .dat.tmp
    is looked for: while a writer is still building the pair, .dat.tmp exists and only the
    exclusive lock removes it, so a .meta.tmp caught half-written is never used.
    """
    meta_tmp, _dat_tmp = _prepend_paths(directory, feed_id)
    try:
        pending = meta_tmp.read_bytes()
    except FileNotFoundError:
        pending = None  # the usual case: no prepend half-done
    if pending is not None and _switch_half_done(directory, feed_id):
        return unpack_meta(pending)
    return read_meta(directory, feed_id)


def _switch_half_done(directory: str | os.PathLike, feed_id: int) -> bool:
    """A .meta.tmp without a .dat.tmp, written no earlier than the .dat (which kept the
    .dat.tmp's mtime through the rename). An older lone .meta.tmp is a leftover of the engine
    before prepends, whose meta writes used that name: the .dat was written after it."""
    meta_tmp, dat_tmp = _prepend_paths(directory, feed_id)
    if dat_tmp.exists():
        return False
    try:
        return meta_tmp.stat().st_mtime_ns >= dat_path(directory, feed_id).stat().st_mtime_ns
    except FileNotFoundError:
        return False


def _recover(directory: str | os.PathLike, feed_id: int, fsync: bool = True) -> None:
    """Finish or undo a prepend a crash interrupted (the writer calls this before writing).
    Under the exclusive lock, so a reader never pairs a .meta.tmp with a .dat it no longer
    goes with."""
    exists = os.path.exists
    if not (
        exists(_file(directory, feed_id, ".meta.tmp"))
        or exists(_file(directory, feed_id, ".dat.tmp"))
    ):
        return
    meta_tmp, dat_tmp = _prepend_paths(directory, feed_id)
    with _DirectoryLock(directory, exclusive=True) as dir_fd:
        if dat_tmp.exists():  # the switch never started: the originals are intact
            dat_tmp.unlink()
            meta_tmp.unlink(missing_ok=True)
        elif _switch_half_done(directory, feed_id):  # the .dat is switched: install its meta
            unpack_meta(meta_tmp.read_bytes())  # CorruptFeed rather than install a bad meta
            os.replace(meta_tmp, meta_path(directory, feed_id))
        else:
            meta_tmp.unlink(missing_ok=True)
        if fsync:
            os.fsync(dir_fd)


def _prepend(
    directory: str | os.PathLike, feed_id: int, meta: Meta, slots: int, fsync: bool = True
) -> Meta:
    """Rebuild the feed with `slots` NaN slots before its data (see the comment above)."""
    new = Meta(interval=meta.interval, start_time=meta.start_time - slots * meta.interval)
    meta_tmp, dat_tmp = _prepend_paths(directory, feed_id)
    with open(dat_tmp, "wb") as out, open(dat_path(directory, feed_id), "rb") as old:
        out.write(np.full(slots, np.nan, dtype=VALUE_DTYPE).tobytes())
        shutil.copyfileobj(old, out, 1 << 20)
        out.flush()
        if fsync:
            os.fsync(out.fileno())
    with open(meta_tmp, "wb") as out:
        out.write(pack_meta(new.interval, new.start_time))
        out.flush()
        if fsync:
            os.fsync(out.fileno())
    with _DirectoryLock(directory, exclusive=True) as dir_fd:
        os.replace(dat_tmp, dat_path(directory, feed_id))
        if fsync:
            os.fsync(dir_fd)  # the dat switch is durable before the meta's: see _recover
        os.replace(meta_tmp, meta_path(directory, feed_id))
        if fsync:
            os.fsync(dir_fd)
    return new


# --- writes ----------------------------------------------------------------------------------


def _finite_mask(values: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        return np.isfinite(values) & np.isfinite(values.astype(VALUE_DTYPE))


@dataclass
class WritePlan:
    """What write_points will do with a block: the slots and values it writes (after the
    prepend), the feed's start_time, the slots a prepend adds, and the points it refuses."""

    slots: np.ndarray
    values: np.ndarray
    join: np.ndarray
    start_time: int
    grow: int
    refused: list[tuple[int, str]]
    # The kept points in arrival order (slot, float32 value, join), before "last arrival wins":
    # which of them extend the file, and so draw a join line, depends on that order.
    arrival: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None


def plan_points(
    t: np.ndarray,
    v: np.ndarray,
    j: np.ndarray,
    *,
    meta: Meta | None,
    npoints: int,
    interval: int,
    now: float,
    max_backfill_s: int | None = None,
    max_gap_slots: int = MAX_PADDING_SLOTS,
) -> WritePlan:
    """The refusal rules of write_points, with no file touched: given the feed's meta (None:
    no files yet) and length, which points a write of this block keeps and which it refuses,
    and why. write_points runs exactly this; a caller that answers a sender before the commit
    (feed/insert.json, /input/bulk) runs it on the same file to refuse before it answers."""
    refused: list[tuple[int, str]] = []

    def refuse(times: np.ndarray, reason: str) -> None:
        refused.extend((int(x), reason) for x in times)

    ok = _finite_mask(v)
    if len(t) and ok.all() and t.min() >= 0 and t.max() <= min(0xFFFFFFFF, now + MAX_FUTURE_S):
        pass  # the usual block: nothing refused so far, nothing to select (small blocks of many
        # feeds in one commit spend most of their time in numpy's per-call overhead)
    else:
        refuse(t[~ok], "value is not a finite float32")
        bad_time = ok & ((t < 0) | (t > 0xFFFFFFFF))
        refuse(t[bad_time], "time outside unsigned 32-bit seconds")
        ok &= ~bad_time
        future = ok & (t > now + MAX_FUTURE_S)
        refuse(t[future], "time is more than an hour in the future")
        ok &= ~future
        t, v, j = t[ok], v[ok], j[ok]
    fi = meta.interval if meta is not None else int(interval)
    start = meta.start_time if meta is not None else 0
    n = npoints
    empty = np.zeros(0, dtype=np.int64)

    def nothing() -> WritePlan:
        return WritePlan(empty, np.zeros(0, VALUE_DTYPE), np.zeros(0, bool), start, 0, refused)

    if len(t) == 0:
        return nothing()
    oldest = None if max_backfill_s is None else now - max_backfill_s
    max_gap_slots = min(int(max_gap_slots), MAX_PADDING_SLOTS)
    if n == 0 and oldest is not None:
        # A new feed starts no earlier than the backfill bound: its first slot fixes how much
        # NaN every later point may pad.
        old = t < oldest
        refuse(t[old], TOO_OLD)
        t, v, j = t[~old], v[~old], j[~old]
        if len(t) == 0:
            return nothing()
    if n == 0:
        start = int(t.min()) // fi * fi  # the first write fixes start_time
    slots = (t - start) // fi
    grow = 0
    if slots.min() < 0:
        # Late points: keep those within MAX_PREPEND_S (and a start_time that stays >= 0).
        limit = min(max_prepend_slots(fi), start // fi)
        too_early = slots < -limit
        refuse(t[too_early], BEFORE_START)
        if oldest is not None:
            too_old = ~too_early & (slots < 0) & (t < oldest)
            refuse(t[too_old], TOO_OLD)
            too_early |= too_old
        t, v, j, slots = t[~too_early], v[~too_early], j[~too_early], slots[~too_early]
        if len(t) == 0:
            return nothing()
        if slots.min() < 0:
            grow = int(-slots.min())
            start -= grow * fi
            slots += grow
            n += grow

    arrival = (slots, v.astype(VALUE_DTYPE), j)
    if len(slots) == 1 or bool((slots[1:] > slots[:-1]).all()):
        v = arrival[1]  # in order, one point a slot (the usual block): as below
    else:
        # Last arrival wins per slot: unique on the reversed arrays finds each slot's last index.
        rev_unique, rev_index = np.unique(slots[::-1], return_index=True)
        pick = len(slots) - 1 - rev_index
        slots, v, j, t = rev_unique, v[pick].astype(VALUE_DTYPE), j[pick], t[pick]

    # Past the end, one write pads at most max_gap_slots in all (so each gap is at most that,
    # emoncms's rule when max_gap_slots is MAX_PADDING_SLOTS).
    past = slots >= n
    if past.any():
        p = np.flatnonzero(past)
        padding = slots[p] - n - np.arange(len(p))  # NaN slots written up to each point
        too_far = np.flatnonzero(padding > max_gap_slots)
        if len(too_far):
            cut = p[too_far[0]]  # this and every later point pad at least as much
            refuse(t[cut:], f"gap of more than {max_gap_slots} slots")
            first_refused = slots[cut]
            slots, v, j = slots[:cut], v[:cut], j[:cut]
            kept = arrival[0] < first_refused
            arrival = (arrival[0][kept], arrival[1][kept], arrival[2][kept])
    return WritePlan(slots, v, j, start, grow, refused, arrival)


def write_points(
    directory: str | os.PathLike,
    feed_id: int,
    interval: int,
    times: Sequence[int] | np.ndarray,
    values: Sequence[float] | np.ndarray,
    join: Sequence[bool] | np.ndarray | None = None,
    *,
    now: float | None = None,
    fsync: bool = True,
    data_fsync: bool | None = None,
    max_backfill_s: int | None = None,
    max_gap_slots: int = MAX_PADDING_SLOTS,
) -> WriteReport:
    """Write a block of points, in arrival order (a later point for the same slot wins).

    `interval` is used only when the feed has no files yet; an existing meta's interval rules.
    A point whose `join` is true fills the NaN padding before it linearly from the previous
    value. Refused points (bad value, before start, too far ahead, gap too large) are reported
    in the result, not raised, so one bad point never blocks the rest of a block.
    Use `write` for a single point with exceptions.

    Padding is bounded so a point cannot fill the disk with NaN: `max_backfill_s` (None: no
    bound) refuses a point that would put a feed's first slot earlier than `now` minus that
    (the first point of a new feed, or a prepend); `max_gap_slots` (at most emoncms's
    MAX_PADDING_SLOTS) refuses a point past the end that would pad more slots than that.
    Together with MAX_FUTURE_S a feed's file then only grows as fast as the clock does.

    `fsync` covers every file change; `data_fsync=False` leaves this call's .dat pages in the
    page cache for a later `sync_data` (the write buffer syncs less often than it writes, see
    feeds/store/buffer.py), while a meta rewrite or a prepend is still made durable at once.
    """
    data_fsync = fsync if data_fsync is None else data_fsync
    t = np.asarray(times, dtype=np.int64).ravel()
    v = np.asarray(values, dtype=np.float64).ravel()
    j = np.zeros(len(t), dtype=bool) if join is None else np.asarray(join, dtype=bool).ravel()
    if not (len(t) == len(v) == len(j)):
        raise FeedError("times, values and join must have the same length")
    now = time.time() if now is None else now
    _recover(directory, feed_id, fsync)  # nothing to do, two stats, when there is no directory
    meta = read_meta(directory, feed_id)
    n = npoints(directory, feed_id) if meta is not None else 0
    plan = plan_points(
        t, v, j, meta=meta, npoints=n, interval=interval, now=now,
        max_backfill_s=max_backfill_s, max_gap_slots=max_gap_slots,
    )  # fmt: skip
    report = WriteReport(refused=plan.refused)
    if len(plan.slots) == 0:
        return report
    meta = meta or create(directory, feed_id, interval)
    if plan.start_time != meta.start_time and plan.grow == 0:
        # The first write fixes start_time (an empty feed may hold a stale one from a crash).
        meta = Meta(interval=meta.interval, start_time=plan.start_time)
        _write_meta(directory, feed_id, meta)
    if plan.grow:
        meta = _prepend(directory, feed_id, meta, plan.grow, fsync)
    n += plan.grow
    slots, v, j, past = plan.slots, plan.values, plan.join, plan.slots >= n

    # The summary (feeds/store/summaries.py) follows every write; a feed shorter than one
    # superblock has none. After a prepend it no longer matches (new inode): begin resets it.
    summary = None
    if max(n, int(slots[-1]) + 1) >= summaries.SUPER_SLOTS:
        summary = summaries.Updater.begin_or_drop(
            directory, feed_id, meta.interval, meta.start_time, int(slots[0])
        )
    fd = os.open(dat_path(directory, feed_id), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        inside = ~past
        if inside.any():
            _write_inside(fd, slots[inside], v[inside])
        if past.any():
            _write_past_end(fd, n, slots[past], v[past], plan.arrival)
        if data_fsync:
            os.fsync(fd)
        if summary is not None:
            summary, updating = None, summary
            updating.finish_or_leave(fd, slots)
    finally:
        if summary is not None:  # the write failed: a dirty summary is rebuilt, not trusted
            summary.abandon()
        os.close(fd)
    report.written = int(len(slots))
    return report


def append_in_place(
    directory: str | os.PathLike, feed_id: int, times: np.ndarray, values: np.ndarray, *, now: float
) -> int | None:
    """The usual block, written as write_points would write it, with a tenth of its work: or
    None, having written nothing, when the block is not that (then call write_points).

    The usual block: the feed has files and data, and the points fill exactly the next slots
    after its end, one a slot in order, each a finite float32, none more than MAX_FUTURE_S
    ahead of `now`. write_points would refuse none, pad nothing (so `join` and the padding
    bounds play no part), keep the meta and pwrite the values at the end: this does only that
    pwrite (and the crash-recovery check before it). A commit of 10,000 feeds of a few points
    each spends most of its time on write_points' general steps otherwise (issue #29).
    `times` are whole seconds (uint32 records of the write buffer), `values` float32."""
    if len(times) == 0:
        return None
    exists = os.path.exists
    if exists(_file(directory, feed_id, ".meta.tmp")) or exists(
        _file(directory, feed_id, ".dat.tmp")
    ):
        return None  # a prepend to finish first (_recover)
    meta = read_meta(directory, feed_id)
    if meta is None:
        return None
    try:
        fd = os.open(_file(directory, feed_id, ".dat"), os.O_RDWR)
    except FileNotFoundError:
        return None
    try:
        size = os.fstat(fd).st_size
        n = size // VALUE_SIZE
        if n == 0 or size % VALUE_SIZE:
            return None  # a new feed fixes its start_time; a torn file raises CorruptFeed there
        start, interval = meta.start_time, meta.interval
        if len(times) <= 64:  # a few points: plain ints beat numpy's per-call cost
            ts = [int(x) for x in times]
            if min(ts) < 0 or max(ts) > now + MAX_FUTURE_S:
                return None
            if any((x - start) // interval != n + k for k, x in enumerate(ts)):
                return None  # not exactly the next slots, one a slot, in order
        else:
            t = np.asarray(times, dtype=np.int64)
            if int(t.min()) < 0 or int(t.max()) > now + MAX_FUTURE_S:
                return None
            if not np.array_equal((t - start) // interval, np.arange(n, n + len(t))):
                return None
        v = np.asarray(values, dtype=VALUE_DTYPE)
        if not bool(np.isfinite(v).all()):
            return None
        # The summary follows this write as it follows write_points' (else its stamp no longer
        # matches the .dat, reads ignore it and the next write starts it again from slot 0).
        summary = None
        if n + len(v) >= summaries.SUPER_SLOTS:
            summary = summaries.Updater.begin_or_drop(directory, feed_id, interval, start, n)
        try:
            os.pwrite(fd, v.tobytes(), n * VALUE_SIZE)
            if summary is not None:
                summary, updating = None, summary
                updating.finish_or_leave(fd, np.arange(n, n + len(v)))
        finally:
            if summary is not None:  # the write failed: a dirty summary is rebuilt, not trusted
                summary.abandon()
    finally:
        os.close(fd)
    return len(v)


def sync_data(directory: str | os.PathLike, feed_id: int) -> bool:
    """fsync a feed's .dat: every earlier write to it is on disk when this returns.

    False when the feed has no .dat (deleted since: nothing of it to keep). An OSError (EIO,
    ENOSPC from delayed allocation) is raised: the caller must then assume the unsynced writes
    are lost, as Linux may already have dropped the failed pages.
    """
    try:
        fd = os.open(dat_path(directory, feed_id), os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return True


def _write_inside(fd: int, slots: np.ndarray, values: np.ndarray) -> None:
    """Overwrite existing slots: one pwrite per run of nearby slots."""
    breaks = np.flatnonzero(np.diff(slots) > COALESCE_SLOTS + 1) + 1
    for run_slots, run_values in zip(
        np.split(slots, breaks), np.split(values, breaks), strict=True
    ):
        first, last = int(run_slots[0]), int(run_slots[-1])
        length = last - first + 1
        if length == len(run_slots):
            buf = run_values
        else:  # holes: keep what is there
            raw = os.pread(fd, length * VALUE_SIZE, first * VALUE_SIZE)
            buf = np.frombuffer(raw, dtype=VALUE_DTYPE).copy()
            buf[run_slots - first] = run_values
        os.pwrite(fd, buf.astype(VALUE_DTYPE, copy=False).tobytes(), first * VALUE_SIZE)


def _write_past_end(
    fd: int,
    n: int,
    slots: np.ndarray,
    values: np.ndarray,
    arrival: tuple[np.ndarray, np.ndarray, np.ndarray] | None,
) -> None:
    """Extend the file to the last slot in one pwrite: NaN padding, or a line where asked.
    `slots`/`values`: what each slot past the end ends up holding; `arrival`: the block in
    arrival order, which decides the lines (see join_lines)."""
    length = int(slots[-1]) - n + 1
    if length == len(slots) and int(slots[0]) == n:  # no hole to pad or join (the usual append)
        os.pwrite(fd, values.astype(VALUE_DTYPE, copy=False).tobytes(), n * VALUE_SIZE)
        return
    buf = np.full(length, np.nan, dtype=VALUE_DTYPE)
    if arrival is not None and arrival[2].any():
        end_value = None
        if n > 0:
            end_value = float(
                np.frombuffer(os.pread(fd, VALUE_SIZE, (n - 1) * VALUE_SIZE), VALUE_DTYPE)[0]
            )
        lines = join_lines(*arrival, n - 1, end_value)
        lengths = lines.b - lines.a
        if lengths.sum() > 0:
            # Every slot of every line at once; np.interp's own arithmetic (slope * (x - x0)
            # + y0), so reads (_Lines.at) see the same float32.
            k = np.repeat(np.arange(len(lengths)), lengths)
            holes = (
                lines.a[k]
                + np.arange(int(lengths.sum()))
                - np.repeat(np.cumsum(lengths) - lengths, lengths)
            )
            slope = (lines.v1 - lines.v0) / (lines.s1 - lines.s0)
            filled = slope[k] * (holes - lines.s0[k]) + lines.v0[k]
            buf[holes - n] = filled.astype(VALUE_DTYPE)
    buf[slots - n] = values  # the points themselves, over any line drawn before they came
    os.pwrite(fd, buf.tobytes(), n * VALUE_SIZE)


def join_lines(
    slots: np.ndarray,
    values: np.ndarray,
    join: np.ndarray,
    end_slot: int,
    end_value: float | None,
) -> _Lines:
    """The join lines a block of points (arrival order) draws past a file ending at
    `end_slot` (-1: empty) whose last value is `end_value` (None or NaN: none).

    As emoncms's PHPFina writes one post at a time: a point extends the file when its slot is
    past every slot written before it (the file's and the block's earlier points); a join
    point that extends draws a straight line over the gap from the file's last slot *as it is
    when the point arrives* (a point that came before it, even one that rewrote that slot);
    a point at or before the file's last slot is written in place and draws nothing, so a late
    point after a future-dated one overwrites the line the future one drew. So the file does
    not depend on how points are grouped into commits."""
    count = len(slots)
    empty = np.empty(0, dtype=np.int64)
    if count == 0:
        return _Lines(empty, empty, empty, np.empty(0), empty, np.empty(0))
    prior = np.maximum.accumulate(np.r_[end_slot, slots])[:-1]  # the file's last slot then
    ext = np.flatnonzero((slots > prior) & join & (slots - prior > 1))
    s0 = prior[ext]
    # The value slot s0 holds when point ext arrives: the last earlier arrival at s0.
    keys = np.sort(slots.astype(np.int64) * (count + 1) + np.arange(count))
    pos = np.searchsorted(keys, s0 * (count + 1) + ext) - 1
    found = (pos >= 0) & (keys[np.maximum(pos, 0)] // (count + 1) == s0)
    v0 = np.full(len(ext), np.nan)
    v0[found] = values[keys[pos[found]] % (count + 1)]
    at_end = ~found & (s0 == end_slot)  # nothing of the block there yet: the file's value
    if end_value is not None:
        v0[at_end] = end_value
    keep = ~np.isnan(v0)  # emoncms: NaN + a step is NaN, no line
    ext, s0, v0 = ext[keep], s0[keep], v0[keep]
    s1 = slots[ext].astype(np.int64)
    return _Lines(s0 + 1, s1, s0.astype(np.int64), v0, s1, values[ext].astype(np.float64))


def write(
    directory: str | os.PathLike,
    feed_id: int,
    interval: int,
    t: int,
    value: float,
    *,
    join: bool = False,
    now: float | None = None,
) -> None:
    """Write one point; raise the specific FeedError when it is refused."""
    if not math.isfinite(value):
        raise InvalidValue(f"value {value!r} is not finite")
    report = write_points(directory, feed_id, interval, [t], [value], [join], now=now)
    if report.refused:
        reason = report.refused[0][1]
        exc = {
            BEFORE_START: TimestampBeforeStart,
            TOO_OLD: TimestampBeforeStart,
            "time is more than an hour in the future": TimestampInFuture,
        }.get(reason)
        if exc is None:
            exc = GapTooLarge if reason.startswith("gap") else InvalidValue
        raise exc(f"feed {feed_id}: t={t}: {reason}")


# --- reads -----------------------------------------------------------------------------------


def open_data(directory: str | os.PathLike, feed_id: int) -> np.ndarray:
    """The whole .dat as a read-only float32 array (a memmap, kept mapped while the file is
    unchanged: feeds/store/mapped.py; empty array when no data)."""
    return _map_dat(directory, feed_id)[0]


def _map_dat(
    directory: str | os.PathLike, feed_id: int
) -> tuple[np.ndarray, os.stat_result | None]:
    """The .dat mapped and the stat it was mapped at (None: no .dat)."""
    try:
        data, st = mapped.file_array(dat_path(directory, feed_id), VALUE_DTYPE)
    except FileNotFoundError:
        return np.empty(0, dtype=VALUE_DTYPE), None
    if st.st_size % VALUE_SIZE:
        raise CorruptFeed(f"{feed_id}.dat is {st.st_size} bytes, not a multiple of {VALUE_SIZE}")
    return data, st


def open_feed(directory: str | os.PathLike, feed_id: int) -> tuple[Meta | None, np.ndarray]:
    """The meta and the data as one consistent pair, even while a prepend switches them
    (see _prepend): (None, empty) when the feed has no files."""
    meta, data, _summary = _open_feed_summarised(directory, feed_id)
    return meta, data


def _open_feed_summarised(
    directory: str | os.PathLike, feed_id: int
) -> tuple[Meta | None, np.ndarray, summaries.Summary | None]:
    """open_feed, and the feed's summary when it matches this meta and .dat (None if not)."""
    if not os.path.isdir(directory):
        return None, np.empty(0, dtype=VALUE_DTYPE), None
    with _DirectoryLock(directory, exclusive=False):
        meta = _current_meta(directory, feed_id)
        if meta is None:
            return None, np.empty(0, dtype=VALUE_DTYPE), None
        data, st = _map_dat(directory, feed_id)  # the stat of the very file mapped
        summary = None
        if st is not None and len(data) >= summaries.SUPER_SLOTS:
            summary = summaries.open_valid(directory, feed_id, meta.interval, meta.start_time, st)
        return meta, data, summary


def _zone(name: str) -> ZoneInfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:  # OSError: "Europe", too long
        raise BadReadRequest("timezone", f"unknown time zone {name!r}") from exc


def calendar_bounds(start: int, end: int, interval: str, tz_name: str) -> np.ndarray:
    """Unix times of local midnights (day, Monday, 1st of month) from the one at or before
    `start` to the first one after `end`: window i is [bounds[i], bounds[i+1])."""
    tz = _zone(tz_name)
    first = datetime.fromtimestamp(start, tz).replace(hour=0, minute=0, second=0, microsecond=0)
    if interval == "weekly":
        first -= timedelta(days=first.weekday())
    elif interval == "monthly":
        first = first.replace(day=1)
    out = []
    day = first.replace(tzinfo=None)  # walk in wall-clock dates, then localise each midnight
    while True:
        local = day.replace(tzinfo=tz)
        ts = int(local.timestamp())
        out.append(ts)
        if ts > end:
            break
        if interval == "daily":
            day += timedelta(days=1)
        elif interval == "weekly":
            day += timedelta(days=7)
        else:
            day = (day.replace(day=28) + timedelta(days=4)).replace(day=1)
    return np.asarray(out, dtype=np.int64)


# --- bounded reads -----------------------------------------------------------------------------
#
# A read's memory must follow the points it returns, never the length of the range asked for
# (`interval=4294967295` once allocated a NaN array over the whole window, gigabytes; a 10-year
# average once allocated float64 temporaries over every slot). So: the summarised part of the
# file is added up from its summary (feeds/store/summaries.py); the rest is copied
# READ_CHUNK_SLOTS slots at a time into this thread's reused buffers (feeds/store/scratch.py),
# in groups of windows (a window larger than a chunk is reduced chunk by chunk); buffered points
# are merged sparsely, window by window, never onto a dense copy of the window.

# At most this many slots are copied at once: 1.7 MB of buffers a thread, reused.
READ_CHUNK_SLOTS = 1 << 17


def _clip(data: np.ndarray, first: int, lo_s: np.ndarray, hi_s: np.ndarray):
    """Window slot ranges [lo_s, hi_s) as indices into `data` (whose data[0] is slot `first`)."""
    n = len(data)
    lo = np.clip(lo_s - first, 0, n)
    hi = np.maximum(np.clip(hi_s - first, 0, n), lo)
    return lo, hi


def _chunks(lo: np.ndarray, hi: np.ndarray):
    """(c0, c1, i, j): spans [c0, c1) of at most READ_CHUNK_SLOTS slots of data and the
    windows [i, j) that meet them (windows sorted, disjoint), skipping the data after the last
    one and between windows; a window longer than a chunk meets several chunks in turn."""
    nonempty = np.flatnonzero(hi > lo)
    k, pos = 0, 0
    while k < len(nonempty):
        i = int(nonempty[k])
        c0 = max(int(lo[i]), pos)
        if hi[i] <= c0:  # read to its end already
            k += 1
            continue
        c1 = min(c0 + READ_CHUNK_SLOTS, int(hi[-1]))
        j = int(np.searchsorted(lo, c1, side="left"))  # the windows starting before c1
        yield c0, c1, i, j
        pos = c1
        # The next window to read: the last one if it runs on past c1, else the one after.
        k = int(np.searchsorted(nonempty, j - 1 if hi[j - 1] > c1 else j))


def _load(data: np.ndarray, c0: int, c1: int) -> scratch.Buffers:
    """Slots [c0, c1) in this thread's buffers: values (float64, NaN kept) and NaN marks; the
    element after them is 0 / False so a reduceat may end there."""
    n = c1 - c0
    buf = scratch.buffers(n)
    np.copyto(buf.values[:n], data[c0:c1])
    buf.values[n] = 0.0
    np.isnan(buf.values[: n + 1], out=buf.marks[: n + 1])
    return buf


def _raw_sum_count(
    data: np.ndarray, lo: np.ndarray, hi: np.ndarray, sums: np.ndarray, counts: np.ndarray
) -> None:
    """Add to sums/counts the sum and count of the non-NaN slots of data[lo:hi] per window."""
    for c0, c1, i, j in _chunks(lo, hi):
        n = c1 - c0
        buf = _load(data, c0, c1)
        values, marks = buf.values[: n + 1], buf.marks[: n + 1]
        a = np.clip(lo[i:j], c0, c1) - c0
        b = np.clip(hi[i:j], c0, c1) - c0
        nonempty = b > a  # reduceat answers an empty window with its first element
        if not nonempty.any():
            continue
        idx = np.column_stack((a, b)).ravel()  # [a0, b0, a1, b1, ...]: every other is a window
        if (j - i) * 256 < n:  # long windows: count each one's NaNs (fast on bools), no copy
            nans = np.array([np.count_nonzero(marks[x:y]) for x, y in zip(a, b, strict=True)])
        else:  # many short ones: one pass, in int32 (a reduceat that casts copies the chunk)
            np.copyto(buf.index[: n + 1], marks)
            nans = np.add.reduceat(buf.index[: n + 1], idx, dtype=np.int32)[::2]
        np.copyto(values, 0.0, where=marks)
        # One sum per window with reduceat: exact where differences of a running sum lose
        # digits; float64 as emoncms's PHP adds them.
        s = np.add.reduceat(values, idx)[::2]
        sums[i:j] += np.where(nonempty, s, 0.0)
        counts[i:j] += np.where(nonempty, (b - a) - nans, 0)


def _sum_count(
    data: np.ndarray,
    first: int,
    lo_s: np.ndarray,
    hi_s: np.ndarray,
    summary: summaries.Summary | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Sum and count of the non-NaN slots of each window [lo_s, hi_s) (sorted, disjoint): the
    summarised slots from the summary, the others from the file."""
    lo, hi = _clip(data, first, lo_s, hi_s)
    sums = np.zeros(len(lo), dtype=np.float64)
    counts = np.zeros(len(lo), dtype=np.int64)
    if len(lo) == 0:
        return sums, counts
    covered = min(summary.slots, len(data)) if summary is not None else 0
    if covered and lo[0] < covered:
        summaries.add_sum_count(
            summary, data, np.minimum(lo, covered), np.minimum(hi, covered), sums, counts
        )
        lo = np.maximum(lo, covered)
        hi = np.maximum(hi, lo)
    _raw_sum_count(data, lo, hi, sums, counts)
    return sums, counts


def _last_valid(
    data: np.ndarray, first: int, lo_s: np.ndarray, hi_s: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Slot (-1 when none) and value of the last non-NaN slot of each window [lo_s, hi_s)."""
    lo, hi = _clip(data, first, lo_s, hi_s)
    slots = np.full(len(lo), -1, dtype=np.int64)
    values = np.full(len(lo), np.nan, dtype=np.float64)
    for c0, c1, i, j in _chunks(lo, hi):
        n = c1 - c0
        buf = _load(data, c0, c1)
        # The index of the last recorded slot at or before each slot (-1: none yet).
        last = buf.index[:n]
        np.copyto(last, buf.arange[:n])
        np.copyto(last, -1, where=buf.marks[:n])
        np.maximum.accumulate(last, out=last)
        a = np.clip(lo[i:j], c0, c1) - c0
        b = np.clip(hi[i:j], c0, c1) - c0
        ok = b > a
        at = np.where(ok, last[np.maximum(b - 1, 0)], -1)
        ok &= at >= a  # a later chunk of the same window overrides: it is later
        slots[i:j][ok] = c0 + at[ok]
        values[i:j][ok] = buf.values[at[ok]]
    found = slots >= 0
    slots[found] += first
    return slots, values


def _file_stats(
    data: np.ndarray,
    first: int,
    bounds: np.ndarray,
    mode: str,
    summary: summaries.Summary | None = None,
) -> np.ndarray:
    """One figure per window [bounds[i], bounds[i+1]) of slots; slots outside data are NaN.

    mode: "average" (mean of non-NaN), "sample" (the window's first slot), "last" (last non-NaN).
    Memory follows the windows and READ_CHUNK_SLOTS, however long the windows are.
    """
    m = len(bounds) - 1
    out = np.full(max(m, 0), np.nan, dtype=np.float64)
    if m <= 0 or len(data) == 0:
        return out
    if mode == "sample":  # one slot per window: nothing to hold
        rel = bounds[:-1] - first
        ok = (rel >= 0) & (rel < len(data)) & (bounds[1:] > bounds[:-1])
        out[ok] = data[rel[ok]]
    elif mode == "average":
        sums, counts = _sum_count(data, first, bounds[:-1], bounds[1:], summary)
        has = counts > 0
        out[has] = sums[has] / counts[has]
    elif mode == "last":
        out[:] = _last_valid(data, first, bounds[:-1], bounds[1:])[1]
    else:
        raise FeedError(f"unknown mode {mode!r}")
    return out


def _last_wins(times: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    rev_unique, rev_index = np.unique(times[::-1], return_index=True)
    return rev_unique, values[len(times) - 1 - rev_index]


@dataclass
class _Lines:
    """Straight lines a commit will write between buffered join points: line k covers slots
    [a[k], b[k]) on the way from (s0[k], v0[k]) to (s1[k], v1[k])."""

    a: np.ndarray
    b: np.ndarray
    s0: np.ndarray
    v0: np.ndarray
    s1: np.ndarray
    v1: np.ndarray

    def at(self, k: np.ndarray, slots: np.ndarray) -> np.ndarray:
        """Values at `slots` (on lines `k`), rounded through float32 as the file stores them;
        each through a two-point np.interp, exactly as the dense fill computed them."""
        out = np.empty(len(slots), dtype=np.float64)
        for i, (kk, x) in enumerate(zip(k.tolist(), slots.tolist(), strict=True)):
            out[i] = np.interp(x, [self.s0[kk], self.s1[kk]], [self.v0[kk], self.v1[kk]])
        return out.astype(VALUE_DTYPE).astype(np.float64)

    def without(self, taken: np.ndarray) -> _Lines:
        """These lines cut around the slots in `taken` (sorted): a point there is no line's."""
        inside = np.searchsorted(taken, self.b) - np.searchsorted(taken, self.a)
        if not inside.any():
            return self
        parts: list[tuple[int, int, int]] = []  # (line, a, b)
        for k in range(len(self.a)):
            a, b = int(self.a[k]), int(self.b[k])
            cuts = taken[np.searchsorted(taken, a) : np.searchsorted(taken, b)].tolist()
            for point in [*cuts, b]:
                if a < point:
                    parts.append((k, a, point))
                a = point + 1
        k = np.array([p[0] for p in parts], dtype=np.int64)
        return _Lines(
            np.array([p[1] for p in parts], dtype=np.int64),
            np.array([p[2] for p in parts], dtype=np.int64),
            self.s0[k], self.v0[k], self.s1[k], self.v1[k],
        )  # fmt: skip

    def sums(self, k: np.ndarray, p: np.ndarray, q: np.ndarray) -> np.ndarray:
        """Sum over slots [p, q) of lines `k`, in closed form (no array the length of a gap)."""
        slope = (self.v1[k] - self.v0[k]) / (self.s1[k] - self.s0[k])
        cnt = (q - p).astype(np.float64)
        return cnt * self.v0[k] + slope * ((p - self.s0[k]) + (q - 1 - self.s0[k])) * cnt / 2


def _join_lines(
    data: np.ndarray, first: int, slots: np.ndarray, values: np.ndarray, join: np.ndarray,
    lo: int, hi: int,
) -> _Lines:  # fmt: skip
    """The straight-line fill a commit will write for buffered points (arrival order), within
    [lo, hi): join_lines, as _write_past_end draws it, so a read sees the line before the
    commit. Cut around the buffered points' own slots (a late point inside a line), so a
    line never shares a slot with a point."""
    end_value = float(data[-1]) if len(data) > 0 else None
    lines = join_lines(slots, values, join, first + len(data) - 1, end_value)
    a, b = np.maximum(lines.a, lo), np.minimum(lines.b, hi)
    keep = a < b
    pieces = _Lines(a[keep], b[keep], lines.s0[keep], lines.v0[keep], lines.s1[keep],
                    lines.v1[keep])  # fmt: skip
    return pieces.without(np.unique(slots))


def _merge_buffered(
    stats: np.ndarray,
    data: np.ndarray,
    first: int,
    bounds: np.ndarray,
    slots: np.ndarray,
    vals: np.ndarray,
    lines: _Lines,
    mode: str,
    summary: summaries.Summary | None = None,
) -> None:
    """Recompute in place the windows that hold buffered points or join lines, as if they
    were in the file. Memory: the points, the lines and the windows, never a window's slots."""
    m = len(bounds) - 1
    lo_b, hi_b = bounds[:-1], bounds[1:]
    pw = np.searchsorted(bounds, slots, side="right") - 1  # window of each point
    inwin = (pw >= 0) & (pw < m)
    slots, vals, pw = slots[inwin], vals[inwin], pw[inwin]
    # Each (line, window) pair: a line crossing many windows counts once in each.
    la = np.searchsorted(bounds, lines.a, side="right") - 1
    lb = np.searchsorted(bounds, lines.b - 1, side="right") - 1
    per_line = lb - la + 1
    lk = np.repeat(np.arange(len(la)), per_line)
    lw = la[lk] + np.arange(len(lk)) - np.repeat(np.cumsum(per_line) - per_line, per_line)
    lp = np.maximum(lo_b[lw], lines.a[lk])  # the pair's slots: [lp, lq)
    lq = np.minimum(hi_b[lw], lines.b[lk])
    nonempty = lq > lp  # a zero-length window inside a line's range holds none of it
    lk, lw, lp, lq = lk[nonempty], lw[nonempty], lp[nonempty], lq[nonempty]
    if len(pw) == 0 and len(lw) == 0:
        return

    if mode == "sample":  # the window's first slot: a point there, else a line, else the file
        on_line = lp == lo_b[lw]
        stats[lw[on_line]] = lines.at(lk[on_line], lp[on_line])
        hit = slots == lo_b[pw]
        stats[pw[hit]] = vals[hit]
        return

    wins = np.unique(np.concatenate((pw, lw)))
    at = np.searchsorted(wins, pw)  # position of each point's window in `wins`
    lat = np.searchsorted(wins, lw)
    if mode == "average":
        sums, counts = _sum_count(data, first, lo_b[wins], hi_b[wins], summary)
        counts = counts.astype(np.float64)
        # A point on a recorded slot replaces it: take the file's value out first.
        rel = slots - first
        inside = (rel >= 0) & (rel < len(data))
        old = np.asarray(data[rel[inside]], dtype=np.float64)
        known = ~np.isnan(old)
        np.subtract.at(sums, at[inside][known], old[known])
        np.subtract.at(counts, at[inside][known], 1)
        np.add.at(sums, at, vals)
        np.add.at(counts, at, 1)
        if len(lw):
            np.add.at(sums, lat, lines.sums(lk, lp, lq))
            np.add.at(counts, lat, (lq - lp).astype(np.float64))
        with np.errstate(invalid="ignore", divide="ignore"):
            stats[wins] = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
        return

    # "last": the latest slot with a value among the file, the points and the lines.
    best_slot, best_val = _last_valid(data, first, lo_b[wins], hi_b[wins])
    # Points are sorted by slot: the last one of each window is its latest (and it beats a
    # file value on the same slot, which it replaces).
    tail = np.r_[pw[1:] != pw[:-1], True] if len(pw) else np.zeros(0, dtype=bool)
    pa, ps, pv = at[tail], slots[tail], vals[tail]
    better = ps >= best_slot[pa]
    best_slot[pa[better]], best_val[pa[better]] = ps[better], pv[better]
    if len(lw):
        ls = lq - 1
        lv = lines.at(lk, ls)
        for pos, s_, v_ in zip(lat.tolist(), ls.tolist(), lv.tolist(), strict=True):
            if s_ > best_slot[pos]:  # lines never share a slot with the file or a point
                best_slot[pos], best_val[pos] = s_, v_
    stats[wins] = best_val


def _calendar_estimate(start: int, end: int, interval: str) -> int:
    """A lower bound on the number of calendar windows (days are at least 23 hours), so a
    request for too many is refused before their bounds are built."""
    longest = {"daily": 25 * 3600, "weekly": 7 * 86_400 + 3600, "monthly": 31 * 86_400 + 3600}
    return (end - start) // longest[interval]


@dataclass
class View:
    """A feed's file with its buffered points laid over it, as the next commit will leave it:
    `data[0]` is slot `first` of a feed starting at `start_time` (`first` > 0 when buffered
    points will be prepended). `times`/`values`/`join` are the buffered points (None: none)."""

    interval: int
    start_time: int
    first: int
    data: np.ndarray
    times: np.ndarray | None = None
    values: np.ndarray | None = None
    join: np.ndarray | None = None
    summary: summaries.Summary | None = None  # of the file's slots, when it matches the file


def open_view(
    directory: str | os.PathLike,
    feed_id: int,
    *,
    feed_interval: int | None = None,
    overlay: tuple[np.ndarray, ...] | None = None,
) -> View | None:
    """The feed as reads see it (see View); None when it has no files, no interval and nothing
    buffered. `overlay`: (times, values[, join flags]) in arrival order."""
    meta, data, summary = _open_feed_summarised(directory, feed_id)
    if meta is not None:
        fi, st = meta.interval, meta.start_time
    else:
        fi, st = int(feed_interval or 0), 0
    first = 0  # the slot of data[0]: more than 0 when buffered points will be prepended
    ov_t = ov_v = ov_j = None
    if overlay is not None and len(overlay[0]):
        ov_t = np.asarray(overlay[0], dtype=np.int64)
        ov_v = np.asarray(overlay[1], dtype=np.float64)
        ov_j = np.asarray(overlay[2], dtype=bool) if len(overlay) > 2 else None
        finite = _finite_mask(ov_v)  # the commit refuses the others: so does the read
        with np.errstate(over="ignore"):  # as the file will store them (overflow: not finite)
            ov_v = ov_v.astype(VALUE_DTYPE).astype(np.float64)
        ov_t, ov_v = ov_t[finite], ov_v[finite]
        ov_j = ov_j[finite] if ov_j is not None else None
        if len(ov_t) == 0:
            ov_t = None
    if ov_t is not None:
        if fi <= 0:
            raise FeedError(f"feed {feed_id} has buffered points but no interval")
        if len(data) == 0:
            st = int(ov_t.min()) // fi * fi
        else:
            # Buffered points before start_time that the commit will prepend: show them, on
            # NaN slots before the data as the rebuilt file will have them (no copy: the
            # data just starts at a later slot).
            limit = min(max_prepend_slots(fi), st // fi)
            early = (ov_t - st) // fi
            early = early[early >= -limit]
            if len(early) and early.min() < 0:
                first = int(-early.min())
                st -= first * fi
    if fi <= 0:
        return None
    return View(fi, st, first, data, ov_t, ov_v, ov_j, summary)


def window_values(view: View, bounds: np.ndarray, mode: str) -> np.ndarray:
    """One figure per window [bounds[i], bounds[i+1]) of slots (sorted; slot 0 at the view's
    start_time), file and buffered points merged: mode "average" (mean of the recorded slots),
    "sample" (the window's first slot) or "last" (its last recorded slot). NaN: none."""
    data, first, st, fi = view.data, view.first, view.start_time, view.interval
    stats = _file_stats(data, first, bounds, mode, view.summary)
    if view.times is not None:
        slots = (view.times - st) // fi
        keep = slots >= 0  # too far before start_time: the commit will refuse them, so do we
        slots, ov_v = slots[keep], view.values[keep]
        if view.join is not None:
            lines = _join_lines(data, first, slots, ov_v, view.join[keep],
                                int(bounds[0]), int(bounds[-1]))  # fmt: skip
        else:
            lines = _join_lines(data, first, slots, ov_v, np.zeros(len(slots), dtype=bool), 0, 0)
        slots, vals = _last_wins(slots, ov_v)
        _merge_buffered(stats, data, first, bounds, slots, vals, lines, mode, view.summary)
    return stats


def read(
    directory: str | os.PathLike,
    feed_id: int,
    start: int,
    end: int,
    interval: int | str,
    *,
    average: bool = False,
    delta: bool = False,
    skipmissing: bool = False,
    timezone: str = "UTC",
    max_points: int = DEFAULT_MAX_POINTS,
    feed_interval: int | None = None,
    overlay: tuple[np.ndarray, ...] | None = None,
) -> list[list]:
    """`[[t_ms, value|None], ...]` for windows from `start` to `end` (unix seconds, inclusive).

    interval: seconds (rounded to a whole number of feed slots, at least one; windows aligned to
    it) or "daily"/"weekly"/"monthly" (local calendar in `timezone`, DST-aware).
    average: mean of the non-NaN slots of each window, else the window's first slot.
    delta: last value of each window minus the last value before it (kWh per window from a
    cumulative kWh feed). skipmissing: leave out windows without a value.
    overlay: (times, values[, join flags]) not yet in the file (the write buffer), in arrival
    order; a join point's straight line is filled as the commit will write it.
    feed_interval: the feed's interval when it has no files yet.

    Memory follows the points returned (at most `max_points`), the file's slots inside the
    windows (READ_CHUNK_SLOTS at a time) and the buffered points, never the window's length.
    """
    if end < start:
        raise BadReadRequest("end", "end is before start")
    view = open_view(directory, feed_id, feed_interval=feed_interval, overlay=overlay)
    if view is None:
        return []  # nothing written yet, nothing buffered
    fi, st = view.interval, view.start_time

    if isinstance(interval, str):
        if interval not in CALENDAR_INTERVALS:
            raise BadReadRequest("interval", f"use seconds or one of {CALENDAR_INTERVALS}")
        if _calendar_estimate(start, end, interval) > max_points:
            raise TooManyPoints(f"over {max_points} {interval} points requested")
        times = calendar_bounds(start, end, interval, timezone)
        if len(times) - 1 > max_points:
            raise TooManyPoints(f"{len(times) - 1} points requested, at most {max_points}")
        if delta:  # one window before the first, for its starting value
            prev = calendar_bounds(int(times[0]) - 1, int(times[0]) - 1, interval, timezone)
            times = np.concatenate(([prev[0]], times))
    else:
        if interval < 1:
            raise BadReadRequest("interval", "must be at least 1 second")
        out_iv = max(1, round(interval / fi)) * fi
        t0 = start // out_iv * out_iv
        count = (end - t0) // out_iv + 1
        if count > max_points:
            raise TooManyPoints(f"{count} points requested, at most {max_points}")
        first_t = t0 - out_iv if delta else t0
        times = first_t + out_iv * np.arange(count + 1 + (1 if delta else 0), dtype=np.int64)
    # Slot bounds: the first slot whose time is at or after each window edge.
    bounds = -((st - times) // fi)
    mode = "last" if delta else ("average" if average else "sample")
    stats = window_values(view, bounds, mode)

    if delta:
        prev_idx = np.where(~np.isnan(stats), np.arange(len(stats)), 0)
        np.maximum.accumulate(prev_idx, out=prev_idx)
        carried = stats[prev_idx]
        carried[np.isnan(stats[prev_idx])] = np.nan
        values = stats[1:] - carried[:-1]
        times = times[1:]
    else:
        values = stats
    times = times[: len(values)]
    keep = times <= end if not isinstance(interval, str) else np.ones(len(values), dtype=bool)
    times, values = times[keep], values[keep]
    if skipmissing:
        has = ~np.isnan(values)
        times, values = times[has], values[has]
    out_values = values.astype(object)
    out_values[np.isnan(values)] = None
    return [list(p) for p in zip((times * 1000).tolist(), out_values.tolist(), strict=True)]
