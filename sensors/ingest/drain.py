"""Step 2 of ingest, in a Celery worker: drain the shards' node streams into the feed buffer.

One drain at a time per shard (a lease per shard: core/redis_lock.py, renewed as it goes), so
one node's requests are processed in the order they were accepted, by one process: accumulating
processes and pulse counters then see their points in time order and need no lock of their own.
A drain holds every shard it can: the one it was queued for, then every shard no other drain
holds (looked for again every ADOPT_EVERY_S), so one drain usually serves the whole site and
the worker's other processes stay free for commits.

A pass over the held shards, for every node with entries (its shard's `ready` set), reads with
one script per NODES_PER_READ nodes (_READ) and ends with one script (_ACKNOWLEDGE), not a few
commands a node: redis-py's packing and parsing of commands was over half the drain's CPU (#29).
1. `XAUTOCLAIM ... 0` takes over, oldest first, what earlier consumers left pending: a drain
   killed mid-batch (its lease ran out: `BMS_INGEST_LEASE_S`), or this one after a transient
   error. Holding the lease means nobody else is working on them.
2. A node with nothing pending reads new entries (`XREADGROUP`), and a node with entries its
   done mark, in the same script. Both take at most `BMS_INGEST_SLICE` requests per node: a
   flooding node waits behind itself, and every other node gets its slice in the same pass.
3. Each node's slice goes to sensors.ingest.processing.ingest_rows in chunks of at most CHUNK_ROWS
   rows; `XACK` + `XDEL` only once the chunk's points are in the feed buffer (at the end of
   the pass, one script for all its nodes, which after a pass that ended well also takes each
   node whose stream is empty out of its ready set).
Each request is counted once: the chunk's last entry id is written to the node's `done` key in
the same transaction as its points and process state (stream.done_key), and entries at or
before it (a chunk done but not acknowledged when its drain died, taken over by XAUTOCLAIM)
are acknowledged without being processed again. The readings' times play no part in it: a
late or future-dated reading is processed like any other (feeds/processes/run.py).

Between passes the drain blocks on its shards' bells (`BLPOP`, stream.bell_key: the web rings a
shard's bell in the same script as its append) rather than sleeping in turn, so a reading is in
the buffer, where reads look, a few milliseconds after its `ok` (issue #29). The block always
has a timeout, shorter than the lease and the Redis socket timeout: no drain waits forever.

Falling behind: one drain runs in one worker process and gets that process's CPU. A pass that
took longer than BMS_INGEST_BEHIND_S, or left requests waiting (a node's slice was full), makes
the drain release the upper half of its shards (never the one it was queued for) and queue a
drain for them: the worker's other process takes them. Only a drain holding every shard hands
over (with `-c 2`, a second drain is all there is room for). It does not take them back for
SHED_HOLD_S (then it adopts them again if nobody did, so a worker whose other process is busy
loses nothing but that second). Releasing is the usual release between passes: whatever it
read and did not process stays pending, taken over in order by the shards' next holder
(XAUTOCLAIM).

Transient failures (database or Redis away) stop the drain with the entries left pending; they
are taken over by the next drain (the web's next kick, or beat's safety net every few seconds).
A request that gets the same error from Redis or the database set_aside.ATTEMPTS times running
(a script error, not an outage) is moved aside and recorded on its node's input errors
(sensors/ingest/set_aside.py), so it cannot stop its node and shards forever.
Any other failure of a request is logged and the request dropped, as a failed Celery task was.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import redis
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import DatabaseError
from redis.exceptions import LockError

from core import redis_lock
from core.redis import get_redis, redis_script
from sensors.cache import check_generation
from sensors.ingest import set_aside
from sensors.ingest import stream as stream

log = logging.getLogger(__name__)

# Left pending for the next drain, never dropped: an outage, or Celery's soft time limit (a
# drain that overran its task's time must not count the request it was in as failed).
TRANSIENT_ERRORS = (DatabaseError, redis.RedisError, LockError, SoftTimeLimitExceeded)
CHUNK_ROWS = 5000  # rows per ingest_rows call: bounds a call's time between lease renewals
# A chunk's time grows with its values, not its rows: one row may carry BMS_INGEST_MAX_VALUES
# (50,000). Before a chunk of many values the leases are renewed for as long as it may take on
# a starved CPU (CI saw 8 s for 50,000 values at load 6 against a 5 s lease, and the drain
# stopped with "lease lost"); a dead drain's shards still free within that time.
LEASE_PER_VALUE_S = 0.001
NODES_PER_READ = 200  # nodes per call of the _READ script
# The values of one transaction that runs many nodes' requests of a pass together
# (processing.ingest_many): at 1,000 posts a second a pass finds a few nodes with one post
# each, and a transaction per node was three Redis round trips each (issue #29). A node with
# more values, or more rows than a chunk, runs on its own as before.
TOGETHER_VALUES = 10_000
# A drain looks for shards no drain holds this often (a drain that ended or died leaves them).
ADOPT_EVERY_S = 1.0
# The longest a drain blocks on its bells: well inside its lease (renewed before each block)
# and the Redis client's socket timeout (core.redis), so a block never reads as a dead server.
MAX_BLOCK_S = 1.0
# A pass that caught up (took less than a slice) waits this long before the next one, so that
# a steady stream of single posts is taken several requests per pass: a pass costs a few Redis
# round trips and an ingest_rows call however few requests it takes (docs/BENCHMARKS.md,
# "Streams": 0.5 ms of worker CPU per post when every pass took one). Adds at most this much
# to a reading's way to its feed.
GATHER_S = 0.005
# A drain that released shards because it fell behind leaves them to another drain this long
# before it may take them again (a Celery task is picked up in milliseconds by a free process).
SHED_HOLD_S = 1.0


def behind_s() -> float:
    return float(settings.BMS_INGEST_BEHIND_S)


# The start of a pass, one script per NODES_PER_READ nodes instead of three commands a node
# (redis-py's packing and parsing of commands was over half of the drain's CPU, #29). Per node:
# take over, oldest first, what earlier consumers left pending (XAUTOCLAIM, min idle 0: holding
# the lease means nobody else is working on them), else read new entries (XREADGROUP, no BLOCK:
# allowed in scripts); at most ARGV[3] of them; then, if it has entries, its done mark. A stream
# without the group (new, or lost to a Redis restart without AOF, or flushed) gets it made
# (from id 0, MKSTREAM) and is read at once. Deleted entries are left out (Redis 7 drops them
# from the pending list; 6.2 returned them empty); a claim that met only deleted ones and has
# more pending to look at (its cursor is not 0-0) reads nothing new: those come first, next pass.
# KEYS: per node: stream, done mark. ARGV: group, consumer, count, the entry's field.
# Returns per node {how (0 read new, 1 taken over, 2 group made), done mark or nil,
# {id, field value or nil, ...}}.
_READ = """
local group, consumer, count, field = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local out = {}
for k = 1, #KEYS, 2 do
  local how, taken, cursor = 1, {}, '0-0'
  local claimed = redis.pcall('XAUTOCLAIM', KEYS[k], group, consumer, 0, '0-0', 'COUNT', count)
  if type(claimed) == 'table' and claimed['err'] then
    if string.sub(claimed['err'], 1, 7) ~= 'NOGROUP' then return claimed end
    redis.call('XGROUP', 'CREATE', KEYS[k], group, '0', 'MKSTREAM')
    how = 2
  else
    cursor = claimed[1]
    for _, e in ipairs(claimed[2]) do
      if e and e[2] then taken[#taken + 1] = e end
    end
  end
  if #taken == 0 and cursor == '0-0' then
    if how == 1 then how = 0 end
    local got = redis.call('XREADGROUP', 'GROUP', group, consumer, 'COUNT', count,
      'STREAMS', KEYS[k], '>')
    if got then taken = got[1][2] end
  end
  local flat, mark = {}, false
  for _, e in ipairs(taken) do
    local value = false
    local fields = e[2]
    for f = 1, #fields, 2 do
      if fields[f] == field then value = fields[f + 1] end
    end
    flat[#flat + 1] = e[1]
    flat[#flat + 1] = value
  end
  if #flat > 0 then mark = redis.call('GET', KEYS[k + 1]) end
  out[#out + 1] = {how, mark, flat}
end
return out
"""

# The end of a pass, one script: XACK + XDEL of every entry done, and (after a pass that ended
# well) each node leaves its shard's ready set once its stream is empty; atomic against the
# web's append script (XADD + SADD), so a request appended meanwhile keeps its node ready.
# The ids go to XACK/XDEL at most ACK_IDS_PER_CALL a call (Lua's unpack has a bounded stack).
# KEYS: per node: stream, ready set. ARGV: group, then per node: id, forget (1/0), how many
# entry ids, the ids. Returns how many nodes left their ready set.
ACK_IDS_PER_CALL = 500
_ACKNOWLEDGE = (
    "local per_call = "
    + str(ACK_IDS_PER_CALL)
    + """
local group = ARGV[1]
local a = 2
local forgotten = 0
for k = 1, #KEYS, 2 do
  local node, forget, n = ARGV[a], ARGV[a + 1], tonumber(ARGV[a + 2])
  a = a + 3
  for first = a, a + n - 1, per_call do
    local last = math.min(first + per_call, a + n) - 1
    redis.call('XACK', KEYS[k], group, unpack(ARGV, first, last))
    redis.call('XDEL', KEYS[k], unpack(ARGV, first, last))
  end
  a = a + n
  if forget == '1' and redis.call('XLEN', KEYS[k]) == 0 then
    forgotten = forgotten + redis.call('SREM', KEYS[k + 1], node)
  end
end
return forgotten
"""
)
# Nodes per call of _ACKNOWLEDGE: one call for a pass of up to this many nodes; a bigger pass
# (a backlog of thousands) is cut so that no one script holds Redis for long.
ACK_NODES_PER_CALL = 1000


def _values(rows: list) -> int:
    """How many values the rows hold ([t, {key: value}] or [t, [values]] each)."""
    return sum(len(r[1]) if len(r) > 1 and isinstance(r[1], dict | list) else 1 for r in rows)


def _rows_of(entries: list) -> list:
    """The rows of a node's parsed entries, in order (an unreadable entry has none)."""
    return [row for _entry_id, rows in entries if rows for row in rows]


def _entry_text(entry_id: bytes | str) -> str:
    return entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)


def lease_s() -> float:
    return float(settings.BMS_INGEST_LEASE_S)


def linger_s() -> float:
    return float(settings.BMS_INGEST_LINGER_S)


def slice_size() -> int:
    return int(settings.BMS_INGEST_SLICE)


def block_s(wanted_s: float) -> float:
    """How long one wait on the bells may block: what the caller wants, but never 0 (BLPOP's
    "forever"), never longer than a third of the lease nor MAX_BLOCK_S."""
    return max(0.001, min(wanted_s, lease_s() / 3, MAX_BLOCK_S))


@dataclass
class DrainReport:
    passes: int = 0
    requests: int = 0
    rows: int = 0
    claimed: int = 0  # entries taken over from an earlier consumer
    already_done: int = 0  # entries processed before (redelivered): acknowledged, not redone
    dropped: int = 0
    busy: bool = False  # another drain held the shard it was queued for
    shards: int = 0  # the most shards it held at once
    wakes: int = 0  # waits ended by a bell (a request appended) rather than the timeout
    stopped: str = ""  # why the drain stopped early ("transient: ...", "lease lost", "budget")
    shed: int = 0  # shards it released to another drain because it fell behind
    set_aside: int = 0  # requests that failed the same way set_aside.ATTEMPTS times: moved aside

    def as_dict(self) -> dict:
        return dict(self.__dict__)


class LeaseLost(Exception):
    """Another drain holds the shard now (ours ran out): stop without acknowledging."""


class Drain:
    def __init__(
        self, shard: int, consumer: str | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.shard = shard  # the shard it was queued for; it holds others too (self.held)
        self.client = get_redis()
        self.consumer = consumer or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.token = self.consumer
        self.held: list[int] = []  # shards whose lease this drain holds, in order
        self.renewed_at = 0.0  # time.monotonic() of the last renewal of every held lease
        self.acks: dict[int, list] = {}  # node -> entries done this pass, acknowledged at its end
        # Per pass (run_pass): no request of it reaches back past its site's charge, so no
        # node's rows need history_budget.admit; the nodes' state, sent once at its end.
        self.all_live = False
        self.node_state = None  # a processing.NodeStateWrites during a pass
        self.report = DrainReport()
        # Times the passes and the shards it shed (tests pass a controlled clock).
        self.clock = clock
        self.last_pass_s = 0.0  # how long the last pass with work took
        self.full_slices = 0  # nodes of the last pass that had a full slice (more waiting)
        self.shed_until: dict[int, float] = {}  # shard -> when this drain may adopt it again

    # --- the leases -----------------------------------------------------------------------------

    # core/redis_lock.py's lock, waited out rather than taken over: a lease of seconds ends
    # sooner than asking Redis on every pass whether its holder is alive would pay for.
    def acquire(self) -> bool:
        """Take the lease of its own shard and of every other shard no drain holds; True if it
        holds its own shard. Each shard taken has its kick flag set, so the web queues no drain
        for it while this one runs."""
        self.adopt()
        return self.shard in self.held

    def adopt(self) -> list[int]:
        """Take every free shard's lease (one round trip); the shards taken."""
        now = self.clock()
        wanted = [self.shard] if self.shard not in self.held else []
        wanted += [
            k
            for k in range(stream.shards())
            if k != self.shard and k not in self.held and self.shed_until.get(k, 0.0) <= now
        ]
        if not wanted:
            return []
        keys = redis_lock.acquire_each(
            self.client, [stream.lease_key(k) for k in wanted], lease_s(), self.token
        )
        taken = [k for k in wanted if stream.lease_key(k) in keys]
        if taken:
            pipe = self.client.pipeline(transaction=False)
            for shard in taken:
                pipe.set(stream.kick_key(shard), 1, ex=stream.KICK_TTL_S)
            pipe.execute()
            if not self.held:
                self.renewed_at = time.monotonic()
            self.held = sorted(self.held + taken)
            self.report.shards = max(self.report.shards, len(self.held))
        return taken

    def renew(self, ttl_s: float | None = None) -> None:
        """Renew every held lease (one round trip) for lease_s(), or `ttl_s`; LeaseLost if any
        ran out: another drain may be working on that shard now, so this one stops without
        acknowledging anything."""
        keys = [stream.lease_key(k) for k in self.held]
        renewed_at = time.monotonic()
        ttl = lease_s() if ttl_s is None else max(lease_s(), ttl_s)
        for shard, ok in zip(
            self.held, redis_lock.renew_each(self.client, keys, self.token, ttl), strict=True
        ):
            if not ok:
                raise LeaseLost(shard)
        self.renewed_at = renewed_at

    def renew_if_due(self) -> None:
        """renew() once a tenth of the lease has passed since the last renewal: a chunk then
        starts with at least nine tenths of every lease left (nobody else can hold them), and a
        pass of many small requests costs one renewal, not one per node."""
        if time.monotonic() - self.renewed_at >= lease_s() / 10:
            self.renew()

    def release(self) -> list[int]:
        """Release every held lease; the shards it held."""
        released = self.held
        if released:
            keys = [stream.lease_key(k) for k in released]
            redis_lock.release_each(self.client, keys, self.token)
        self.held = []
        return released

    def behind(self) -> bool:
        """Whether the last pass fell behind: it took longer than behind_s(), or a node had
        more requests than a slice (they wait for the next pass)."""
        return self.last_pass_s >= behind_s() or self.full_slices > 0

    def shed_if_behind(self) -> list[int]:
        """Behind, holding every shard (the only drain), and not shed within SHED_HOLD_S:
        release the upper half of the held shards (never the one it was queued for) and queue
        one drain for them, so the worker's other process takes them; the shards released.

        Only the only drain hands over: a drain already sharing the shards with another would
        queue drains that no free process runs (both are busy draining), leaving its shards to
        nobody until it took them back."""
        now = self.clock()
        if len(self.held) < 2 or len(self.held) < stream.shards() or not self.behind():
            return []
        if any(until > now for until in self.shed_until.values()):
            return []  # shed recently: let the other drain show what it takes first
        others = [k for k in self.held if k != self.shard]
        shed = others[len(others) - len(self.held) // 2 :]
        redis_lock.release_each(self.client, [stream.lease_key(k) for k in shed], self.token)
        self.held = [k for k in self.held if k not in shed]
        for shard in shed:
            self.shed_until[shard] = now + SHED_HOLD_S
        # One drain for them all (it adopts every free shard); the kick flags stay set (set
        # when adopted): this message is the drain they stand for, and beat's safety net
        # queues another if it is lost.
        stream.kick(shed[0])
        self.report.shed += len(shed)
        log.info(
            "ingest drain fell behind (pass %.3f s, %d full slices): shards %s handed over",
            self.last_pass_s,
            self.full_slices,
            shed,
        )
        return shed

    # --- waiting --------------------------------------------------------------------------------

    def wait(self, wanted_s: float) -> bool:
        """Block until a request is appended to a held shard (its bell rings) or block_s(wanted_s)
        passes; True if a bell rang. The bells are emptied by the next pass, before it reads."""
        if not self.held:
            return False
        rang = self.client.blpop([stream.bell_key(k) for k in self.held], timeout=block_s(wanted_s))
        if rang is not None:
            self.report.wakes += 1
        return rang is not None

    # --- a pass ---------------------------------------------------------------------------------

    def run_pass(self, deadline: float | None = None) -> int:
        """One pass over the held shards; the number of requests processed. Past `deadline`
        (time.monotonic()) no further node is begun: what it read stays pending to this
        consumer, taken over in order by the next drain."""
        self.last_pass_s, self.full_slices = 0.0, 0  # a pass with nothing to do is not behind
        if not self.held:
            return 0
        pipe = self.client.pipeline(transaction=False)
        # Bells first, then the ready sets: a request appended after the DEL rings again and
        # the next wait returns at once; one appended before it is in the ready set read here.
        pipe.delete(*(stream.bell_key(k) for k in self.held))
        for shard in self.held:
            pipe.smembers(stream.ready_key(shard))
        ready = {  # node -> the shard whose ready set named it
            int(n): shard
            for shard, members in zip(self.held, pipe.execute()[1:], strict=True)
            for n in members
        }
        nodes = sorted(ready)
        if not nodes:
            return 0
        started = self.clock()
        self.report.passes += 1
        slices: dict[int, list] = {}
        marks: dict[int, bytes | None] = {}
        for start in range(0, len(nodes), NODES_PER_READ):
            read, read_marks = self._read(nodes[start : start + NODES_PER_READ])
            slices.update(read)
            marks.update(read_marks)
        busy = [n for n in nodes if slices.get(n)]
        self.full_slices = sum(1 for n in busy if len(slices[n]) >= slice_size())
        # Once a pass, not once a node (#29): the config generation, and whether any request
        # reaches back further than its site was charged for (history_budget.admit).
        check_generation()
        parsed = {n: self._parse(n, slices[n]) for n in busy}
        self.all_live = not self._any_history(parsed, marks)
        from sensors.ingest.processing import NodeStateWrites  # the worker's import

        self.node_state = NodeStateWrites()
        done = 0
        try:
            together = self._together(busy, parsed)
            for group in together:
                if deadline is not None and time.monotonic() >= deadline:
                    break
                done += self._process_together(group, parsed, marks)
            alone = set(busy).difference(*together)
            for node_id in busy:
                if node_id not in alone:
                    continue
                if deadline is not None and time.monotonic() >= deadline:
                    break
                done += self._process(node_id, parsed[node_id], marks[node_id])
        except BaseException:
            self._end_pass({})  # what was done is acknowledged; no node is forgotten
            raise
        self._end_pass(ready)
        self.last_pass_s = self.clock() - started
        return done

    def _read(self, nodes: list[int]) -> tuple[dict[int, list], dict[int, bytes | None]]:
        """Up to slice_size() entries of each node, (entry id, its field's JSON or None), its
        pending ones first (taken over), else new; and the done mark of each node with
        entries. One _READ script call."""
        keys: list[str] = []
        for node_id in nodes:
            keys += [stream.stream_key(node_id), stream.done_key(node_id)]
        args = [stream.GROUP, self.consumer, slice_size(), stream.FIELD]
        reply = redis_script(_READ)(keys=keys, args=args, client=self.client)
        slices: dict[int, list] = {}
        marks: dict[int, bytes | None] = {}
        for node_id, (how, mark, flat) in zip(nodes, reply, strict=True):
            if not flat:
                continue
            slices[node_id] = list(zip(flat[0::2], flat[1::2], strict=True))
            marks[node_id] = mark
            if how == 1:
                self.report.claimed += len(flat) // 2
        return slices, marks

    def _parse(self, node_id: int, entries: list) -> list[tuple[bytes, list | None]]:
        """(entry id, rows) of each entry; None for an unreadable one (logged, and dropped
        with its chunk by _process)."""
        parsed: list[tuple[bytes, list | None]] = []
        for entry_id, raw in entries:
            try:
                if raw is None:
                    raise KeyError(stream.FIELD)
                rows = json.loads(raw)
            except (KeyError, ValueError) as exc:
                log.error(
                    "ingest entry %s of node %s is unreadable, dropped: %s", entry_id, node_id, exc
                )
                rows = None
            parsed.append((entry_id, rows))
        return parsed

    def _any_history(self, parsed: dict[int, list], marks: dict) -> bool:
        """Whether any request of the pass may reach back further than its site was charged
        for: one Redis round trip for the pass. Live readings never do, and then no node's
        rows go through history_budget.admit. (A file's charged reach only moves back, so a
        request that does not reach back now does not later in the pass.)"""
        from feeds.processes.run import stream_id
        from sensors.ingest import history_budget

        earliest: dict[int, tuple[float, set[str]]] = {}
        for node_id, entries in parsed.items():
            done = marks.get(node_id)
            rows = [
                row
                for entry_id, entry_rows in entries
                if entry_rows and (done is None or stream_id(entry_id) > stream_id(done))
                for row in entry_rows
            ]
            if rows:
                keys = {key for _t, values in rows for key in values}
                earliest[node_id] = (min(row[0] for row in rows), keys)
        return bool(earliest) and history_budget.reaches_back(earliest, time.time())

    def _together(self, busy: list[int], parsed: dict[int, list]) -> list[list[int]]:
        """The busy nodes whose requests run together (ingest_many), in groups of at most
        TOGETHER_VALUES values: those whose requests make one chunk. The others run alone."""
        groups: list[list[int]] = []
        group: list[int] = []
        values = 0
        for node_id in busy:
            rows = _rows_of(parsed[node_id])
            node_values = _values(rows)
            if len(rows) >= CHUNK_ROWS or node_values > TOGETHER_VALUES:
                continue
            if group and values + node_values > TOGETHER_VALUES:
                groups.append(group)
                group, values = [], 0
            group.append(node_id)
            values += node_values
        if group:
            groups.append(group)
        return groups

    def _process_together(self, nodes: list[int], parsed: dict[int, list], marks: dict) -> int:
        """Several nodes' requests (one chunk each) in one transaction (ingest_many); the
        requests taken. If it fails, each node is processed again on its own (_process), where
        a failure is handled per node as always: left pending, set aside or dropped."""
        from sensors.ingest import history_budget
        from sensors.ingest.processing import NodeRows, ingest_many

        taken = 0
        left: dict[int, list] = {}  # node -> its entries not processed before
        kept: dict[int, int] = {}  # node -> its rows the history budget let through
        jobs: list[NodeRows] = []
        for node_id in nodes:
            taken += len(parsed[node_id])
            entries = left[node_id] = self._skip_done(node_id, parsed[node_id], marks[node_id])
            rows = _rows_of(entries)
            if rows and not self.all_live:
                # As _process: history over its site's budget is left out before any process.
                rows = history_budget.admit(node_id, rows, time.time())
            kept[node_id] = len(rows)
            if rows:
                jobs.append(NodeRows(node_id, rows, _entry_text(entries[-1][0])))
        self._renew_for(sum(_values(job.rows) for job in jobs))
        try:
            reports = ingest_many(jobs, self.node_state) if jobs else []
        except Exception as exc:
            if isinstance(exc, TRANSIENT_ERRORS) and not set_aside.repeatable(exc):
                raise  # an outage or the time limit: all left pending, as for a node alone
            # Nothing of a failed transaction was written, and a node whose points were (the
            # failure came after the EXEC) finds its done mark: none is counted twice. A
            # request the server refuses each time is set aside by its own node's run.
            log.warning(
                "ingest of %d nodes together failed, each on its own now: %r", len(jobs), exc
            )
            for node_id in nodes:
                self._process(node_id, left[node_id], None)
            return taken
        for job, report in zip(jobs, reports, strict=True):
            if report.already_done:
                self.report.already_done += len(left[job.node_id])
        for node_id in nodes:
            entries = left[node_id]
            self.report.dropped += sum(1 for _e, rows in entries if rows is None)
            self._acknowledge(node_id, [e for e, _rows in entries])
            self.report.requests += len(entries)
            self.report.rows += kept[node_id]
        return taken

    def _renew_for(self, values: int) -> None:
        """Before running `values` values: still ours, nobody else is working on these entries.
        A big chunk gets the lease plus LEASE_PER_VALUE_S a value; else the usual renewal."""
        extra_s = values * LEASE_PER_VALUE_S
        if extra_s > lease_s() / 2:
            self.renew(lease_s() + extra_s)
        else:
            self.renew_if_due()

    def _skip_done(self, node_id: int, entries: list, done: bytes | None) -> list:
        """The entries after the node's done mark; those at or before it were processed before
        their XACK when a drain died: acknowledged, not counted again."""
        from feeds.processes.run import stream_id  # with the worker's imports, not the web's

        if done is None:
            return entries
        finished = [e for e, _ in entries if stream_id(e) <= stream_id(done)]
        if finished:
            self._acknowledge(node_id, finished)
            self.report.already_done += len(finished)
            entries = [(e, r) for e, r in entries if stream_id(e) > stream_id(done)]
        return entries

    def _process(self, node_id: int, entries: list, done: bytes | None) -> int:
        from sensors.ingest import history_budget
        from sensors.ingest.processing import ingest_rows

        taken = len(entries)
        entries = self._skip_done(node_id, entries, done)
        chunk_ids: list = []
        chunk_rows: list[list] = []
        for index, (entry_id, rows) in enumerate(entries):
            if rows is None:
                self.report.dropped += 1
                rows = []
            chunk_ids.append(entry_id)
            chunk_rows.extend(rows)
            last = index == len(entries) - 1
            if len(chunk_rows) < CHUNK_ROWS and not last:
                continue
            self._renew_for(_values(chunk_rows))
            try:
                if chunk_rows and not self.all_live:
                    # History over its site's budget is left out before any process runs on it
                    # (the web refused it before `ok`; this is for MQTT and older entries).
                    chunk_rows = history_budget.admit(node_id, chunk_rows, time.time())
                if chunk_rows:
                    ran = ingest_rows(
                        node_id,
                        chunk_rows,
                        entry=_entry_text(chunk_ids[-1]),
                        check_config=False,  # read once for the pass (run_pass)
                        node_state=self.node_state,
                    )
                    if ran.already_done:
                        self.report.already_done += len(chunk_ids)
            except TRANSIENT_ERRORS as exc:
                # Left pending for the next drain, unless it is the server's answer to these
                # requests and came back set_aside.ATTEMPTS times: then it would stop the node
                # (and this drain's shards) for good, so it is moved aside and recorded.
                if not set_aside.repeatable(exc):
                    raise
                if set_aside.failed(self.client, node_id, chunk_ids[0]) < set_aside.ATTEMPTS:
                    raise
                set_aside.move_aside(self.client, node_id, chunk_ids, chunk_rows, exc)
                self.report.set_aside += len(chunk_ids)
            except Exception:
                # A bug or bad data, not a passing outage: retrying would stop the node for good.
                log.exception(
                    "ingest of node %s failed: %d request(s) dropped", node_id, len(chunk_ids)
                )
                self.report.dropped += len(chunk_ids)
            self._acknowledge(node_id, chunk_ids)
            self.report.requests += len(chunk_ids)
            self.report.rows += len(chunk_rows)
            chunk_ids, chunk_rows = [], []
        return taken

    def _acknowledge(self, node_id: int, ids: list) -> None:
        """Acknowledge at the end of the pass (_acknowledge_pass): an entry done but not yet
        acknowledged when its drain dies is at or before its node's done mark, so the next
        drain acknowledges it without processing it again."""
        self.acks.setdefault(node_id, []).extend(ids)

    def _end_pass(self, forget: dict[int, int]) -> None:
        """The nodes' state (one script call for the pass), then _acknowledge_pass. `forget`:
        node -> the shard whose ready set named it, after a pass that ended well: those whose
        stream is empty leave it. If the state's flush fails, what was done is acknowledged
        all the same (its done marks are written) and no node is forgotten."""
        try:
            self.node_state.flush()
        except BaseException:
            self._acknowledge_pass({})
            raise
        self._acknowledge_pass(forget)

    def _acknowledge_pass(self, forget: dict[int, int]) -> None:
        """XACK + XDEL of every entry done this pass and the forgetting of `forget`'s empty
        nodes: one _ACKNOWLEDGE script call for up to ACK_NODES_PER_CALL nodes."""
        acks, self.acks = self.acks, {}
        nodes = sorted(set(acks) | set(forget))
        script = redis_script(_ACKNOWLEDGE)
        for start in range(0, len(nodes), ACK_NODES_PER_CALL):
            keys: list[str] = []
            args: list = [stream.GROUP]
            for node_id in nodes[start : start + ACK_NODES_PER_CALL]:
                shard = forget.get(node_id, stream.shard_of(node_id))  # unused if not forgotten
                ids = acks.get(node_id, [])
                keys += [stream.stream_key(node_id), stream.ready_key(shard)]
                args += [node_id, 1 if node_id in forget else 0, len(ids), *ids]
            script(keys=keys, args=args, client=self.client)


def drain_shard(
    shard: int, budget_s: float | None = None, consumer: str | None = None
) -> DrainReport:
    """Drain the shard, and every shard no other drain holds, until they have been empty for
    linger_s() or budget_s has passed (then a fresh drain is queued, so one task stays well
    inside Celery's time limit and the worker's other tasks get their turn)."""
    budget_s = float(settings.BMS_INGEST_DRAIN_BUDGET_S) if budget_s is None else budget_s
    drain = Drain(shard, consumer)
    deadline = time.monotonic() + budget_s
    client = drain.client
    idle_rounds = 0
    while True:
        if not drain.acquire():
            drain.report.busy = True  # its holder looks at the ready set again when it ends
            if not drain.held:
                return drain.report
        before = drain.report.requests + drain.report.dropped
        try:
            _run_until_idle(drain, deadline)
        except TRANSIENT_ERRORS as exc:
            drain.report.stopped = f"transient: {type(exc).__name__}: {exc}"
            log.warning("ingest drain of shards %s stopped, entries kept: %s", drain.held, exc)
            _release_quietly(drain)
            return drain.report
        except LeaseLost as exc:
            drain.report.stopped = "lease lost"
            log.warning(
                "ingest drain lost its lease of shard %s (ran past %.1f s)", exc.args[0], lease_s()
            )
            return drain.report
        released = drain.release()
        if time.monotonic() >= deadline:
            # The kick flags stay set (the web queues nothing meanwhile); the fresh drain takes
            # the shards over, and beat's safety net does if this message is lost.
            drain.report.stopped = "budget"
            stream.kick(shard)
            return drain.report
        # Released first, then the flags, then a last look: a request appended after the last
        # pass either is seen here or finds its flag free and queues a new drain.
        if not released:
            return drain.report
        client.delete(*(stream.kick_key(k) for k in released))
        pipe = client.pipeline(transaction=False)
        for k in released:
            pipe.scard(stream.ready_key(k))
        if not any(pipe.execute()):
            return drain.report
        idle_rounds = (
            idle_rounds + 1 if drain.report.requests + drain.report.dropped == before else 0
        )
        if idle_rounds > 2:  # ready but nothing to read: beat's next look, not a spin
            return drain.report


def _run_until_idle(drain: Drain, deadline: float) -> None:
    """Passes until the held shards have been empty for linger_s(), blocking on their bells in
    between: while a drain lingers, the kick flags stay taken, so a steady trickle of single
    posts is drained without one Celery message per post (apply_async costs the web ~0.5 ms of
    CPU), and each post is taken as it arrives."""
    idle_until = None
    next_adopt = time.monotonic() + ADOPT_EVERY_S
    while (now := time.monotonic()) < deadline:
        if now >= next_adopt:
            drain.adopt()
            next_adopt = now + ADOPT_EVERY_S
        done = drain.run_pass(deadline)
        drain.shed_if_behind()
        if done:
            idle_until = None
            if done < slice_size():
                time.sleep(GATHER_S)
            continue
        now = time.monotonic()
        if idle_until is None:
            idle_until = now + linger_s()
        if now >= idle_until:
            return
        drain.renew()  # a block is shorter than a third of the lease
        drain.wait(min(idle_until, deadline, next_adopt) - now)


def _release_quietly(drain: Drain) -> None:
    held = drain.held
    try:
        drain.release()
    except redis.RedisError as exc:  # Redis away: the leases run out by themselves
        log.warning("could not release the leases of shards %s: %s", held, exc)


def backlog() -> dict:
    """Requests waiting per shard (stream entries, processed or not yet acknowledged)."""
    client = get_redis()
    per_shard = {}
    for shard in range(stream.shards()):
        nodes = [int(n) for n in client.smembers(stream.ready_key(shard))]
        if not nodes:
            per_shard[shard] = 0
            continue
        pipe = client.pipeline(transaction=False)
        for node_id in nodes:
            pipe.xlen(stream.stream_key(node_id))
        per_shard[shard] = sum(pipe.execute())
    return per_shard
