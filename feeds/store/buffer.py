"""The write buffer: points wait in Redis and are committed to the PHPFina files in blocks.

Redis layout (all keys under PREFIX):
    buf:<feed_id>   a string of RECORD_FORMAT records appended in arrival order
                    (t uint32, value float32, flags uint8; flag 1 = join the gap before it)
    dirty           a set of feed ids that have buffered records
    last            a hash feed_id -> "t value": the newest point of each feed
    commit:lock     held while a commit runs, so two beats never commit the same records
                    (core/redis_lock.py: one whose holder is gone is taken over)
    written         a hash feed_id -> bytes at the head of buf:<id> already written to the
                    .dat but not yet fsync'd (a commit without sync, see below)
    written:boot    the kernel boot id those offsets belong to
    synced_at       unix time of the last commit that fsync'd and trimmed
                    With sharded writers (feeds/store/shards.py) these four are per shard: shard 0
                    uses the names above, shard k>0 adds ":<k>" (commit:lock:2, written:2 ...),
                    since each shard's writer may run on another host (its own page cache
                    and boot id) and syncs on its own clock. A shard commits the dirty feeds
                    with feed_id % shards == shard; adding points does not depend on shards.
    refused         a hash feed_id -> points the feed store refused (too old, gap too large...)
                    since staff last acknowledged it; refused:last: feed_id -> "t reason" of
                    the latest. alarms/watchdog.py raises an alarm from them (refused points are
                    never written, but never silently dropped either)

Why an append-only string: APPEND is O(1), a block is read with one GETRANGE and parsed by
numpy in one call, and the committed prefix is removed exactly (records that arrived during
the commit sit after it and stay). A crash between the file write and the trim leaves the
records in Redis; committing them again writes the same bytes. No Django here: callers pass
a redis client and the feed directory.

Writing and syncing are separate steps, because an fsync per commit costs a 4 KiB page per
touched file: at a 1 s commit interval that is a page per point. A commit with sync=False
writes new records into the .dat (page cache: emoncms tools reading the files see them) and
records how far it got in `written`; a commit with sync=True fsyncs each file and only then
trims the records from Redis. So a point still leaves Redis only after it is on disk. A killed
worker loses nothing (the page cache outlives the process and the next sync flushes it); a
reboot loses the page cache, so offsets from another boot id are discarded and the records
written again; a failed fsync discards that feed's offset for the same reason.
"""

from __future__ import annotations

import logging
import os
import struct
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
import redis

from core import machine, redis_lock
from feeds.store import phpfina

log = logging.getLogger(__name__)

PREFIX = "feeds:"
RECORD_FORMAT = "<IfB"
RECORD_SIZE = struct.calcsize(RECORD_FORMAT)  # 9
RECORD_DTYPE = np.dtype([("t", "<u4"), ("v", "<f4"), ("flags", "u1")])
FLAG_JOIN = 1
DEFAULT_BLOCK_RECORDS = 1_000_000  # ~9 MB per GETRANGE
# Renewed before every block, so it only runs out when the committing process has died.
LOCK_TTL_S = 120

BufferedPoint = tuple[int, int, float, bool]  # (feed_id, t, value, join)

# Remove the committed (written and fsync'd) prefix, which is all that was written, so the
# written offset goes too; forget the feed when nothing is left. Atomic, so an APPEND
# that lands while we trim is either before (kept, after the prefix) or after (appended).
# With a lock token (ARGV[3]) it trims only while that token still holds the commit lock: a
# commit that stalled past the lock's TTL must not trim what a newer commit is handling.
_TRIM = """
if ARGV[3] ~= '' and redis.call('GET', KEYS[3]) ~= ARGV[3] then return -1 end
redis.call('HDEL', KEYS[4], ARGV[2])
local len = redis.call('STRLEN', KEYS[1])
local n = tonumber(ARGV[1])
if len <= n then
  redis.call('DEL', KEYS[1])
  redis.call('SREM', KEYS[2], ARGV[2])
  return 0
end
local rest = redis.call('GETRANGE', KEYS[1], n, -1)
redis.call('SET', KEYS[1], rest)
return len - n
"""

# Record how much of a buffer is written to the file (not yet fsync'd), while we hold the lock.
_MARK_WRITTEN = """
if ARGV[3] ~= '' and redis.call('GET', KEYS[2]) ~= ARGV[3] then return -1 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
"""

