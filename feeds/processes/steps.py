"""What each input process does to a value: emoncms's process_processlist.php, function by
function, in Python. The runner (feeds/processes/run.py) calls these; no Redis or Django here.

A value is a float or None (emoncms's null: reset2null, a division by zero, an input or feed
with no value yet). Stateless steps take (batch, step, t, value) and return the new value.
Stateful steps take (batch, step, state, t, value) with value never None (a null passes them
untouched, as emoncms's power_to_kwh, accumulator... return null for null) and return
(value passed on, new state, points to log as (t, value, join)).

Where emoncms reads the feed's last value (feed->get_timevalue) to carry a total on, we keep
the total in the step's state (so a replayed reading is recognised and not counted twice) and
fall back to the feed's last value (Redis, else the file) when the state is missing.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime, time
from zoneinfo import ZoneInfo

from feeds.store.buffer import BufferedPoint

MAX_KWH_GAP_S = 7200  # power_to_kwh(d): a longer silence adds nothing (emoncms: < 7200)
MAX_POWER_W = 60_000  # wh/kwh_accumulator: a jump implying more is a spike (emoncms)

Emits = list[tuple[int, float, bool]]


class DayClock:
    """emoncms's getstartday and get_time_slot in one time zone, cached per day."""

    def __init__(self, timezone: str) -> None:
        self.tz = ZoneInfo(timezone)
        self._starts: dict[int, int] = {}

    def start_of(self, day: int) -> int:
        start = self._starts.get(day)
        if start is None:
            # Local 00:00 (a midnight skipped by a DST change maps to the first instant of
            # the day, as PHP's setTime(0, 0) does).
            start = int(datetime.combine(date.fromordinal(day), time(0), self.tz).timestamp())
            self._starts[day] = start
        return start

    def day(self, t: int) -> tuple[int, int]:
        """(local date ordinal, unix time of its local midnight: emoncms getstartday)."""
        day = datetime.fromtimestamp(t, self.tz).date().toordinal()
        return day, self.start_of(day)

    def day_of_written(self, t: int) -> int:
        """The local day a daily point at `t` stands for: `t` is a day's local midnight, or
        the UTC-aligned slot a 86400 s feed floored it to (the one slot holding it)."""
        day, start = self.day(t)
        return day if start == t else day + 1

    def slot(self, t: int, minutes: int) -> tuple[int, int]:
        """(start, end) of the `minutes` slot counted from local midnight (get_time_slot)."""
        _day, start_of_day = self.day(t)
        width = minutes * 60
        index = (t - start_of_day) // width
        return start_of_day + index * width, start_of_day + (index + 1) * width


@dataclass
class Batch:
    """What steps may consult while a batch runs; feed_last follows the points logged."""

    clock: DayClock
    feed_last: dict[int, tuple[int, float]] = field(default_factory=dict)
    input_last: dict[int, float] = field(default_factory=dict)
    published: list[tuple[str, int, float | None]] = field(default_factory=list)
    logged: list[BufferedPoint] = field(default_factory=list)
    skipped_bad_values: int = 0

    def log(self, feed: int, t: int, value: float | None, join: bool = False) -> None:
        # A null is not written (emoncms's floatval(null) would write 0: a gap is truer).
        if value is None:
            return
        if math.isfinite(value) and abs(value) < 3.4e38:  # representable in float32
            self.logged.append((int(feed), int(t), float(value), join))
            last = self.feed_last.get(int(feed))
            if last is None or t >= last[0]:
                self.feed_last[int(feed)] = (int(t), float(value))
        else:
            self.skipped_bad_values += 1

    def feed_value(self, feed: int) -> float | None:
        last = self.feed_last.get(int(feed))
        return None if last is None else last[1]


# --- stateless ------------------------------------------------------------------------------


def _arg(step: dict) -> float:
    return float(step["arg"])


