"""The write buffer: points wait in Redis and are committed to the PHPFina files in blocks.

Redis layout (all keys under PREFIX):
    buf:<feed_id>   a string of RECORD_FORMAT records appended in arrival order
                    (t uint32, value float32, flags uint8; flag 1 = join the gap before it)
    dirty           a set of feed ids that have buffered records
    last            a hash feed_id -> "t value": the newest point of each feed
    commit:lock     held while a commit runs, so two beats never commit the same records
                    (core/redis_lock.py: one whose holder is gone is taken over)
    written         a hash feed_id -> bytes at the head of buf:<id> already written to the
                    .dat but not yet synced (a commit without sync, see below)
    written:boot    the kernel boot id those offsets belong to
    synced_at       unix time of the last commit that synced and trimmed
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
records how far it got in `written`; a commit with sync=True makes the files durable and only
then trims the records from Redis (disk_sync: one syncfs for a batch of feeds by default, or an
fsync a file). So a point still leaves Redis only after it is on disk. A killed worker loses
nothing (the page cache outlives the process and the next sync flushes it); a reboot loses the
page cache, so offsets from another boot id are discarded and the records written again; a
failed sync discards the offsets of the feeds it covered for the same reason.

Round trips: a commit reads many feeds' buffers in one script call (_READ: the lock renewed,
each feed's length, written offset and next block, up to BATCH_BYTES in all) and settles them
in another (_SETTLE: each feed's trim or written mark, its refusals counted, atomically and only
while the lock is ours). Between the two it writes each feed's file, one file at a time, and
with sync makes the batch durable. So a commit of 10,000 feeds makes a few dozen round trips,
not five per feed. Each file still gets its own write; the usual
block (the next slots at the file's end) is written by phpfina.append_in_place, write_points'
result without its general steps (the same bytes, tested against it).
"""

from __future__ import annotations

import logging
import os
import struct
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
import redis

from core import machine, redis_lock
from feeds.store import disk_sync, low_priority, phpfina

log = logging.getLogger(__name__)

PREFIX = "feeds:"
RECORD_FORMAT = "<IfB"
RECORD_SIZE = struct.calcsize(RECORD_FORMAT)  # 9
RECORD_DTYPE = np.dtype([("t", "<u4"), ("v", "<f4"), ("flags", "u1")])
FLAG_JOIN = 1
DEFAULT_BLOCK_RECORDS = 1_000_000  # ~9 MB per GETRANGE
# One _READ call returns at most this many feeds' blocks, and stops adding feeds once their
# blocks reach BATCH_BYTES (so a reply is at most BATCH_BYTES plus one block): bounds the
# commit's memory and how long one script holds Redis (a 10,000-feed batch is ~1 MB, ~10 ms).
BATCH_FEEDS = 2_000
BATCH_BYTES = 8 << 20
# Renewed before every block, so it only runs out when the committing process has died.
LOCK_TTL_S = 120

BufferedPoint = tuple[int, int, float, bool]  # (feed_id, t, value, join)

# Read the next block of many feeds in one round trip. KEYS: lock, written hash, then one
# buffer key per feed; ARGV: token ('' = no lock), lock TTL ms, block bytes, batch bytes, record
# size, then per feed its id and a byte limit (-1: all there is now). Per feed in order, until
# the blocks reach the batch bytes: {length (within the limit), written offset, block}. -1 when
# the token no longer holds the lock (renewed otherwise, as before every block).
_READ = """
if ARGV[1] ~= '' then
  if redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
local block, budget, size = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local out, used = {}, 0
for i = 3, #KEYS do
  local j = 6 + (i - 3) * 2
  local len = redis.call('STRLEN', KEYS[i])
  local limit = tonumber(ARGV[j + 1])
  if limit >= 0 and limit < len then len = limit end
  local done = tonumber(redis.call('HGET', KEYS[2], ARGV[j]) or '0')
  if done > len then done = len end
  local stop = math.min(done + block, len)
  stop = stop - (stop - done) % size
  local chunk = ''
  if stop > done then chunk = redis.call('GETRANGE', KEYS[i], done, stop - 1) end
  out[#out + 1] = {len, done, chunk}
  used = used + #chunk
  if used >= budget then break end
end
return out
"""