# Add a batch in one round trip: per feed, APPEND its records, mark it dirty and keep its
# newest point (unless the stored one is newer). KEYS: dirty set, last hash, then one buffer
# key per feed; ARGV: per feed, its id, records, newest t and value (as a string).
_ADD = """
for i = 3, #KEYS do
  local j = (i - 3) * 4
  local feed, t = ARGV[j + 1], tonumber(ARGV[j + 3])
  redis.call('APPEND', KEYS[i], ARGV[j + 2])
  redis.call('SADD', KEYS[1], feed)
  local cur = redis.call('HGET', KEYS[2], feed)
  if (not cur) or tonumber(string.match(cur, '^(%S+)')) <= t then
    redis.call('HSET', KEYS[2], feed, ARGV[j + 3] .. ' ' .. ARGV[j + 4])
  end
end
return 1
"""


def pack_records(points: Iterable[tuple[int, float, bool]]) -> bytes:
    return b"".join(struct.pack(RECORD_FORMAT, t, v, FLAG_JOIN if j else 0) for t, v, j in points)


def parse_records(raw: bytes) -> np.ndarray:
    usable = len(raw) - len(raw) % RECORD_SIZE
    return np.frombuffer(raw[:usable], dtype=RECORD_DTYPE)


class LockLost(RuntimeError):
    """This commit's lock ran out and may be held by another commit."""


@dataclass
class CommitReport:
    feeds: int = 0
    points: int = 0
    refused: dict[int, int] = field(default_factory=dict)  # feed_id -> count
    dropped: dict[int, int] = field(default_factory=dict)  # unknown feed -> records dropped
    skipped: bool = False  # another commit held the lock
    synced: bool = False  # files fsync'd and their records trimmed from Redis

    def as_dict(self) -> dict:
        return {
            "feeds": self.feeds,
            "points": self.points,
            "refused": {str(k): v for k, v in self.refused.items()},
            "dropped": {str(k): v for k, v in self.dropped.items()},
            "skipped": self.skipped,
            "synced": self.synced,
        }