def _signed2unsigned(value: float | None) -> float | None:
    return value + 65536 if value is not None and value < 0 else value


def _with_input(op: Callable[[float, float], float | None]):
    def run(b: Batch, step: dict, t: int, value: float | None) -> float | None:
        other = b.input_last.get(int(step["input"]))
        if value is None or other is None:
            return None
        return op(value, other)

    return run


def _with_feed(op: Callable[[float, float], float | None]):
    def run(b: Batch, step: dict, t: int, value: float | None) -> float | None:
        other = b.feed_value(step["feed"])
        if value is None or other is None:
            return None
        return op(value, other)

    return run


def _limit_by_input(pick):
    def run(b: Batch, step: dict, t: int, value: float | None) -> float | None:
        limit = b.input_last.get(int(step["input"]))
        if value is None or limit is None:
            return value  # nothing to compare with: the value passes
        return pick(value, limit)

    return run


def _limit_by_feed(pick):
    def run(b: Batch, step: dict, t: int, value: float | None) -> float | None:
        # emoncms: $timevalue['value'] * 1, so a feed with no value limits at 0.
        limit = b.feed_value(step["feed"]) or 0.0
        return value if value is None else pick(value, limit)

    return run


def _log(join: bool):
    def run(b: Batch, step: dict, t: int, value: float | None) -> float | None:
        b.log(step["feed"], t, value, join)
        return value

    return run


def _update_feed_data(b: Batch, step: dict, t: int, value: float | None) -> float | None:
    b.log(step["feed"], b.clock.day(t)[1], value)
    return value


def _publish(b: Batch, step: dict, t: int, value: float | None) -> float | None:
    b.published.append((step["topic"], t, value))
    return value


def _none_or(fn):
    return lambda b, s, t, v: None if v is None else fn(v, s)


def _div(a: float, b: float) -> float | None:
    return a / b if b != 0 else None


def _reciprocal(b: Batch, step: dict, t: int, value: float | None) -> float | None:
    last = b.feed_value(step["feed"])
    # emoncms tests `$value == null || $last == null`: PHP's loose == makes 0 null too.
    if not value or not last:
        return None
    return 1 / last


STATELESS: dict[str, Callable[[Batch, dict, int, float | None], float | None]] = {
    "log_to_feed": _log(False),
    "log_to_feed_join": _log(True),
    "scale": _none_or(lambda v, s: v * _arg(s)),
    "offset": _none_or(lambda v, s: v + _arg(s)),
    "allowpositive": _none_or(lambda v, s: max(v, 0.0)),
    "allownegative": _none_or(lambda v, s: min(v, 0.0)),
    "max_value_allowed": _none_or(lambda v, s: min(v, _arg(s))),
    "min_value_allowed": _none_or(lambda v, s: max(v, _arg(s))),
    "abs_value": _none_or(lambda v, s: abs(v)),
    "signed2unsigned": lambda b, s, t, v: _signed2unsigned(v),
    "reset2zero": lambda b, s, t, v: 0.0,
    "reset2null": lambda b, s, t, v: None,
    "times_input": _with_input(lambda v, o: v * o),
    "add_input": _with_input(lambda v, o: v + o),
    "subtract_input": _with_input(lambda v, o: v - o),
    # emoncms divides only by a positive input ($last_value > 0), else null.
    "divide_input": _with_input(lambda v, o: v / o if o > 0 else None),
    "max_input": _limit_by_input(min),
    "min_input": _limit_by_input(max),
    "add_feed": _with_feed(lambda v, o: o + v),
    "sub_feed": _with_feed(lambda v, o: v - o),
    "multiply_by_feed": _with_feed(lambda v, o: v * o),
    "divide_by_feed": _with_feed(_div),
    "max_feed": _limit_by_feed(min),
    "min_feed": _limit_by_feed(max),
    "source_feed_data_time": lambda b, s, t, v: b.feed_value(s["feed"]),
    "add_source_feed": _with_feed(lambda v, o: o + v),
    "sub_source_feed": _with_feed(lambda v, o: v - o),
    "multiply_by_source_feed": _with_feed(lambda v, o: o * v),
    "divide_by_source_feed": _with_feed(_div),
    "reciprocal_by_source_feed": _reciprocal,
    "update_feed_data": _update_feed_data,
    "publish_to_mqtt": _publish,
}


