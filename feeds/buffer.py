"""The write buffer: points wait in Redis and are committed to the PHPFina files in blocks.

Redis layout (all keys under PREFIX):
    buf:<feed_id>   a string of RECORD_FORMAT records appended in arrival order
                    (t uint32, value float32, flags uint8; flag 1 = join the gap before it)
    dirty           a set of feed ids that have buffered records
    last            a hash feed_id -> "t value": the newest point of each feed
    commit:lock     held while a commit runs, so two beats never commit the same records

Why an append-only string: APPEND is O(1), a block is read with one GETRANGE and parsed by
numpy in one call, and the committed prefix is removed exactly (records that arrived during
the commit sit after it and stay). A crash between the file write and the trim leaves the
records in Redis; committing them again writes the same bytes. No Django here: callers pass
a redis client and the feed directory.
"""

from __future__ import annotations

import logging
import os
import struct
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
import redis

from feeds import phpfina

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

# Remove the committed prefix; forget the feed when nothing is left. Atomic, so an APPEND
# that lands while we trim is either before (kept, after the prefix) or after (appended).
# With a lock token (ARGV[3]) it trims only while that token still holds the commit lock: a
# commit that stalled past the lock's TTL must not trim what a newer commit is handling.
_TRIM = """
if ARGV[3] ~= '' and redis.call('GET', KEYS[3]) ~= ARGV[3] then return -1 end
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

# Keep the newest point per feed: ARGV is feed, t, value-string triples.
_SET_LAST = """
for i = 1, #ARGV, 3 do
  local cur = redis.call('HGET', KEYS[1], ARGV[i])
  local t = tonumber(ARGV[i + 1])
  if (not cur) or tonumber(string.match(cur, '^(%S+)')) <= t then
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1] .. ' ' .. ARGV[i + 2])
  end
end
return 1
"""

_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('EXPIRE', KEYS[1], ARGV[2]) end
return 0
"""

_UNLOCK = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
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

    def as_dict(self) -> dict:
        return {
            "feeds": self.feeds,
            "points": self.points,
            "refused": {str(k): v for k, v in self.refused.items()},
            "dropped": {str(k): v for k, v in self.dropped.items()},
            "skipped": self.skipped,
        }