class FeedBuffer:
    def __init__(
        self, client: redis.Redis, prefix: str = PREFIX, *, shard: int = 0, shards: int = 1
    ) -> None:
        if not 0 <= shard < shards:
            raise ValueError(f"shard {shard} is not one of {shards}")
        self.redis = client
        self.prefix = prefix
        self.shard = shard
        self.shards = shards
        own = f":{shard}" if shard else ""  # shard 0 keeps the names of the unsharded store
        self.dirty_key = prefix + "dirty"
        self.last_key = prefix + "last"
        self.lock_key = prefix + "commit:lock" + own
        self.written_key = prefix + "written" + own
        self.boot_key = prefix + "written:boot" + own
        self.synced_at_key = prefix + "synced_at" + own
        self.refused_key = prefix + "refused"
        self.refused_last_key = prefix + "refused:last"
        # Bounds passed to phpfina.write_points (max_backfill_s, max_gap_slots); see service.py.
        self.write_limits: dict = {}
        self._trim = client.register_script(_TRIM)
        self._add = client.register_script(_ADD)
        self._mark_written = client.register_script(_MARK_WRITTEN)
        self._token: str | None = None  # set while this object holds the commit lock

    def key(self, feed_id: int) -> str:
        return f"{self.prefix}buf:{int(feed_id)}"

    # --- adding ----------------------------------------------------------------------------

    def add(self, points: Iterable[BufferedPoint], pipe: redis.client.Pipeline | None = None):
        """Buffer points (already validated) in one script call, queued onto `pipe` (a
        transaction of the caller's) or run at once: one round trip for the whole batch."""
        per_feed: dict[int, list[tuple[int, float, bool]]] = {}
        for feed_id, t, v, join in points:
            per_feed.setdefault(int(feed_id), []).append((int(t), float(v), bool(join)))
        if not per_feed:
            return
        keys = [self.dirty_key, self.last_key]
        args: list = []
        for feed_id, rows in per_feed.items():
            newest = rows[0]
            for r in rows[1:]:
                if r[0] >= newest[0]:  # of equal times the later arrival wins, as in the file
                    newest = r
            keys.append(self.key(feed_id))
            args += [feed_id, pack_records(rows), newest[0], repr(newest[1])]
        self._add(keys=keys, args=args, client=pipe)

    def seed_last(self, feed_id: int, t: int, value: float) -> bool:
        """Set a feed's last value when it has none (an imported file's newest point), so
        processes that start from it carry on (feeds/emoncms/files.py). True if set."""
        return bool(self.redis.hsetnx(self.last_key, int(feed_id), f"{int(t)} {float(value)!r}"))

    # --- reading ---------------------------------------------------------------------------

    def pending(self, feed_id: int) -> np.ndarray:
        """Every buffered record of a feed (arrival order), for reads to merge."""
        return parse_records(self.redis.get(self.key(feed_id)) or b"")

    def dirty_feeds(self) -> list[int]:
        """The feeds of this shard with buffered records."""
        ids = (int(x) for x in self.redis.smembers(self.dirty_key))
        return sorted(f for f in ids if f % self.shards == self.shard)

    def last_values(self, feed_ids: Iterable[int]) -> dict[int, tuple[int, float]]:
        ids = [int(x) for x in feed_ids]
        if not ids:
            return {}
        out: dict[int, tuple[int, float]] = {}
        for feed_id, raw in zip(ids, self.redis.hmget(self.last_key, ids), strict=True):
            if raw is not None:
                t, v = raw.split(b" ", 1)
                out[feed_id] = (int(t), float(v))
        return out

    def refused(self) -> dict[int, tuple[int, str]]:
        """feed id -> (points refused since last forgotten, "t reason" of the latest)."""
        counts = self.redis.hgetall(self.refused_key)
        last = self.redis.hgetall(self.refused_last_key)
        return {
            int(k): (int(v), (last.get(k) or b"").decode()) for k, v in counts.items() if int(v) > 0
        }

    def forget_refused(self, feed_id: int, count: int) -> None:
        """Take `count` off a feed's refused points (those staff have seen); points refused
        meanwhile stay counted."""
        if self.redis.hincrby(self.refused_key, feed_id, -int(count)) <= 0:
            self.redis.hdel(self.refused_key, feed_id)

    # --- committing ------------------------------------------------------------------------

    def written_offset(self, feed_id: int) -> int:
        """Bytes at the head of a feed's buffer already written to its .dat, not yet synced."""
        raw = self.redis.hget(self.written_key, int(feed_id))
        return int(raw) if raw is not None else 0

    def sync_due(self, sync_interval: float, now: float | None = None) -> bool:
        """Whether a commit now should also fsync and trim (the last sync is that old)."""
        if sync_interval <= 0:
            return True
        last = self.redis.get(self.synced_at_key)
        now = time.time() if now is None else now
        return last is None or now - float(last) >= sync_interval

    def _forget_offsets_of_another_boot(self) -> None:
        # Called under the commit lock. After a reboot the page cache is gone, so what the
        # offsets say was written may not be in the files: write those records again.
        boot = machine.boot_id()
        if boot is None:  # not Linux: offsets are never trusted, every commit writes all records
            self.redis.delete(self.written_key)
        elif self.redis.get(self.boot_key) != boot.encode():
            self.redis.delete(self.written_key)
            self.redis.set(self.boot_key, boot)

    def _check_lock(self) -> None:
        if self._token and not redis_lock.renew(self.redis, self.lock_key, self._token, LOCK_TTL_S):
            # Another commit took over (we stalled past the TTL): trimming now could
            # remove records it has not written. Stop; it will commit them.
            raise LockLost("the feed commit lock expired during the commit")

    def commit_feed(
        self,
        directory: str | os.PathLike,
        feed_id: int,
        interval: int | None,
        *,
        now: float | None = None,
        block_records: int = DEFAULT_BLOCK_RECORDS,
        fsync: bool = True,
        sync: bool = True,
        after_write: Callable[[int, int], None] | None = None,
        report: CommitReport | None = None,
    ) -> CommitReport:
        """Commit a feed's buffer to its files, block by block.

        Each block is written, then with `sync` fsync'd and trimmed from Redis; without
        `sync` only marked as written (see the module docstring). `interval` is needed only
        for a feed without files; None with no files drops the records (the feed is gone).
        `after_write(feed_id, records)` runs after each block's write (and fsync) and before
        its trim: a seam for the crash test.
        """
        report = report or CommitReport()
        key = self.key(feed_id)
        block_bytes = block_records * RECORD_SIZE
        # Only what is here now: under a steady stream of new points the loop must still end.
        todo = self.redis.strlen(key)
        if todo == 0:
            self.redis.srem(self.dirty_key, feed_id)
            self.redis.hdel(self.written_key, feed_id)
            return report
        done = min(self.written_offset(feed_id), todo)
        while done < todo:
            self._check_lock()
            raw = self.redis.getrange(key, done, min(done + block_bytes, todo) - 1)
            usable = len(raw) - len(raw) % RECORD_SIZE
            if usable == 0:
                break
            records = parse_records(raw[:usable])
            self._write_block(directory, feed_id, interval, records, now, fsync, report)
            done += usable
            marked = self._mark_written(
                keys=[self.written_key, self.lock_key], args=[feed_id, done, self._token or ""]
            )
            if marked == -1:
                raise LockLost("the feed commit lock was lost before marking the block written")
            if sync:
                self._sync_and_trim(directory, feed_id, done, fsync, after_write, len(records))
                todo -= done
                done = 0
            elif after_write is not None:
                after_write(feed_id, len(records))
        if sync and done > 0:  # written by earlier commits without sync, nothing new since
            self._sync_and_trim(directory, feed_id, done, fsync, after_write, 0)
        return report

    def _write_block(
        self,
        directory: str | os.PathLike,
        feed_id: int,
        interval: int | None,
        records: np.ndarray,
        now: float | None,
        fsync: bool,
        report: CommitReport,
    ) -> None:
        if interval is None and phpfina.read_meta(directory, feed_id) is None:
            log.warning("feed %s: no such feed, dropping %d buffered points", feed_id, len(records))
            report.dropped[feed_id] = report.dropped.get(feed_id, 0) + len(records)
            return
        result = phpfina.write_points(
            directory,
            feed_id,
            interval or 0,
            records["t"],
            records["v"],
            (records["flags"] & FLAG_JOIN).astype(bool),
            now=now,
            fsync=fsync,
            data_fsync=False,  # _sync_and_trim syncs, once per block or per sync interval
            **self.write_limits,
        )
        report.points += result.written
        if result.refused:
            report.refused[feed_id] = report.refused.get(feed_id, 0) + len(result.refused)
            t, reason = result.refused[-1]
            pipe = self.redis.pipeline()
            pipe.hincrby(self.refused_key, feed_id, len(result.refused))
            pipe.hset(self.refused_last_key, feed_id, f"{t} {reason}")
            pipe.execute()
            log.warning(
                "feed %s: %d points refused, first: t=%s %s",
                feed_id,
                len(result.refused),
                *result.refused[0],
            )

    def _sync_and_trim(
        self,
        directory: str | os.PathLike,
        feed_id: int,
        written: int,
        fsync: bool,
        after_write: Callable[[int, int], None] | None,
        records: int,
    ) -> None:
        """fsync the feed's .dat, then trim the `written` bytes it now holds from Redis."""
        if fsync:
            try:
                phpfina.sync_data(directory, feed_id)
            except OSError:
                # The unsynced pages may be gone (Linux drops them on a failed writeback):
                # forget the offset so the next commit writes these records again.
                self.redis.hdel(self.written_key, feed_id)
                raise
        if after_write is not None:
            after_write(feed_id, records)
        trimmed = self._trim(
            keys=[self.key(feed_id), self.dirty_key, self.lock_key, self.written_key],
            args=[written, feed_id, self._token or ""],
        )
        if trimmed == -1:
            raise LockLost("the feed commit lock was lost before the trim; records kept")

    def commit(
        self,
        directory: str | os.PathLike,
        intervals: Mapping[int, int],
        *,
        now: float | None = None,
        block_records: int = DEFAULT_BLOCK_RECORDS,
        fsync: bool = True,
        sync: bool = True,
        after_write: Callable[[int, int], None] | None = None,
        feeds: Iterable[int] | None = None,
    ) -> CommitReport:
        """Commit every dirty feed, or only `feeds` (the dirty feeds `intervals` was looked up
        for). `intervals` maps feed id -> interval for feeds that exist: a feed missing from it
        and without files counts as deleted and its records are dropped. So a caller that read
        the dirty set before looking up intervals must pass that set as `feeds`: a feed that
        turns dirty in between (its first points arriving) is left for the next commit.

        With `sync` (the default) every buffered record ends on disk and leaves Redis; without,
        new records are only written (see the module docstring).
        """
        token = redis_lock.acquire(self.redis, self.lock_key, LOCK_TTL_S)
        if token is None:
            # another commit is running; it will take these too
            return CommitReport(skipped=True)
        try:
            return self.commit_holding(
                token,
                directory,
                intervals,
                now=now,
                block_records=block_records,
                fsync=fsync,
                sync=sync,
                after_write=after_write,
                feeds=feeds,
            )
        finally:
            redis_lock.release(self.redis, self.lock_key, token)

    def commit_holding(
        self,
        token: str,
        directory: str | os.PathLike,
        intervals: Mapping[int, int],
        *,
        now: float | None = None,
        block_records: int = DEFAULT_BLOCK_RECORDS,
        fsync: bool = True,
        sync: bool = True,
        after_write: Callable[[int, int], None] | None = None,
        feeds: Iterable[int] | None = None,
    ) -> CommitReport:
        """`commit` by a caller that already holds this shard's lock with `token` (the
        re-shard holds every shard's lock across its drain and its file moves)."""
        report = CommitReport()
        self._token = token
        try:
            self._forget_offsets_of_another_boot()
            for feed_id in self.dirty_feeds() if feeds is None else sorted(set(feeds)):
                self.commit_feed(
                    directory,
                    feed_id,
                    intervals.get(feed_id),
                    now=now,
                    block_records=block_records,
                    fsync=fsync,
                    sync=sync,
                    after_write=after_write,
                    report=report,
                )
                report.feeds += 1
            if sync:
                # Wall time, not `now` (which only judges points' times): sync_due reads it.
                self.redis.set(self.synced_at_key, repr(time.time()))
                report.synced = True
        finally:
            self._token = None
        return report