# --- conditionals (emoncms's if_*_skip: true -> skip the next step) ---------------------------


def _is_zero(v: float | None) -> bool:
    return v is None or v == 0  # PHP: null == 0 is true


CONDITIONS: dict[str, Callable[[float | None, dict], bool]] = {
    "if_zero_skip": lambda v, s: _is_zero(v),
    "if_not_zero_skip": lambda v, s: not _is_zero(v),
    "if_null_skip": lambda v, s: v is None,
    "if_not_null_skip": lambda v, s: v is not None,
    # A null compared with a number: never greater or smaller here (PHP's bool juggling
    # would make null < 5 true; a missing value should not pass a threshold test).
    "if_gt_skip": lambda v, s: v is not None and v > _arg(s),
    "if_gt_equal_skip": lambda v, s: v is not None and v >= _arg(s),
    "if_lt_skip": lambda v, s: v is not None and v < _arg(s),
    "if_lt_equal_skip": lambda v, s: v is not None and v <= _arg(s),
    "if_equal_skip": lambda v, s: (v if v is not None else 0.0) == _arg(s),
    "if_not_equal_skip": lambda v, s: (v if v is not None else 0.0) != _arg(s),
}


# --- stateful -------------------------------------------------------------------------------

StateResult = tuple[float | None, dict, Emits]


def _power_to_kwh(b: Batch, step, state, t, watts) -> StateResult:
    if state is None:
        # emoncms: continue from the feed's last value; the time since it counts if short.
        last = b.feed_last.get(step["feed"])
        kwh, since = (last[1], last[0]) if last else (0.0, t)
    else:
        kwh, since = state["kwh"], state["t"]
    elapsed = t - since
    if 0 < elapsed < MAX_KWH_GAP_S:
        kwh += watts * elapsed / 3_600_000.0
    return watts, {"kwh": kwh}, [(t, kwh, True)]


def _power_to_kwhd(b: Batch, step, state, t, watts) -> StateResult:
    day, start = b.clock.day(t)
    if state is None:
        last = b.feed_last.get(step["feed"])
        # The feed's last point is a day's slot, not the time of the last reading: count
        # from this reading on (emoncms would count the time since that slot if < 2 h).
        same_day = last is not None and b.clock.day_of_written(last[0]) == day
        return (
            watts,
            {"kwh": last[1] if same_day else 0.0, "day": day},
            [(start, last[1] if same_day else 0.0, False)],
        )
    elapsed = t - state["t"]
    inc = watts * elapsed / 3_600_000.0 if 0 < elapsed < MAX_KWH_GAP_S else 0.0
    kwh = state["kwh"] + inc if state["day"] == day else inc
    return watts, {"kwh": kwh, "day": day}, [(start, kwh, False)]


def _today_from_feed(b: Batch, feed: int, day: int) -> float | None:
    last = b.feed_last.get(feed)
    if last is not None and b.clock.day_of_written(last[0]) == day:
        return last[1]
    return None


def _kwh_to_kwhd(b: Batch, step, state, t, kwh) -> StateResult:
    day, start = b.clock.day(t)
    if state is None:
        # emoncms primes its kWh memory and writes nothing; today's total so far is the
        # feed's value when it is today's.
        total = _today_from_feed(b, step["feed"], day) or 0.0
        return kwh, {"kwh": kwh, "day": day, "total": total}, []
    increase = kwh - state["kwh"]
    if increase < 0:  # a cumulative kWh never falls: an error, hold the last
        increase, kwh = 0.0, state["kwh"]
    total = state["total"] + increase if state["day"] == day else increase
    return kwh, {"kwh": kwh, "day": day, "total": total}, [(start, total, False)]


