"""Input processes: emoncms's process list, by the same names and with the same meanings.

A sensor's `processes` is a JSON list of steps run in order on each reading, each taking the
value left by the one before:

    {"process": "log_to_feed", "feed": 7}        log the value (log_to_feed_join: join gaps)
    {"process": "scale", "arg": 2.0}             value * arg
    {"process": "offset", "arg": -1.5}           value + arg
    {"process": "allowpositive"}                 negative -> 0
    {"process": "power_to_kwh", "feed": 8}       W -> cumulative kWh (no increment over gaps > 2 h)
    {"process": "kwh_to_kwhd", "feed": 9}        cumulative kWh -> kWh so far today
    {"process": "wh_accumulator", "feed": 10}    Wh counter with resets -> continuous Wh total
    {"process": "pulse_diff", "feed": 11}        pulse count -> pulses since the last reading
    {"process": "ratechange", "feed": 12}        value - previous value
    {"process": "max_value" | "min_value", "feed": 13}   daily maximum / minimum

Accumulating processes keep state per (input, step) in Redis and ignore a point whose time is
not after the last one they processed: a redelivered Celery task cannot count twice. Such a
replayed point also stops there (later steps already ran for it the first time).

Daily processes (kwh_to_kwhd, max_value, min_value) write each local day's figure at local
noon of that day: PHPFina aligns slots to UTC, so noon lands in the right UTC day for any
zone within 12 h of UTC (local midnight in summer time would fall in the previous UTC day).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, time
from zoneinfo import ZoneInfo

import redis

from feeds.buffer import BufferedPoint, FeedBuffer

log = logging.getLogger(__name__)

InputItem = tuple[str, list[dict], int, float]

MAX_KWH_GAP_S = 7200  # power_to_kwh: a longer silence adds nothing (emoncms)
WH_MAX_POWER_W = 60_000  # wh_accumulator: a jump implying more than this is a spike (emoncms)

SIMPLE = {"scale", "offset", "allowpositive"}
LOGGING = {"log_to_feed", "log_to_feed_join"}
ACCUMULATING = {
    "power_to_kwh",
    "kwh_to_kwhd",
    "wh_accumulator",
    "pulse_diff",
    "ratechange",
    "max_value",
    "min_value",
}
NEEDS_FEED = LOGGING | ACCUMULATING
NEEDS_ARG = {"scale", "offset"}
KNOWN = SIMPLE | LOGGING | ACCUMULATING


def validate_steps(steps: object) -> list[str]:
    """Error messages naming the step index; empty when the list is usable."""
    if not isinstance(steps, list):
        return ["processes must be a list of steps"]
    errors = []
    for i, step in enumerate(steps):
        if not isinstance(step, dict):
            errors.append(f"step {i}: must be an object like {{'process': 'log_to_feed'}}")
            continue
        name = step.get("process")
        if name not in KNOWN:
            errors.append(f"step {i}: unknown process {name!r}; known: {', '.join(sorted(KNOWN))}")
            continue
        allowed = {"process"} | ({"feed"} if name in NEEDS_FEED else set())
        allowed |= {"arg"} if name in NEEDS_ARG else set()
        extra = sorted(set(step) - allowed)
        if extra:
            errors.append(f"step {i} ({name}): unexpected field {extra[0]!r}")
        if name in NEEDS_FEED:
            feed = step.get("feed")
            if isinstance(feed, bool) or not isinstance(feed, int) or feed < 1:
                errors.append(f"step {i} ({name}): 'feed' must be a feed id (positive integer)")
        if name in NEEDS_ARG:
            arg = step.get("arg")
            if isinstance(arg, bool) or not isinstance(arg, int | float) or not math.isfinite(arg):
                errors.append(f"step {i} ({name}): 'arg' must be a finite number")
    return errors


def state_field(index: int, step: dict) -> str:
    # The process name and feed are part of the field, so editing a step list never hands one
    # process another's state.
    return f"{index}:{step['process']}:{step.get('feed', '')}"


@dataclass
class RunReport:
    points: int = 0
    skipped_bad_values: int = 0
    replayed: int = 0
    invalid_steps: int = 0
    logged: list[BufferedPoint] = field(default_factory=list)


# Every state hash (KEYS but the last) and the last value of the feeds in ARGV (from the hash
# KEYS[-1]), in one round trip on the WATCHing connection.
_READ_STATES = """
local out = {}
for i = 1, #KEYS - 1 do out[i] = redis.call('HGETALL', KEYS[i]) end
if #ARGV > 0 then
  out[#KEYS] = redis.call('HMGET', KEYS[#KEYS], unpack(ARGV))
else
  out[#KEYS] = {}
end
return out
"""

# A batch whose state keeps changing under it this often is in a storm of parallel tasks for
# the same input; the error (a RedisError) makes Celery retry the task later.
MAX_ATTEMPTS = 100


class ProcessRunner:
    """Runs process lists over a batch of readings in a few Redis round trips."""

    def __init__(self, buffer: FeedBuffer, timezone: str = "Europe/London") -> None:
        self.buffer = buffer
        self.redis = buffer.redis
        self._read_states = self.redis.register_script(_READ_STATES)
        self.tz = ZoneInfo(timezone)
        self._noon_cache: dict[int, tuple[int, int]] = {}

    def state_key(self, input_key: str) -> str:
        return f"{self.buffer.prefix}proc:{input_key}"

    def run(self, items: Iterable[InputItem]) -> RunReport:
        # Time order within the batch, so accumulators see readings as they happened.
        batch = sorted(items, key=lambda item: item[2])
        state_keys = sorted(
            {self.state_key(k) for k, steps, _t, _v in batch if any(_is_acc(s) for s in steps)}
        )
        if not state_keys:  # plain logging: no state, nothing to race on
            report = RunReport()
            for input_key, steps, t, value in batch:
                self._run_one(input_key, steps, int(t), value, {}, {}, {}, report)
            if report.logged:
                self.buffer.add(report.logged)
            report.points = len(report.logged)
            return report
        return self._run_atomically(batch, state_keys)

    def _run_atomically(self, batch: list, state_keys: list[str]) -> RunReport:
        """Read state, run, write state and points as one optimistic transaction.

        Two tasks for the same input may run at once (worker concurrency, a redelivered task
        beside a new one). WATCH makes the MULTI/EXEC of the second to finish fail if the
        first changed the state it read; it then runs again on the fresh state, where the
        points the first task already counted are replays. So each point is counted once
        and no update is lost, without a lock held across the Python work. A batch without
        accumulating steps never gets here and pays nothing.
        """
        init_feeds = sorted(
            {
                s["feed"]
                for _k, steps, _t, _v in batch
                for s in steps
                if _is_acc(s) and s["process"] in ("power_to_kwh", "wh_accumulator")
            }
        )
        with self.redis.pipeline(transaction=True) as pipe:
            for _attempt in range(MAX_ATTEMPTS):
                try:
                    pipe.watch(*state_keys)
                    states, feed_last = self._load(pipe, state_keys, init_feeds)
                    report = RunReport()
                    changed: dict[str, dict[str, dict]] = {}
                    for input_key, steps, t, value in batch:
                        self._run_one(
                            input_key, steps, int(t), value, states, changed, feed_last, report
                        )
                    pipe.multi()
                    self.buffer.add(report.logged, pipe)
                    for key, fields in changed.items():
                        pipe.hset(
                            self.state_key(key),
                            mapping={f: json.dumps(s) for f, s in fields.items()},
                        )
                    pipe.execute()
                    report.points = len(report.logged)
                    return report
                except redis.WatchError:
                    pipe.reset()  # another task changed the state first: run again on it
        raise redis.WatchError(
            f"process state of {len(state_keys)} input(s) changed under {MAX_ATTEMPTS} attempts"
        )

    def _load(self, pipe, state_keys: list[str], init_feeds: list[int]) -> tuple[dict, dict]:
        """(input_key -> field -> state, feed -> (t, value)) in one round trip on `pipe`."""
        raw = self._read_states(
            keys=[*state_keys, self.buffer.last_key], args=init_feeds, client=pipe
        )
        prefix = self.state_key("")
        states = {
            key.removeprefix(prefix): {
                f.decode(): json.loads(v) for f, v in zip(flat[::2], flat[1::2], strict=True)
            }
            for key, flat in zip(state_keys, raw[:-1], strict=True)
        }
        feed_last = {}
        for feed, cur in zip(init_feeds, raw[-1], strict=True):
            if cur:
                t, v = cur.split(b" ", 1)
                feed_last[feed] = (int(t), float(v))
        return states, feed_last

    def _run_one(self, input_key, steps, t, value, states, changed, feed_last, report) -> None:
        try:
            value = float(value)
        except (TypeError, ValueError):
            value = math.nan
        if not math.isfinite(value):
            report.skipped_bad_values += 1
            return
        for index, step in enumerate(steps):
            name = step.get("process") if isinstance(step, dict) else None
            if name not in KNOWN:
                report.invalid_steps += 1
                log.warning("input %s: step %d is not a known process: %r", input_key, index, step)
                return
            if name in ACCUMULATING:
                fld = state_field(index, step)
                state = states.setdefault(input_key, {}).get(fld)
                if state is not None and t <= state["t"]:
                    report.replayed += 1
                    return  # seen already: this and the later steps ran the first time
                handler = _ACCUMULATORS[name]
                value, new_state, emits = handler(self, step, state, t, value, feed_last)
                new_state["t"] = t
                states[input_key][fld] = new_state
                changed.setdefault(input_key, {})[fld] = new_state
                for et, ev, join in emits:
                    self._log(report, step["feed"], et, ev, join)
            elif name in LOGGING:
                self._log(report, step["feed"], t, value, name == "log_to_feed_join")
            elif name == "scale":
                value *= float(step["arg"])
            elif name == "offset":
                value += float(step["arg"])
            elif name == "allowpositive":
                value = max(value, 0.0)
            if not math.isfinite(value):
                report.skipped_bad_values += 1
                log.warning("input %s: step %d made the value non-finite", input_key, index)
                return

    def _log(self, report: RunReport, feed: int, t: int, value: float, join: bool) -> None:
        if math.isfinite(value) and abs(value) < 3.4e38:  # representable in float32
            report.logged.append((int(feed), int(t), float(value), join))
        else:
            report.skipped_bad_values += 1

    def local_day(self, t: int) -> tuple[int, int]:
        """(local date ordinal, unix time of that date's local noon)."""
        day = datetime.fromtimestamp(t, self.tz).date().toordinal()
        cached = self._noon_cache.get(day)
        if cached is None:
            noon = datetime.combine(datetime.fromordinal(day).date(), time(12), self.tz)
            cached = self._noon_cache[day] = (day, int(noon.timestamp()))
        return cached


def _is_acc(step: object) -> bool:
    return isinstance(step, dict) and step.get("process") in ACCUMULATING


Emits = list[tuple[int, float, bool]]
Handler = Callable[..., tuple[float, dict, Emits]]


def _power_to_kwh(runner, step, state, t, watts, feed_last):
    if state is None:
        last = feed_last.get(step["feed"])
        kwh = last[1] if last else 0.0  # carry on from what the feed already holds
    else:
        kwh = state["kwh"]
        elapsed = t - state["t"]
        if 0 < elapsed <= MAX_KWH_GAP_S:
            kwh += watts * elapsed / 3_600_000.0
    return watts, {"kwh": kwh}, [(t, kwh, True)]


def _kwh_to_kwhd(runner, step, state, t, kwh, _feed_last):
    day, noon = runner.local_day(t)
    if state is None:
        return kwh, {"kwh": kwh, "day": day, "total": 0.0}, []
    increase = kwh - state["kwh"]
    if increase < 0:  # a cumulative kWh never falls: treat as an error, hold the last
        increase, kwh = 0.0, state["kwh"]
    total = state["total"] + increase if state["day"] == day else increase
    return kwh, {"kwh": kwh, "day": day, "total": total}, [(noon, total, False)]


def _wh_accumulator(runner, step, state, t, wh, feed_last):
    if state is None:
        last = feed_last.get(step["feed"])
        return wh, {"input": wh, "total": last[1] if last else 0.0}, []
    total = state["total"]
    diff = wh - state["input"]
    elapsed = t - state["t"]
    # A fall is a counter reset (count from the new value next time); a rise implying more
    # than WH_MAX_POWER_W is a spike: both add nothing.
    if diff > 0 and diff * 3600 / elapsed < WH_MAX_POWER_W:
        total += diff
    return total, {"input": wh, "total": total}, [(t, total, True)]


def _pulse_diff(runner, step, state, t, pulses, _feed_last):
    if state is None:
        diff = 0.0
    elif pulses >= state["input"]:
        diff = pulses - state["input"]
    else:
        diff = pulses  # the counter restarted (node reboot): count from zero
    return diff, {"input": pulses}, [(t, diff, False)]


def _ratechange(runner, step, state, t, value, _feed_last):
    if state is None:
        return 0.0, {"input": value}, []
    change = value - state["input"]
    return change, {"input": value}, [(t, change, False)]


def _daily_extreme(pick: Callable[[float, float], float]) -> Handler:
    def handler(runner, step, state, t, value, _feed_last):
        day, noon = runner.local_day(t)
        best = value if state is None or state["day"] != day else pick(state["best"], value)
        return value, {"day": day, "best": best}, [(noon, best, False)]

    return handler


_ACCUMULATORS: dict[str, Handler] = {
    "power_to_kwh": _power_to_kwh,
    "kwh_to_kwhd": _kwh_to_kwhd,
    "wh_accumulator": _wh_accumulator,
    "pulse_diff": _pulse_diff,
    "ratechange": _ratechange,
    "max_value": _daily_extreme(max),
    "min_value": _daily_extreme(min),
}