# Settle many feeds after their blocks are written, atomically and only while the token holds
# the lock (-1 otherwise, nothing done). KEYS: lock, dirty set, written hash, refused hash,
# refused:last hash, then one buffer key per feed; ARGV: token, the number of feeds, then per
# feed: what to do ('T' trim the first n bytes, which were written and synced; 'M' mark n
# bytes written; 'E' forget the feed if its buffer is empty), its id and n; then per feed with
# refusals: its id, points refused and "t reason" of the latest. Refusals are counted here,
# with the trim or mark, so a commit killed before it counts them once when the records are
# written again, never twice.
_SETTLE = """
if ARGV[1] ~= '' and redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end
local feeds = tonumber(ARGV[2])
for i = 6, #KEYS do
  local j = 3 + (i - 6) * 3
  local op, feed, n = ARGV[j], ARGV[j + 1], tonumber(ARGV[j + 2])
  if op == 'T' then
    redis.call('HDEL', KEYS[3], feed)
    local len = redis.call('STRLEN', KEYS[i])
    if len <= n then
      redis.call('DEL', KEYS[i])
      redis.call('SREM', KEYS[2], feed)
    else
      redis.call('SET', KEYS[i], redis.call('GETRANGE', KEYS[i], n, -1))
    end
  elseif op == 'M' then
    redis.call('HSET', KEYS[3], feed, n)
  elseif op == 'E' then
    if redis.call('STRLEN', KEYS[i]) == 0 then
      redis.call('SREM', KEYS[2], feed)
      redis.call('HDEL', KEYS[3], feed)
    end
  end
end
for j = 3 + feeds * 3, #ARGV, 3 do
  redis.call('HINCRBY', KEYS[4], ARGV[j], ARGV[j + 1])
  redis.call('HSET', KEYS[5], ARGV[j], ARGV[j + 2])
end
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
    synced: bool = False  # files synced and their records trimmed from Redis

    def as_dict(self) -> dict:
        return {
            "feeds": self.feeds,
            "points": self.points,
            "refused": {str(k): v for k, v in self.refused.items()},
            "dropped": {str(k): v for k, v in self.dropped.items()},
            "skipped": self.skipped,
            "synced": self.synced,
        }


def _own(shard: int) -> str:
    """A shard's suffix on its own keys: shard 0 keeps the names of the unsharded store."""
    return f":{shard}" if shard else ""


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
        own = _own(shard)
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
        # How a syncing commit makes its writes durable (disk_sync: BMS_FEED_SYNC_BY).
        self.sync_by = disk_sync.BY_FILESYSTEM
        self._add = client.register_script(_ADD)
        self._read = client.register_script(_READ)
        self._settle = client.register_script(_SETTLE)
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
        if pipe is None:
            self._add(keys=keys, args=args)
        else:
            # EVAL, not the registered script's EVALSHA: a pipeline holding a registered
            # script asks SCRIPT EXISTS before each execute, a round trip of its own on every
            # ingest transaction (#29). Redis caches the compiled script by its hash either way.
            pipe.eval(_ADD, len(keys), *keys, *args)

    def seed_last(self, feed_id: int, t: int, value: float) -> bool:
        """Set a feed's last value when it has none (an imported file's newest point), so
        processes that start from it carry on (feeds/emoncms/files.py). True if set."""
        return bool(self.redis.hsetnx(self.last_key, int(feed_id), f"{int(t)} {float(value)!r}"))

    # --- reading ---------------------------------------------------------------------------

    def pending(self, feed_id: int) -> np.ndarray:
        """Every buffered record of a feed (arrival order), for reads to merge."""
        return parse_records(self.redis.get(self.key(feed_id)) or b"")

    def pending_many(self, feed_ids: list[int]) -> list[np.ndarray]:
        """`pending` of each feed, in one round trip (MGET)."""
        if not feed_ids:
            return []
        return [
            parse_records(raw or b"") for raw in self.redis.mget([self.key(f) for f in feed_ids])
        ]

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
        """Commit one feed's buffer to its files, block by block (`commit_feeds` of one feed).

        `interval` is needed only for a feed without files; None with no files drops the
        records (the feed is gone).
        """
        return self.commit_feeds(
            directory,
            [feed_id],
            {} if interval is None else {int(feed_id): interval},
            now=now,
            block_records=block_records,
            fsync=fsync,
            sync=sync,
            after_write=after_write,
            report=report,
        )

    def commit_feeds(
        self,
        directory: str | os.PathLike,
        feeds: Iterable[int],
        intervals: Mapping[int, int],
        *,
        now: float | None = None,
        block_records: int = DEFAULT_BLOCK_RECORDS,
        fsync: bool = True,
        sync: bool = True,
        after_write: Callable[[int, int], None] | None = None,
        report: CommitReport | None = None,
    ) -> CommitReport:
        """Commit these feeds' buffers to their files, a batch of feeds per round trip.

        Each round reads the next block of up to BATCH_FEEDS feeds in one call (_READ), writes
        each block to its feed's files and, with `sync` and `fsync`, makes them durable
        (disk_sync, `self.sync_by`), then settles the batch
        in one call (_SETTLE): with `sync` the written bytes are trimmed from Redis, without
        only marked as written (see the module docstring). A feed with more than a block goes
        round again, up to the length its buffer had when first read: under a steady stream
        of new points the commit still ends. `after_write(feed_id, records)` runs for each
        block once its batch is written (and synced), before the batch's trim (with `sync`) or
        after its mark (without): a seam for the crash tests.
        """
        report = report or CommitReport()
        block_bytes = max(1, int(block_records)) * RECORD_SIZE
        # (feed id, byte limit): -1 for everything buffered at the first read
        todo: deque[tuple[int, int]] = deque((int(f), -1) for f in feeds)
        # Opened before the first write: a sync reports errors from then on (disk_sync).
        durable = disk_sync.opener(self.sync_by)(directory) if sync and fsync and todo else None
        try:
            while todo:
                low_priority.checkpoint()  # between batches: nothing half-settled
                self._commit_batch(directory, todo, intervals, now, block_bytes, fsync, sync,
                                   durable, after_write, report)  # fmt: skip
        finally:
            if durable is not None:
                durable.close()
        return report

    def _commit_batch(
        self,
        directory: str | os.PathLike,
        todo: deque[tuple[int, int]],
        intervals: Mapping[int, int],
        now: float | None,
        block_bytes: int,
        fsync: bool,
        sync: bool,
        durable: disk_sync.PerFile | disk_sync.WholeFilesystem | None,
        after_write: Callable[[int, int], None] | None,
        report: CommitReport,
    ) -> None:
        """One round of commit_feeds: read the next batch, write it, sync it, settle it."""
        batch = [todo.popleft() for _ in range(min(BATCH_FEEDS, len(todo)))]
        read = self._read(
            keys=[self.lock_key, self.written_key, *(self.key(f) for f, _ in batch)],
            args=[self._token or "", LOCK_TTL_S * 1000, block_bytes, BATCH_BYTES,
                  RECORD_SIZE, *(x for f, limit in batch for x in (f, limit))],
        )  # fmt: skip
        if read == -1:
            # Another commit took over (we stalled past the TTL): trimming now could
            # remove records it has not written. Stop; it will commit them.
            raise LockLost("the feed commit lock expired during the commit")
        todo.extendleft(reversed(batch[len(read) :]))  # past the batch bytes: next round
        settle: list[tuple[int, str, int, list[tuple[int, str]]]] = []
        again: list[tuple[int, int]] = []
        synced: list[tuple[int, int]] = []  # (feed, records) written, to leave Redis once synced
        marked: list[tuple[int, int]] = []  # (feed, records) written without sync
        for (feed_id, _), (length, done, chunk) in zip(batch, read, strict=False):
            records = parse_records(chunk)
            refused = self._write_block(directory, feed_id, intervals.get(feed_id), records,
                                        now, fsync, report)  # fmt: skip
            end = done + len(chunk)
            if length == 0:
                settle.append((feed_id, "E", 0, refused))
            elif sync:
                if durable is not None and end > 0:
                    self._durable(durable.written, feed_id)
                synced.append((feed_id, len(records)))
                settle.append((feed_id, "T", end, refused))
                if end < length:  # offsets shift by the trim
                    again.append((feed_id, length - end))
            elif chunk:
                settle.append((feed_id, "M", end, refused))
                marked.append((feed_id, len(records)))
                if end < length:
                    again.append((feed_id, length))
        if durable is not None:
            self._durable(durable.sync)
        if after_write is not None:
            for feed_id, records in synced:
                after_write(feed_id, records)
        self._settle_batch(settle)
        if after_write is not None:
            for feed_id, records in marked:
                after_write(feed_id, records)
        todo.extendleft(reversed(again))

    def _write_block(
        self,
        directory: str | os.PathLike,
        feed_id: int,
        interval: int | None,
        records: np.ndarray,
        now: float | None,
        fsync: bool,
        report: CommitReport,
    ) -> list[tuple[int, str]]:
        """Write a block to the feed's files; its refused (time, reason), counted in Redis
        when the batch settles."""
        if not len(records):
            return []
        if interval is None and phpfina.read_meta(directory, feed_id) is None:
            log.warning("feed %s: no such feed, dropping %d buffered points", feed_id, len(records))
            report.dropped[feed_id] = report.dropped.get(feed_id, 0) + len(records)
            return []
        # The usual block (the next slots at the end of the file) without write_points'
        # general steps: the same bytes, none of its bounds or refusals can apply to it.
        written = phpfina.append_in_place(
            directory, feed_id, records["t"], records["v"], now=time.time() if now is None else now
        )
        if written is not None:
            report.points += written
            return []
        result = phpfina.write_points(
            directory,
            feed_id,
            interval or 0,
            records["t"],
            records["v"],
            (records["flags"] & FLAG_JOIN).astype(bool),
            now=now,
            fsync=fsync,
            data_fsync=False,  # the batch is synced (disk_sync), at a sync interval
            **self.write_limits,
        )
        report.points += result.written
        if result.refused:
            report.refused[feed_id] = report.refused.get(feed_id, 0) + len(result.refused)
            log.warning(
                "feed %s: %d points refused, first: t=%s %s",
                feed_id,
                len(result.refused),
                *result.refused[0],
            )
        return result.refused

    def _durable(self, step: Callable[..., None], *args: int) -> None:
        """A sync step of `durable`; if it failed, the feeds it covered forget their written
        offsets, so the next commit writes their records again (Linux may already have
        dropped the pages whose writeback failed). A failed syncfs covered every feed on the
        filesystem: every shard's offsets go (disk_sync's docstring)."""
        try:
            step(*args)
        except disk_sync.SyncFailed as exc:
            if exc.whole_filesystem:
                self.redis.delete(*self.written_keys_of_every_shard())
            else:
                self.redis.hdel(self.written_key, *exc.feeds)
            raise

    def written_keys_of_every_shard(self) -> list[str]:
        """The `written` hash of each shard of this layout (shard 0's has no suffix)."""
        return [self.prefix + "written" + _own(k) for k in range(self.shards)]

    def _settle_batch(self, settle: list[tuple[int, str, int, list[tuple[int, str]]]]) -> None:
        """Trim, mark or forget each feed of a batch and count its refusals: one round trip."""
        if not settle:
            return
        args: list = [self._token or "", len(settle)]
        for feed_id, op, end, _ in settle:
            args += [op, feed_id, end]
        for feed_id, _, _, refused in settle:
            if refused:
                args += [feed_id, len(refused), f"{refused[-1][0]} {refused[-1][1]}"]
        done = self._settle(
            keys=[self.lock_key, self.dirty_key, self.written_key, self.refused_key,
                  self.refused_last_key, *(self.key(f) for f, *_ in settle)],
            args=args,
        )  # fmt: skip
        if done == -1:
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
            todo = self.dirty_feeds() if feeds is None else sorted(set(map(int, feeds)))
            self.commit_feeds(
                directory,
                todo,
                intervals,
                now=now,
                block_records=block_records,
                fsync=fsync,
                sync=sync,
                after_write=after_write,
                report=report,
            )
            report.feeds += len(todo)
            if sync:
                # Wall time, not `now` (which only judges points' times): sync_due reads it.
                self.redis.set(self.synced_at_key, repr(time.time()))
                report.synced = True
        finally:
            self._token = None
        return report