def _input_ontime(b: Batch, step, state, t, value) -> StateResult:
    day, start = b.clock.day(t)
    if state is None:
        ontime = _today_from_feed(b, step["feed"], day) or 0.0
        return value, {"ontime": ontime, "day": day}, [(start, ontime, False)]
    elapsed = 0
    ontime = state["ontime"]
    if value > 0 and t - state["t"] < MAX_KWH_GAP_S:
        elapsed = t - state["t"]
        ontime += elapsed
    if state["day"] != day:
        ontime = elapsed  # emoncms: the new day starts with the whole last interval
    return value, {"ontime": ontime, "day": day}, [(start, ontime, False)]


def _whinc_to_kwhd(b: Batch, step, state, t, wh) -> StateResult:
    day, start = b.clock.day(t)
    if state is None:
        base = _today_from_feed(b, step["feed"], day)
        total = (base or 0.0) + wh / 1000.0
    else:
        total = (state["total"] if state["day"] == day else 0.0) + wh / 1000.0
    return wh, {"total": total, "day": day}, [(start, total, False)]


def _accumulator(b: Batch, step, state, t, value) -> StateResult:
    if state is None:
        total = b.feed_value(step["feed"]) or 0.0
    else:
        total = state["total"]
    total += value
    return total, {"total": total}, [(t, total, True)]


def _ratechange(b: Batch, step, state, t, value) -> StateResult:
    if state is None:
        return None, {"input": value}, []  # emoncms returns an unset $ratechange: null
    change = value - state["input"]
    return change, {"input": value}, [(t, change, False)]


def _pulse_diff(b: Batch, step, state, t, value) -> StateResult | None:
    """emoncms: the count, through signed2unsigned, is logged; the increment is passed on.
    A count not above 0 passes null and logs nothing (emoncms's function returns nothing)."""
    count = _signed2unsigned(value)
    if count <= 0:
        return None
    if state is None:
        last = b.feed_value(step["feed"])
    else:
        last = state["count"]
    if last is None:
        diff = 0.0
    elif count >= last:
        diff = count - last
    else:
        diff = count  # the counter restarted
    return diff, {"count": count}, [(t, count, False)]


def _kwh_to_power(b: Batch, step, state, t, kwh) -> StateResult:
    if state is None:
        return 0.0, {"input": kwh}, []
    elapsed = t - state["t"]
    power = (kwh - state["input"]) * 3_600_000.0 / elapsed if elapsed > 0 else 0.0
    return power, {"input": kwh}, [(t, power, False)] if elapsed > 0 else []


def _daily_extreme(better: Callable[[float, float], bool]):
    def run(b: Batch, step, state, t, value) -> StateResult:
        day, start = b.clock.day(t)
        if state is None:
            best = _today_from_feed(b, step["feed"], day)
        else:
            best = state["best"] if state["day"] == day else None
        if best is None or better(value, best):
            return value, {"day": day, "best": value}, [(start, value, False)]
        return value, {"day": day, "best": best}, []  # emoncms writes only a new extreme

    return run


def _counter_accumulator(units_per_wh: float):
    """wh_accumulator (Wh) and kwh_accumulator (kWh): a counter with resets -> a total."""

    def run(b: Batch, step, state, t, value) -> StateResult:
        if state is None:
            # emoncms: the first reading only primes; the total carries on from the feed.
            total = b.feed_value(step["feed"])
            return value, {"input": value, "total": total or 0.0}, []
        total = state["total"]
        diff = value - state["input"]
        elapsed = t - state["t"]
        # A fall is a counter reset; a rise implying more than MAX_POWER_W is a spike.
        if elapsed > 0 and diff > 0 and diff * 3600 / units_per_wh / elapsed < MAX_POWER_W:
            total += diff
        return total, {"input": value, "total": total}, [(t, total, True)]

    return run


