"""Switch-over continuity: emoncms's last reading of each input carried over to here.

emoncms keeps every input's last time and value (the `input` table's `time`/`value`, and its
Redis), and its counter processes remember the last value they saw (`process:kwhaccumulator:
<feed>`, `process:kwhtokwhd:<feed>`, ...). Without that memory, the first reading here only
primes `kwh_accumulator`, `wh_accumulator` and `kwh_to_kwhd`, and the energy a meter counted
between emoncms's last reading and our first is lost (issue #26 item 6). So the import seeds,
for each input it brings, the state each counting step would have had after emoncms's last
reading (value X at time T), and the input's last value:

- `wh_accumulator` / `kwh_accumulator`: the counter was X at T, the total is the feed's last
  value: the next reading Y adds Y - X (emoncms's kwh_accumulator, with its 60 kW spike bound);
- `kwh_to_kwhd`: the meter read X at T, today's total is the daily feed's value if it is T's
  day: Y adds Y - X to it;
- `power_to_kwh` (and `power_to_kwhd`): the total is the feed's, counted up to T: Y watts count
  for the time since T, as a running emoncms would (its feed time is the last post's);
- `pulse_diff`, `ratechange`, `kwh_to_power`: the count or value X.

The value a step saw is X taken through the steps before it (scale, offset, log_to_feed...).
A step after a condition, a goto, an input or feed reference or another stateful step is left
to its own start (as without an import): which value it saw cannot be known from X alone.
Existing state is never overwritten (HSETNX): a reading already processed here wins. An
input whose time is older than a feed its step counts into is stale (emoncms with Redis writes
an input's last value to MySQL only while Redis is off, so a backup's may be old; `--url`
reads the live ones): that step is left to its own start rather than count twice.
"""

from __future__ import annotations

import json
import math

from feeds.processes import steps as ps
from feeds.processes.catalog import CONTROL_FLOW, STATEFUL
from feeds.processes.run import ProcessRunner, state_field
from feeds.store.buffer import FeedBuffer
from sensors.ingest import node_state

# Stateless steps whose result depends on X alone (not on another input's or feed's value).
PURE = frozenset({
    "log_to_feed", "log_to_feed_join", "scale", "offset", "allowpositive", "allownegative",
    "max_value_allowed", "min_value_allowed", "abs_value", "signed2unsigned",
})  # fmt: skip
# The steps that count from the last value they saw: these lose energy without a seed. (Others,
# such as max_value or accumulator, start from their feed's value as well as emoncms does.)
SEEDABLE = frozenset({
    "wh_accumulator", "kwh_accumulator", "kwh_to_kwhd", "power_to_kwh", "power_to_kwhd",
    "pulse_diff", "ratechange", "kwh_to_power",
})  # fmt: skip
# How far into one list the value is followed (the catalog's bound on a list's length).
MAX_STEPS = 64


def _today(clock: ps.DayClock, last: tuple[int, float] | None, day: int) -> float:
    """A daily feed's value when its last point is `day`'s, else 0 (a new day)."""
    if last is not None and clock.day_of_written(last[0]) == day:
        return last[1]
    return 0.0


def _seedable(steps: list[dict]) -> list[str]:
    return [s.get("process", "?") for s in steps if s.get("process") in SEEDABLE]


def seed_states(
    steps: list[dict],
    t: int,
    value: float,
    feed_last: dict[int, tuple[int, float]],
    clock: ps.DayClock,
) -> tuple[dict[str, dict], list[str]]:
    """(state field -> state after emoncms's last reading (X=value at t), the SEEDABLE steps
    left to their own start, by name). Pure: no Redis."""
    states: dict[str, dict] = {}
    left: list[str] = []
    current: float | None = value
    scratch = ps.Batch(clock, feed_last=dict(feed_last))  # log steps write here, then dropped
    for index, step in enumerate(steps[:MAX_STEPS]):
        name = step.get("process")
        if current is None or name in CONTROL_FLOW:
            left += _seedable(steps[index:])
            break
        if name in PURE:
            current = ps.STATELESS[name](scratch, step, t, current)
            continue
        if name not in STATEFUL:  # reads another input or feed: unknown at T
            left += _seedable(steps[index:])
            break
        last = feed_last.get(step.get("feed")) if step.get("feed") is not None else None
        if last is not None and last[0] > t:
            # The feed moved on after the input's time: the dump's input value is stale (an
            # emoncms with Redis writes it to MySQL only when Redis is off). Counting from it
            # would count again what the feed already holds.
            left += _seedable(steps[index:])
            break
        state: dict | None = None
        passed: float | None = None  # the value passed on; None: not known, stop
        if name in ("wh_accumulator", "kwh_accumulator") and last is not None:
            state = {"input": current, "total": last[1]}
            passed = last[1]
        elif name == "kwh_to_kwhd":
            day, _start = clock.day(t)
            state = {"kwh": current, "day": day, "total": _today(clock, last, day)}
            passed = current
        elif name == "power_to_kwh" and last is not None:
            state = {"kwh": last[1]}
            passed = current
        elif name == "power_to_kwhd":
            day, _start = clock.day(t)
            state = {"kwh": _today(clock, last, day), "day": day}
            passed = current
        elif name == "pulse_diff":
            count = current + 4294967296 if current < 0 else current  # signed2unsigned
            if count > 0:
                state = {"count": count}
        elif name in ("ratechange", "kwh_to_power"):
            state = {"input": current}
        if state is not None:
            state["t"] = t
            states[state_field(index, step)] = state
        elif name in SEEDABLE:
            left.append(name)
        if passed is None:
            left += _seedable(steps[index + 1 :])
            break
        current = passed
    return states, left


def carry_over(
    buffer: FeedBuffer,
    timezone: str,
    node_id: int,
    key: str,
    steps: list[dict],
    t: int,
    value: float,
) -> list[str]:
    """Seed input `node_id:key` with emoncms's last reading: its last value (what the inputs
    page and the *_input steps read) and its counting steps' state. Returns the stateful
    steps left to their own start, for the report."""
    if not (0 < t <= 0xFFFFFFFF and math.isfinite(value)):
        return []
    runner = ProcessRunner(buffer, timezone)
    feeds = sorted({int(s["feed"]) for s in steps if s.get("feed") is not None})
    feed_last = buffer.last_values(feeds) if feeds else {}
    states, left = seed_states(steps, t, value, feed_last, runner.clock)
    pipe = buffer.redis.pipeline(transaction=False)
    pipe.hsetnx(node_state.last_key(node_id), key, f"{t} {value!r}")
    state_key = runner.state_key(f"{node_id}:{key}")
    for fld, state in states.items():
        pipe.hsetnx(state_key, fld, json.dumps(state))
    pipe.execute()
    return left
