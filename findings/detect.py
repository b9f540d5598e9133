"""The rules' conditions as pure functions over recorded series (docs/FINDINGS.md).

No Django here: each function takes plain lists (command rows as (time, state, strategy),
readings as (time, value), occupancy as (start, end) pairs) and returns the spans where the
fault held, so a rule is tested on hand-made series and run unchanged over any history range.
Times are timezone-aware datetimes.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta


@dataclass(frozen=True)
class Command:
    at: datetime
    state: bool
    strategy: str


@dataclass(frozen=True)
class Span:
    start: datetime
    end: datetime
    strategy: str = ""

    @property
    def hours(self) -> float:
        return (self.end - self.start).total_seconds() / 3600.0


def on_spans(commands: Sequence[Command], start: datetime, end: datetime) -> list[Span]:
    """When the actuator was commanded ON within [start, end), and by which strategy.

    `commands` in time order; the first may be before `start` (the state the range opens in).
    A command holds until the next one; the last holds to `end`."""
    spans: list[Span] = []
    for i, cmd in enumerate(commands):
        if not cmd.state:
            continue
        until = commands[i + 1].at if i + 1 < len(commands) else end
        s, e = max(cmd.at, start), min(until, end)
        if e > s:
            spans.append(Span(s, e, cmd.strategy))
    return spans


def subtract(span: Span, cuts: Iterable[tuple[datetime, datetime]]) -> list[Span]:
    """`span` less every (start, end) of `cuts`: the pieces left, in time order."""
    pieces = [span]
    for c0, c1 in sorted(cuts):
        kept: list[Span] = []
        for p in pieces:
            if c1 <= p.start or c0 >= p.end:
                kept.append(p)
                continue
            if c0 > p.start:
                kept.append(Span(p.start, c0, p.strategy))
            if c1 < p.end:
                kept.append(Span(c1, p.end, p.strategy))
        pieces = kept
    return pieces


def union(spans: Iterable[Span]) -> list[Span]:
    """Overlapping or touching spans merged, in time order (two valves of one zone ON at once
    are one zone heated, not two); a merged span keeps its first strategy."""
    merged: list[Span] = []
    for s in sorted(spans, key=lambda s: s.start):
        if merged and s.start <= merged[-1].end:
            last = merged[-1]
            merged[-1] = Span(last.start, max(last.end, s.end), last.strategy)
        else:
            merged.append(s)
    return merged


def heating_unoccupied(
    spans: Sequence[Span],
    occupied: Sequence[tuple[datetime, datetime]],
    *,
    excused: frozenset[str],
    preheat: timedelta,
    min_duration: timedelta,
) -> list[Span]:
    """ON time outside occupancy that no excusing strategy (frost, override ...) asked for.

    An occupancy window is widened by `preheat` before it (optimum start may warm the room
    that early); a piece shorter than `min_duration` is not a fault (a tick's lag at a
    window's edge)."""
    widened = [(s - preheat, e) for s, e in occupied]
    found: list[Span] = []
    for span in spans:
        if span.strategy in excused:
            continue
        found.extend(p for p in subtract(span, widened) if p.end - p.start >= min_duration)
    return found


def flatline(
    readings: Sequence[tuple[datetime, float]],
    heat_on: Sequence[Span],
    start: datetime,
    end: datetime,
    *,
    window: timedelta,
    band_k: float,
    min_readings: int,
    min_heat: timedelta,
) -> list[Span]:
    """Windows (back to back from `start`) in which the sensor varied less than `band_k`
    while its zone was heated for at least `min_heat`: a sensor that does not see heat.

    `readings` in time order. A window with fewer than `min_readings` readings is skipped (a lost sensor is alarmed
    elsewhere; too few points cannot show a flat line)."""
    found: list[Span] = []
    times = [t for t, _ in readings]  # readings come in time order: each window is a slice
    w0 = start
    while w0 + window <= end:
        w1 = w0 + window
        values = [v for _, v in readings[bisect_left(times, w0) : bisect_left(times, w1)]]
        heated = sum(
            ((min(s.end, w1) - max(s.start, w0)) for s in heat_on if s.end > w0 and s.start < w1),
            timedelta(),
        )
        if len(values) >= min_readings and heated >= min_heat:
            if max(values) - min(values) < band_k:
                found.append(Span(w0, w1))
        w0 = w1
    return found


def starts(commands: Sequence[Command]) -> list[datetime]:
    """Times the actuator was switched from OFF (or unknown) to ON."""
    found: list[datetime] = []
    on = False
    for cmd in commands:
        if cmd.state and not on:
            found.append(cmd.at)
        on = cmd.state
    return found


def short_cycling(
    start_times: Sequence[datetime],
    start: datetime,
    end: datetime,
    *,
    per_hour: int,
) -> list[tuple[Span, int]]:
    """Clock hours from `start` with more than `per_hour` starts: (hour, starts in it)."""
    found: list[tuple[Span, int]] = []
    h0 = start
    hour = timedelta(hours=1)
    while h0 + hour <= end:
        n = sum(1 for t in start_times if h0 <= t < h0 + hour)
        if n > per_hour:
            found.append((Span(h0, h0 + hour), n))
        h0 += hour
    return found


def slots(
    readings: Sequence[tuple[datetime, float]], step: timedelta
) -> list[tuple[datetime, datetime, float]]:
    """Each reading as the slot it stands for: from its time to the next reading, at most
    `step` (a gap in the feed is not counted as time the reading held)."""
    found = []
    for i, (t, v) in enumerate(readings):
        nxt = readings[i + 1][0] if i + 1 < len(readings) else t + step
        found.append((t, min(nxt, t + step), v))
    return found


def _inside(t: datetime, spans: Sequence[Span]) -> bool:
    return any(s.start <= t < s.end for s in spans)


def under_setpoint(
    readings: Sequence[tuple[datetime, float]],
    occupied: Sequence[tuple[datetime, datetime, float]],
    heat_on: Sequence[Span],
    *,
    margin_k: float,
    step: timedelta,
    min_total: timedelta,
) -> list[Span]:
    """Occupied time (windows with the setpoint each wants) during which the valve was ON
    and the room read below setpoint − `margin_k`: a zone the heat does not reach.

    Nothing unless the total is more than `min_total` (a morning's warm-up, a door left open
    for a delivery, is not a fault). Spans merged, in time order."""
    found: list[Span] = []
    for t0, t1, value in slots(readings, step):
        for w0, w1, setpoint in occupied:
            if w0 <= t0 < w1 and value < setpoint - margin_k and _inside(t0, heat_on):
                found.append(Span(t0, min(t1, w1)))
                break
    merged = union(found)
    total = sum((s.end - s.start for s in merged), timedelta())
    return merged if total > min_total else []


def off_spans(commands: Sequence[Command], start: datetime, end: datetime) -> list[Span]:
    """When the actuator was commanded OFF within [start, end): the mirror of `on_spans`.
    Before its first command its state is unknown and is neither."""
    flipped = [Command(c.at, not c.state, c.strategy) for c in commands]
    return on_spans(flipped, start, end)


def intersect(a: Sequence[Span], b: Sequence[Span]) -> list[Span]:
    """The time both span lists cover, in time order (a's strategy kept)."""
    found = [
        Span(max(x.start, y.start), min(x.end, y.end), x.strategy)
        for x in a
        for y in b
        if min(x.end, y.end) > max(x.start, y.start)
    ]
    return sorted(found, key=lambda s: s.start)


def warming(
    readings: Sequence[tuple[datetime, float]],
    during: Sequence[Span],
    *,
    rate_k_per_h: float,
    sustain: timedelta,
    step: timedelta,
) -> list[tuple[Span, float]]:
    """Spans within `during` where the room rose faster than `rate_k_per_h` over every
    `sustain` it covers: (span, its rise in K). A reading is paired with the first one at least
    `sustain` later; a pair with a gap in the feed (further apart than `sustain` + `step`) or
    reaching outside one span of `during` is not judged."""
    times = [t for t, _ in readings]
    marked: list[Span] = []
    for span in during:
        lo, hi = bisect_left(times, span.start), bisect_left(times, span.end)
        for i in range(lo, hi):
            t0, v0 = readings[i]
            j = bisect_left(times, t0 + sustain, lo=i + 1, hi=hi)
            if j >= hi:
                break
            t1, v1 = readings[j]
            if t1 - t0 > sustain + step:
                continue
            if (v1 - v0) / ((t1 - t0).total_seconds() / 3600) > rate_k_per_h:
                marked.append(Span(t0, t1))
    value_at = dict(readings)
    return [(s, value_at[s.end] - value_at[s.start]) for s in union(marked)]


def spikes(
    readings: Sequence[tuple[datetime, float]],
    *,
    jump_k: float,
    revert_k: float,
    within: timedelta,
    step: timedelta,
) -> list[datetime]:
    """Times a reading jumped more than `jump_k` from the one before it (no more than `step`
    earlier: a jump across a gap is a lost sensor, alarmed elsewhere) and a reading within
    `within` after came back to within `revert_k` of the value before the jump. A room does not
    move 5 K in five minutes and back; a loose wire or a radio glitch does."""
    found: list[datetime] = []
    for i in range(1, len(readings)):
        (t0, before), (t1, value) = readings[i - 1], readings[i]
        if t1 - t0 > step or abs(value - before) <= jump_k:
            continue
        for t, v in readings[i + 1 :]:
            if t - t1 > within:
                break
            if abs(v - before) <= revert_k:
                found.append(t1)
                break
    return found


def per_day(
    times: Sequence[datetime], start: datetime, end: datetime, *, more_than: int
) -> list[tuple[Span, int]]:
    """Days from `start` with more than `more_than` of `times`: (day, how many)."""
    found: list[tuple[Span, int]] = []
    day = timedelta(days=1)
    d0 = start
    while d0 < end:
        d1 = min(d0 + day, end)
        n = sum(1 for t in times if d0 <= t < d1)
        if n > more_than:
            found.append((Span(d0, d1), n))
        d0 = d1
    return found


# --- the plant rules (findings/plant_checks.py) -------------------------------------------


def difference(
    a: Sequence[tuple[datetime, float]], b: Sequence[tuple[datetime, float]]
) -> list[tuple[datetime, float]]:
    """a − b at the times both were read (two feeds read on one grid), in time order."""
    at = dict(b)
    return [(t, v - at[t]) for t, v in a if t in at]


def held(
    readings: Sequence[tuple[datetime, float]],
    test: Callable[[float], bool],
    step: timedelta,
) -> list[Span]:
    """When `test` held of the readings: each passing reading's slot (to the next reading, at
    most `step`: a gap in the feed is not counted), merged, in time order."""
    return union(Span(t0, t1) for t0, t1, v in slots(readings, step) if test(v))


def total(spans: Iterable[Span]) -> timedelta:
    return sum((s.end - s.start for s in spans), timedelta())


def strategy_spans(
    commands: Sequence[Command], start: datetime, end: datetime, *, state: bool, strategy: str
) -> list[Span]:
    """When the actuator was held at `state` by `strategy` within [start, end); a run of rows
    (a change and its keep-alives) is one span."""
    spans = on_spans(commands, start, end) if state else off_spans(commands, start, end)
    return union(s for s in spans if s.strategy == strategy)


def drop_during(
    readings: Sequence[tuple[datetime, float]], span: Span, *, before: timedelta
) -> float:
    """How far the room fell for an event: the warmest reading within `before` ahead of the
    span's start (where the fall began) less the coldest within the span; 0 when unknown."""
    ahead = [v for t, v in readings if span.start - before <= t <= span.start]
    within = [v for t, v in readings if span.start <= t < span.end]
    if not ahead or not within:
        return 0.0
    return max(0.0, max(ahead) - min(within))


def pinned_days(
    starts: Sequence[tuple[datetime, datetime, float]],
    *,
    max_lead: timedelta,
    tolerance: timedelta,
    rate_bounds: tuple[float, float],
) -> tuple[list[Span], int]:
    """Optimum start's pre-heats (occupancy start, pre-heat start, learned rate after) that
    were pinned: a lead within `tolerance` of `max_lead`, or a learned rate at either bound.
    Returns (the pinned pre-heats, how many days had a pre-heat at all), days by the
    occupancy start's date."""
    pinned = [
        Span(pre, occ)
        for occ, pre, rate in starts
        if occ - pre >= max_lead - tolerance or rate <= rate_bounds[0] or rate >= rate_bounds[1]
    ]
    return pinned, len({occ.date() for occ, _, _ in starts})


def daily_means(
    readings: Sequence[tuple[datetime, float]],
    start: datetime,
    end: datetime,
    *,
    min_readings: int,
) -> list[tuple[Span, float]]:
    """The mean reading of each day from `start` (days with fewer than `min_readings` readings
    left out: a mean of a few hours is not the day's)."""
    found = []
    times = [t for t, _ in readings]
    day = timedelta(days=1)
    d0 = start
    while d0 < end:
        d1 = min(d0 + day, end)
        values = [v for _, v in readings[bisect_left(times, d0) : bisect_left(times, d1)]]
        if len(values) >= min_readings:
            found.append((Span(d0, d1), sum(values) / len(values)))
        d0 = d1
    return found


def median(values: Sequence[float]) -> float:
    s = sorted(values)
    mid = len(s) // 2
    return s[mid] if len(s) % 2 else (s[mid - 1] + s[mid]) / 2


def growing_gap(
    gaps: Sequence[tuple[Span, float]],
    *,
    band_k: float,
    min_k_per_day: float,
    min_days: int,
) -> tuple[float, float] | None:
    """A sensor's daily gap to its neighbours (its mean less theirs) that is wider than `band_k`
    on its last day and has grown by at least `min_k_per_day` (least-squares slope over the
    days, in the direction of the last gap): (last gap, slope K/day), else None. A steady
    offset (a sunny room, a cold corner) is no drift; a gap that widens day after day is."""
    if len(gaps) < min_days:
        return None
    last = gaps[-1][1]
    if abs(last) <= band_k:
        return None
    xs = [(s.start - gaps[0][0].start).total_seconds() / 86400 for s, _ in gaps]
    ys = [g for _, g in gaps]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    spread = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / spread
    if slope * (1 if last > 0 else -1) < min_k_per_day:
        return None
    return last, slope