def _power_to_kwh_slot(minutes_of: Callable[[dict], int]):
    """power_to_kwh_15m / power_to_kwh_custom: kWh of each local slot, written at its end."""

    def run(b: Batch, step, state, t, watts) -> StateResult:
        minutes = minutes_of(step)
        start, end = b.clock.slot(t, minutes)
        if state is None:
            last = b.feed_last.get(step["feed"])
            kwh = last[1] if last is not None and last[0] == end else 0.0
            return watts, {"kwh": kwh, "slot": start}, [(end, kwh, False)]
        elapsed = t - state["t"]
        inc = watts * elapsed / 3_600_000.0 if 0 < elapsed <= minutes * 60 else 0.0
        kwh = state["kwh"] + inc if state["slot"] == start else inc
        return watts, {"kwh": kwh, "slot": start}, [(end, kwh, False)]

    return run


STATEFUL: dict[str, Callable] = {
    "power_to_kwh": _power_to_kwh,
    "power_to_kwhd": _power_to_kwhd,
    "kwh_to_kwhd": _kwh_to_kwhd,
    "input_ontime": _input_ontime,
    "whinc_to_kwhd": _whinc_to_kwhd,
    "accumulator": _accumulator,
    "ratechange": _ratechange,
    "pulse_diff": _pulse_diff,
    "kwh_to_power": _kwh_to_power,
    "max_value": _daily_extreme(lambda v, best: v > best),
    "min_value": _daily_extreme(lambda v, best: v < best),
    "wh_accumulator": _counter_accumulator(1.0),
    "kwh_accumulator": _counter_accumulator(1 / 1000.0),
    "power_to_kwh_15m": _power_to_kwh_slot(lambda s: 15),
    "power_to_kwh_custom": _power_to_kwh_slot(lambda s: int(s["minutes"])),
}


# --- a reading at or before the step's last one (late, repeated or after a future-dated one) ---
#
# emoncms runs every step on every reading, and the list after it always runs. Its
# power_to_kwh and kin compute the time elapsed since the feed's last time, add nothing when it
# is not positive, write the total at the reading's time and set the feed's time to it
# (feed->post's set_timevalue), so the clock moves back to the late reading and the next
# reading counts from there. The time-integrating steps do the same (_late_clock_back): after a
# future-dated reading the kWh keeps counting at once (it used to stop until the clock caught
# up with the future time), as emoncms's does. Redelivery is not told by a reading's time but
# by its stream entry (run.py, `mark`), so moving the clock back never counts a request twice.
#
# Within its own day (slot) only: emoncms given a reading of an earlier day computes "a new
# day" and overwrites that day's figure with this reading's increment, 0; we keep the day's
# figure and do not count the reading (dropped). The counter steps (kwh_to_kwhd, the
# accumulators, pulse_diff...) do not move back: an older count is not used, the next newer one
# carries its rise, so nothing is lost or counted twice.
#
# Each takes (batch, step, state, t, value) with t <= state["t"] and returns (value passed on,
# new state or None for unchanged, points to log, dropped); a new state with a "t" moves the
# step's clock there, else it stays at state["t"]. dropped: the caller records the reading in
# the node's input errors (a lost contribution, or a clock moved back).

LateResult = tuple[float | None, dict | None, Emits, bool]


def _late_clock_back(fn: Callable[..., StateResult], same_period: Callable[..., bool]):
    """Run the step as emoncms does with a negative elapsed time, and move its clock back."""

    def run(b: Batch, step, state, t, value) -> LateResult:
        if not same_period(b, step, state, t):
            return value, None, [], True  # an earlier day's (slot's) figure is not rewritten
        current, new_state, emits = fn(b, step, state, t, value)
        new_state["t"] = t
        return current, new_state, emits, t < state["t"]

    return run