class FeedBuffer:
    def __init__(self, client: redis.Redis, prefix: str = PREFIX) -> None:
        self.redis = client
        self.prefix = prefix
        self.dirty_key = prefix + "dirty"
        self.last_key = prefix + "last"
        self.lock_key = prefix + "commit:lock"
        self._trim = client.register_script(_TRIM)
        self._set_last = client.register_script(_SET_LAST)
        self._unlock = client.register_script(_UNLOCK)
        self._renew = client.register_script(_RENEW)
        self._token: str | None = None  # set while this object holds the commit lock

    def key(self, feed_id: int) -> str:
        return f"{self.prefix}buf:{int(feed_id)}"

    # --- adding ----------------------------------------------------------------------------

    def add(self, points: Iterable[BufferedPoint], pipe: redis.client.Pipeline | None = None):
        """Queue points (already validated) onto `pipe`, or run one pipeline of our own.

        One APPEND per feed, one SADD, one script call for all last values.
        """
        per_feed: dict[int, list[tuple[int, float, bool]]] = {}
        for feed_id, t, v, join in points:
            per_feed.setdefault(int(feed_id), []).append((int(t), float(v), bool(join)))
        if not per_feed:
            return
        own = pipe is None
        p = self.redis.pipeline(transaction=False) if own else pipe
        last_args: list = []
        for feed_id, rows in per_feed.items():
            p.append(self.key(feed_id), pack_records(rows))
            newest = rows[0]
            for r in rows[1:]:
                if r[0] >= newest[0]:  # of equal times the later arrival wins, as in the file
                    newest = r
            last_args += [feed_id, newest[0], repr(newest[1])]
        p.sadd(self.dirty_key, *per_feed)
        self._set_last(keys=[self.last_key], args=last_args, client=p)
        if own:
            p.execute()

    # --- reading ---------------------------------------------------------------------------

    def pending(self, feed_id: int) -> np.ndarray:
        """Every buffered record of a feed (arrival order), for reads to merge."""
        return parse_records(self.redis.get(self.key(feed_id)) or b"")

    def dirty_feeds(self) -> list[int]:
        return sorted(int(x) for x in self.redis.smembers(self.dirty_key))

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

    # --- committing ------------------------------------------------------------------------

    def commit_feed(
        self,
        directory: str | os.PathLike,
        feed_id: int,
        interval: int | None,
        *,
        now: float | None = None,
        block_records: int = DEFAULT_BLOCK_RECORDS,
        fsync: bool = True,
        after_write: Callable[[int, int], None] | None = None,
        report: CommitReport | None = None,
    ) -> CommitReport:
        """Commit a feed's buffer to its files, block by block.

        Each block is written and fsync'd before its records are trimmed from Redis.
        `interval` is needed only for a feed without files; None with no files drops the
        records (the feed is gone). `after_write(feed_id, records)` runs between the fsync and
        the trim (a seam for the crash test).
        """
        report = report or CommitReport()
        key = self.key(feed_id)
        block_bytes = block_records * RECORD_SIZE
        # Only what is here now: under a steady stream of new points the loop must still end.
        todo = self.redis.strlen(key)
        if todo == 0:
            self.redis.srem(self.dirty_key, feed_id)
            return report
        while todo > 0:
            if self._token and not self._renew(
                keys=[self.lock_key], args=[self._token, LOCK_TTL_S]
            ):
                # Another commit took over (we stalled past the TTL): trimming now could
                # remove records it has not written. Stop; it will commit them.
                raise LockLost("the feed commit lock expired during the commit")
            raw = self.redis.getrange(key, 0, min(block_bytes, todo) - 1)
            usable = len(raw) - len(raw) % RECORD_SIZE
            if usable == 0:
                return report
            todo -= usable
            records = parse_records(raw[:usable])
            if interval is None and phpfina.read_meta(directory, feed_id) is None:
                log.warning("feed %s: no such feed, dropping %d buffered points", feed_id, usable)
                report.dropped[feed_id] = report.dropped.get(feed_id, 0) + len(records)
            else:
                result = phpfina.write_points(
                    directory,
                    feed_id,
                    interval or 0,
                    records["t"],
                    records["v"],
                    (records["flags"] & FLAG_JOIN).astype(bool),
                    now=now,
                    fsync=fsync,
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
            if after_write is not None:
                after_write(feed_id, len(records))
            trimmed = self._trim(
                keys=[key, self.dirty_key, self.lock_key], args=[usable, feed_id, self._token or ""]
            )
            if trimmed == -1:
                raise LockLost("the feed commit lock was lost before the trim; records kept")
        return report

    def commit(
        self,
        directory: str | os.PathLike,
        intervals: Mapping[int, int],
        *,
        now: float | None = None,
        block_records: int = DEFAULT_BLOCK_RECORDS,
        fsync: bool = True,
        after_write: Callable[[int, int], None] | None = None,
    ) -> CommitReport:
        """Commit every dirty feed. `intervals` maps feed id -> interval for feeds that exist."""
        report = CommitReport()
        token = uuid.uuid4().hex
        if not self.redis.set(self.lock_key, token, nx=True, ex=LOCK_TTL_S):
            report.skipped = True  # another commit is running; it will take these too
            return report
        self._token = token
        try:
            for feed_id in self.dirty_feeds():
                self.commit_feed(
                    directory,
                    feed_id,
                    intervals.get(feed_id),
                    now=now,
                    block_records=block_records,
                    fsync=fsync,
                    after_write=after_write,
                    report=report,
                )
                report.feeds += 1
        finally:
            self._token = None
            self._unlock(keys=[self.lock_key], args=[token])
        return report
