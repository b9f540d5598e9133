"""Input processes: emoncms's process list, by the same names, ids and meanings.

A sensor's `processes` is a JSON list of steps run in order on each reading, each taking the
value left by the one before (feeds/processes/catalog.py lists them and their arguments,
feeds/processes/steps.py says what each does, docs/FEEDS.md has the table):

    {"process": "log_to_feed", "feed": 7}        log the value
    {"process": "scale", "arg": 2.0}             value * arg
    {"process": "power_to_kwh", "feed": 8}       W -> cumulative kWh
    {"process": "if_zero_skip"}                  skip the next step when the value is 0
    {"process": "goto_process", "arg": 1}        jump to position 1 (emoncms counts from 1)

Stateful processes keep state per (input, step) in Redis. A reading at or before the last one
a step processed (late, repeated, or after a future-dated one) is handled as emoncms does: no
time elapsed, so nothing is added, and power_to_kwh and its kin move their clock back to it
(steps.LATE); the value is passed on and the later steps run. A reading older than the step's
last is listed in the report (`late`) for the caller to record. Those steps remember the times
of their last steps.SEEN readings, so a row a gateway sends again (no `ok` reached it) is not
counted a second time once the clock has moved back (emoncms would count it again).
Redelivery is not this rule's business: the caller passes a `mark` (its Redis Stream entry id)
written in the same transaction as the state and points, and a batch whose mark is already
there is not run again. Without state (a new step, or Redis lost its data) steps carry on from
the feed's last value, read from Redis or else from the feed's file, as emoncms's
get_timevalue does.

One post (the readings of one time and post id) is run as emoncms's process_node runs it: every
input's value is stored first, then the process lists run, so `add_input` and its kin see this
post's value of the other input, not the previous one.

Daily processes (kwh_to_kwhd, power_to_kwhd, max_value, ...) write a local day's figure at
that day's local midnight (emoncms's getstartday); a 86400 s feed floors it to its UTC slot,
as emoncms's PHPFina does, so a file reads the same day in both systems.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import redis

from core.dates import DEFAULT_TIME_ZONE
from feeds.processes import steps as ps
from feeds.processes.catalog import (
    CONTROL_FLOW,
    KNOWN,
    READS_FEED,
    STATEFUL,
    validate_steps,
)
from feeds.store.buffer import BufferedPoint, FeedBuffer

log = logging.getLogger(__name__)

# (input key, steps, t, value) or with a fifth item, the post it belongs to: the readings of
# one post share their t and post id (items without one are grouped by t alone).
InputItem = tuple[str, list[dict], int, float] | tuple[str, list[dict], int, float, int]
FileLast = Callable[[list[int]], dict[int, tuple[int, float]]]

__all__ = ["InputItem", "ProcessRunner", "RunCall", "RunReport", "validate_steps"]

# A process list may pass through its steps at most this many times the list's length per
# reading (emoncms's bound on goto loops); beyond it the reading stops there.
MAX_PASSES = 2

# How long a batch's mark (sensors: the node's last stream entry done) is kept: far longer than
# an entry can stay pending, short enough that a deleted node's mark goes away.
MARK_TTL_S = 7 * 86400
SHOWN_LATE = 50  # late readings listed in a report (all are counted in `replayed`)


def stream_id(raw: str | bytes) -> tuple[int, int]:
    """A Redis Stream id `ms-seq` as a comparable pair."""
    text = raw.decode() if isinstance(raw, bytes) else raw
    ms, _, seq = text.partition("-")
    return int(ms), int(seq or 0)


@dataclass(frozen=True)
class Late:
    """A reading a stateful step could not count: at or before the last it processed."""

    input_key: str
    process: str
    t: int
    last_t: int
    # True: the step counted nothing for it and moved its clock back to it, as emoncms does
    # (steps.CLOCK_BACK); False: the step did not count it at all.
    moved_back: bool = False


def state_field(index: int, step: dict) -> str:
    # The process name and feed are part of the field, so editing a step list never hands one
    # process another's state.
    return f"{index}:{step['process']}:{step.get('feed', '')}"


@dataclass
class RunReport:
    points: int = 0
    skipped_bad_values: int = 0
    replayed: int = 0  # readings a stateful step could not count (late): see `late`
    # Of those, the readings every late step processed by moving its clock back to them (as
    # emoncms's does): processed late, not skipped; staff are told which is which.
    processed_late: int = 0
    # Readings (not late) a clock-back step had counted already (a resent row), one per reading
    duplicates: int = 0
    late: list[Late] = field(default_factory=list)
    already_done: bool = False  # the mark was there: the batch ran before, nothing was done
    invalid_steps: int = 0
    loops: int = 0  # readings stopped by the goto bound (MAX_PASSES)
    logged: list[BufferedPoint] = field(default_factory=list)
    # (topic, t, value) of publish_to_mqtt steps, for the caller to publish after the run
    published: list[tuple[str, int, float | None]] = field(default_factory=list)


# The first ARGV[1] KEYS: state hashes (HGETALL each); the next: the hash of the feeds' last
# values, read for the feeds in ARGV[2..]; the KEYS after it, if any: the batches' marks (GET
# each). One round trip on the WATCHing connection (the marks read here, not by GETs of their
# own: #29), whatever the number of batches (run_many: a drain's pass).
_READ_STATES = """
local n = tonumber(ARGV[1])
local out = {}
for i = 1, n do out[i] = redis.call('HGETALL', KEYS[i]) end
-- HMGET in slices of 1,000 fields: unpack() of more than Lua's stack (about 8,000) fails,
-- and a batch may read as many feeds as a post has values (BMS_INGEST_MAX_VALUES, 50,000).
local last = {}
for i = 2, #ARGV, 1000 do
  local got = redis.call('HMGET', KEYS[n + 1], unpack(ARGV, i, math.min(i + 999, #ARGV)))
  for j = 1, #got do last[#last + 1] = got[j] end
end
out[n + 1] = last
for i = n + 2, #KEYS do out[i] = redis.call('GET', KEYS[i]) end
return out
"""

# A batch whose state keeps changing under it this often is in a storm of parallel tasks for
# the same input; the error (a RedisError) makes Celery retry the task later.
MAX_ATTEMPTS = 100


@dataclass(frozen=True)
class RunCall:
    """One batch of run_many: run()'s arguments."""

    items: list[InputItem]
    input_last: dict[int, float] | None = None
    input_ids: dict[str, int] | None = None
    mark: tuple[str, str] | None = None


@dataclass
class _Job:
    batch: list  # the items in the order they run
    inputs: tuple[dict[int, float], dict[str, int]]
    state_keys: list[str]
    feeds: list[int]  # read by a step (READS_FEED): their last values are loaded
    mark: tuple[str, str] | None


class ProcessRunner:
    """Runs process lists over a batch of readings in a few Redis round trips.

    `file_last(feed_ids)` answers the last (t, value) of feeds from their files, for feeds
    Redis has no last value of (service.py passes one reading PHPFina; None: Redis only).
    """

    def __init__(
        self,
        buffer: FeedBuffer,
        timezone: str = DEFAULT_TIME_ZONE,
        file_last: FileLast | None = None,
    ) -> None:
        self.buffer = buffer
        self.redis = buffer.redis
        self._read_states = self.redis.register_script(_READ_STATES)
        self.clock = ps.DayClock(timezone)
        self.file_last = file_last

    def state_key(self, input_key: str) -> str:
        return f"{self.buffer.prefix}proc:{input_key}"

    def run(
        self,
        items: Iterable[InputItem],
        *,
        input_last: dict[int, float] | None = None,
        input_ids: dict[str, int] | None = None,
        mark: tuple[str, str] | None = None,
    ) -> RunReport:
        """`input_last`: sensor id -> last value, for the *_input steps; `input_ids`: the
        sensor id of each input key, so a reading in this batch updates what later ones see.
        `mark`: (Redis key, stream entry id): set with the batch's state and points in one
        transaction; if the key already holds this id or a later one, the batch is not run
        (`already_done`), so a redelivered request is never counted twice."""
        job = self._job(items, input_last, input_ids, mark)
        if mark is None and not job.state_keys:  # no state, nothing to race on
            loaded = self._load(self.redis, [], job.feeds) if job.feeds else None
            states, feed_last, _done = loaded or ({}, {}, [])
            report, _changed = self._run_batch(job.batch, states, feed_last, job.inputs)
            if report.logged:
                self.buffer.add(report.logged)
            report.points = len(report.logged)
            return report
        return self._run_atomically([job])[0]

    def run_many(self, calls: list[RunCall]) -> list[RunReport]:
        """Several batches, each with its mark, in ONE transaction: a drain's pass over many
        nodes (issue #29: one WATCH, one read and one EXEC for the pass, where each node cost
        its own three round trips). Each batch runs as run() runs it, in the order given, on
        the state the batches before it left; a batch whose mark is already there is not run
        (its report says `already_done`), the others are. The reports, in the calls' order."""
        if not calls:
            return []
        return self._run_atomically(
            [self._job(c.items, c.input_last, c.input_ids, c.mark) for c in calls]
        )

    def _job(
        self,
        items: Iterable[InputItem],
        input_last: dict[int, float] | None,
        input_ids: dict[str, int] | None,
        mark: tuple[str, str] | None,
    ) -> _Job:
        # Readings with their post (the ingest worker's) run in post order: the order the
        # posts were accepted, as emoncms runs them. Without one, time order (stable: a
        # post's readings stay together).
        batch = sorted(items, key=lambda item: item[4] if len(item) > 4 else item[2])
        return _Job(
            batch=batch,
            inputs=(dict(input_last or {}), input_ids or {}),
            state_keys=sorted(
                {
                    self.state_key(item[0])
                    for item in batch
                    if any(_is(s, STATEFUL) for s in item[1])
                }
            ),
            feeds=sorted({s["feed"] for item in batch for s in item[1] if _is(s, READS_FEED)}),
            mark=mark,
        )

    def _run_atomically(self, jobs: list[_Job]) -> list[RunReport]:
        """Read state, run, write state and points as one optimistic transaction.

        Two tasks for the same input may run at once (worker concurrency, a redelivered task
        beside a new one). WATCH makes the MULTI/EXEC of the second to finish fail if the
        first changed the state it read; it then runs again on the fresh state, where the
        points the first task already counted are replays. So each point is counted once
        and no update is lost, without a lock held across the Python work. A batch without
        stateful steps and without a mark never gets here and pays nothing.

        With a mark, its key is watched too: a second drain that processed the same entries
        first (one whose lease ran out) makes this one find the mark and stop. Several jobs
        (run_many) share the transaction: any watched key changed runs them all again.
        """
        state_keys = sorted({k for job in jobs for k in job.state_keys})
        feeds = sorted({f for job in jobs for f in job.feeds})
        marks = [job.mark for job in jobs if job.mark is not None]
        watched = [*state_keys, *(key for key, _entry in marks)]
        with self.redis.pipeline(transaction=True) as pipe:
            for _attempt in range(MAX_ATTEMPTS):
                try:
                    pipe.watch(*watched)
                    states, feed_last, done = self._load(pipe, state_keys, feeds, marks)
                    reports: list[RunReport] = []
                    logged: list[BufferedPoint] = []
                    changed: dict[str, dict[str, dict]] = {}
                    for job in jobs:
                        if job.mark is not None and done[job.mark]:
                            reports.append(RunReport(already_done=True))
                            continue
                        report, job_changed = self._run_batch(
                            job.batch, states, feed_last, job.inputs
                        )
                        for key, fields in job_changed.items():
                            changed.setdefault(key, {}).update(fields)
                        logged += report.logged
                        report.points = len(report.logged)
                        reports.append(report)
                    if all(r.already_done for r in reports):
                        pipe.reset()
                        return reports
                    pipe.multi()
                    self.buffer.add(logged, pipe)
                    for key, fields in changed.items():
                        pipe.hset(
                            self.state_key(key),
                            mapping={f: json.dumps(s) for f, s in fields.items()},
                        )
                    for job, report in zip(jobs, reports, strict=True):
                        if job.mark is not None and not report.already_done:
                            pipe.set(job.mark[0], job.mark[1], ex=MARK_TTL_S)
                    pipe.execute()
                    return reports
                except redis.WatchError:
                    pipe.reset()  # another task changed the state first: run again on it
        raise redis.WatchError(
            f"process state of {len(watched)} key(s) changed under {MAX_ATTEMPTS} attempts"
        )

    def _load(
        self,
        client,
        state_keys: list[str],
        feeds: list[int],
        marks: list[tuple[str, str]] | None = None,
    ) -> tuple[dict, dict, dict[tuple[str, str], bool]]:
        """(input_key -> field -> state, feed -> (t, value), mark -> done) in one round trip
        on `client`; feeds Redis has no last value of are read from their files. A mark (key,
        entry id) is done when its key holds that entry or a later one (the batch ran before)."""
        marks = marks or []
        keys = [*state_keys, self.buffer.last_key, *(key for key, _entry in marks)]
        raw = self._read_states(keys=keys, args=[len(state_keys), *feeds], client=client)
        found = raw[len(state_keys) + 1 :]
        done = {
            mark: i < len(found)
            and found[i] is not None
            and stream_id(found[i]) >= stream_id(mark[1])
            for i, mark in enumerate(marks)
        }
        prefix = self.state_key("")
        states = {
            key.removeprefix(prefix): {
                f.decode(): json.loads(v) for f, v in zip(flat[::2], flat[1::2], strict=True)
            }
            for key, flat in zip(state_keys, raw, strict=False)
        }
        feed_last = {}
        for feed, cur in zip(feeds, raw[len(state_keys)], strict=True):
            if cur:
                t, v = cur.split(b" ", 1)
                feed_last[feed] = (int(t), float(v))
        missing = [f for f in feeds if f not in feed_last]
        if missing and self.file_last is not None:
            feed_last.update(self.file_last(missing))
        return states, feed_last, done

    def _run_batch(self, batch, states, feed_last, inputs) -> tuple[RunReport, dict]:
        """Run one job's posts. `feed_last` is moved on by what they logged (Batch.log's rule),
        so a next job of the same transaction sees these points as it would read them from
        Redis."""
        input_last, input_ids = inputs
        b = ps.Batch(self.clock, feed_last=dict(feed_last), input_last=dict(input_last))
        report = RunReport()
        changed: dict[str, dict[str, dict]] = {}
        for post in _posts(batch):
            # emoncms's process_node: every input of the post takes its value first, then the
            # process lists run, so a step reading another input sees this post's value.
            readings = []
            for item in post:
                input_key, steps, t, value = item[:4]
                try:
                    value = float(value)
                except (TypeError, ValueError):
                    value = math.nan
                if not math.isfinite(value):
                    report.skipped_bad_values += 1
                    continue
                sensor_id = input_ids.get(input_key)
                if sensor_id is not None:
                    b.input_last[sensor_id] = value
                readings.append((input_key, steps, int(t), value))
            for input_key, steps, t, value in readings:
                self._run_one(b, input_key, steps, t, value, states, changed, report)
        report.logged = b.logged
        feed_last.update(b.feed_last)
        report.published = b.published
        report.skipped_bad_values += b.skipped_bad_values
        return report, changed

    def _run_one(self, b: ps.Batch, input_key, steps, t, value, states, changed, report) -> None:
        """One reading through its list, with emoncms's skip and goto (process_model input())."""
        initial: float | None = value
        current: float | None = value
        late = False
        duplicate = False  # a step had counted it already (a resent row)
        lates: list[Late] = []
        all_moved_back = True  # every late step of this reading moved its clock back
        index, executed, limit = 0, 0, MAX_PASSES * len(steps)
        while index < len(steps):
            executed += 1
            if executed > limit:
                report.loops += 1
                log.warning("input %s: process list loops (goto); reading stopped", input_key)
                break
            step = steps[index]
            name = step.get("process") if isinstance(step, dict) else None
            if name not in KNOWN:
                report.invalid_steps += 1
                log.warning("input %s: step %d is not a known process: %r", input_key, index, step)
                break
            next_index = index + 1
            if name in CONTROL_FLOW:
                if name == "goto_process":
                    # emoncms: proc_goto = max(arg - 2, 0), then the loop's ++: position arg
                    # (1-based), except that goto 1 lands on position 2 as emoncms's does.
                    next_index = max(int(step["arg"]) - 2, 0) + 1
                elif name == "error_found":
                    break
                elif name == "reset2original":
                    current = initial
                elif ps.CONDITIONS[name](current, step):
                    next_index += 1  # skip the next step
            elif name in STATEFUL:
                if current is not None:
                    fld = state_field(index, step)
                    state = states.setdefault(input_key, {}).get(fld)
                    if state is not None and t in state.get("seen", ()):
                        # A reading this step counted already: a gateway resending rows it
                        # got no `ok` for comes as a new stream entry, so the mark does not
                        # catch it. emoncms would move its clock back and count them again;
                        # the value passes on and nothing changes.
                        new_state, emits = None, []
                        duplicate = True
                    elif state is not None and t <= state["t"]:
                        # At or before the last reading it processed: emoncms's elapsed <= 0.
                        current, new_state, emits, dropped = ps.LATE[name](
                            b, step, state, t, current
                        )
                        moved_back = new_state is not None and "t" in new_state
                        if new_state is not None:
                            new_state.setdefault("t", state["t"])  # else the clock stays
                        if dropped:
                            late = True
                            all_moved_back = all_moved_back and moved_back
                            lates.append(Late(input_key, name, t, state["t"], moved_back))
                    else:
                        result = ps.STATEFUL[name](b, step, state, t, current)
                        if result is None:
                            current, new_state, emits = None, None, []  # nothing to count
                        else:
                            current, new_state, emits = result
                            new_state["t"] = t
                    if new_state is not None and name in ps.CLOCK_BACK and new_state["t"] == t:
                        # The latest SEEN times (not the last processed): a row the clock
                        # moved back to never pushes out the newer rows a resend repeats.
                        seen = state.get("seen", []) if state is not None else []
                        new_state["seen"] = sorted({*seen, t})[-ps.SEEN :]
                    if new_state is not None:
                        states[input_key][fld] = new_state
                        changed.setdefault(input_key, {})[fld] = new_state
                    for et, ev, join in emits:
                        b.log(step["feed"], et, ev, join)
            else:
                current = ps.STATELESS[name](b, step, t, current)
            if current is not None and not math.isfinite(current):
                report.skipped_bad_values += 1
                log.warning("input %s: step %d made the value non-finite", input_key, index)
                break
            index = next_index
        # Each reading counted once, in one word for staff. A duplicate first: a step that
        # remembers its times saw this one already, so it is a resent row, and the late skips
        # of steps that remember only their last time (a counter's) are the resend's doing, not
        # a clock that jumped: the row was counted when it first came.
        if duplicate:
            report.duplicates += 1
        elif late:
            report.replayed += 1
            report.processed_late += all_moved_back
            report.late.extend(lates[: max(0, SHOWN_LATE - len(report.late))])


def _posts(batch: list) -> Iterable[list]:
    """Consecutive items of one post: the same t and post id (the fifth item, if any)."""
    post: list = []
    key = None
    for item in batch:
        item_key = (item[2], item[4] if len(item) > 4 else None)
        if post and item_key != key:
            yield post
            post = []
        key = item_key
        post.append(item)
    if post:
        yield post


def _is(step: object, names: frozenset[str]) -> bool:
    return isinstance(step, dict) and step.get("process") in names