def _any_time(b: Batch, step, state, t) -> bool:
    return True


def _same_day(b: Batch, step, state, t) -> bool:
    return b.clock.day(t)[0] == state["day"]


def _same_slot(minutes_of: Callable[[dict], int]):
    return lambda b, step, state, t: b.clock.slot(t, minutes_of(step))[0] == state["slot"]


def _late_adds_nothing(passed: Callable[[dict, float], float | None]):
    def run(b: Batch, step, state, t, value) -> LateResult:
        # At the same second nothing is lost: no time elapsed, or a count read again next time.
        return passed(state, value), None, [], t < state["t"]

    return run


def _late_accumulator(b: Batch, step, state, t, value) -> LateResult:
    # An increment counts whenever it arrives (a redelivered request never reaches here twice:
    # sensors/ingest/drain.py remembers the stream entries done). The total is written at the
    # newest reading's time, where the feed's last value is.
    total = state["total"] + value
    return total, {"total": total}, [(state["t"], total, True)], False


def _late_whinc_to_kwhd(b: Batch, step, state, t, wh) -> LateResult:
    day, start = b.clock.day(t)
    if day != state["day"]:
        return wh, None, [], True  # an earlier day's figure is not rewritten
    total = state["total"] + wh / 1000.0
    return wh, {"total": total, "day": day}, [(start, total, False)], False


def _late_extreme(better: Callable[[float, float], bool]):
    def run(b: Batch, step, state, t, value) -> LateResult:
        day, start = b.clock.day(t)
        if day != state["day"]:
            return value, None, [], True
        if better(value, state["best"]):
            return value, {"day": day, "best": value}, [(start, value, False)], False
        return value, None, [], False

    return run


LATE: dict[str, Callable[..., LateResult]] = {
    "power_to_kwh": _late_clock_back(_power_to_kwh, _any_time),
    "power_to_kwhd": _late_clock_back(_power_to_kwhd, _same_day),
    "power_to_kwh_15m": _late_clock_back(STATEFUL["power_to_kwh_15m"], _same_slot(lambda s: 15)),
    "power_to_kwh_custom": _late_clock_back(
        STATEFUL["power_to_kwh_custom"], _same_slot(lambda s: int(s["minutes"]))
    ),
    # emoncms adds the (negative) elapsed time: the on-time falls back by what the future-dated
    # reading added ahead, and the readings after count it again.
    "input_ontime": _late_clock_back(_input_ontime, _same_day),
    # emoncms: a kWh below the last is an error and the last is passed on.
    "kwh_to_kwhd": _late_adds_nothing(lambda s, v: max(v, s["kwh"])),
    "ratechange": _late_adds_nothing(lambda s, v: None),
    "pulse_diff": _late_adds_nothing(lambda s, v: None if _signed2unsigned(v) <= 0 else 0.0),
    "kwh_to_power": _late_adds_nothing(lambda s, v: 0.0),  # emoncms: power 0 when no time passed
    "wh_accumulator": _late_adds_nothing(lambda s, v: s["total"]),
    "kwh_accumulator": _late_adds_nothing(lambda s, v: s["total"]),
    "accumulator": _late_accumulator,
    "whinc_to_kwhd": _late_whinc_to_kwhd,
    "max_value": _late_extreme(lambda v, best: v > best),
    "min_value": _late_extreme(lambda v, best: v < best),
}
assert LATE.keys() == STATEFUL.keys()
# How many of its latest reading times a clock-back step remembers (run.py), to tell a row
# sent again from a late one: a resent emonhub batch of up to this many rows is not counted
# twice. JSON of 64 times is under 1 KB of the step's Redis state.
SEEN = 64
# The steps whose clock a late reading moves back (within its day or slot), as emoncms's does.
CLOCK_BACK = frozenset(
    {"power_to_kwh", "power_to_kwhd", "power_to_kwh_15m", "power_to_kwh_custom", "input_ontime"}
)
