"""Pure conditions of the energy rules: base load (a week's and the last night's), the CUSUM,
PV yield (a week's and a bright day's), hydro without output.

No Django, no database: series in, what tripped out, so each is tested on recorded series
with and without its fault (tests/findings/test_energy_detect.py). Hourly series are
[(aware local datetime, kW)], daily ones [(date, value)]; findings/energy_checks.py reads them
through the site model. Every threshold is an argument; the values used are in
findings/rules.py with why.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime
from statistics import median

import numpy as np

Hourly = Sequence[tuple[datetime, float]]


def out_of_hours(t: datetime, *, opens: int, closes: int) -> bool:
    """True for an hour (local time) a workplace is empty: weekends, and weekday hours
    before `opens` or from `closes`."""
    return t.weekday() >= 5 or t.hour < opens or t.hour >= closes


def low_percentile(values: Sequence[float], q: float, min_count: int) -> float | None:
    """The `q` percentile of `values`, None when fewer than `min_count` (too few to say)."""
    if len(values) < min_count:
        return None
    return float(np.percentile(np.asarray(values, dtype=np.float64), q))


@dataclass(frozen=True)
class BaseLoad:
    now_kw: float  # this range's out-of-hours base load
    before_kw: float  # the median of the previous weeks' base loads
    weeks: int  # previous weeks it is judged against

    @property
    def rise_kw(self) -> float:
        return self.now_kw - self.before_kw


def base_load_rise(
    now_kw: float | None,
    before_kw: Sequence[float | None],
    *,
    min_weeks: int,
    min_rise_kw: float,
    min_rise_ratio: float,
) -> BaseLoad | None:
    """A base load risen against the same meter's previous weeks (their median, so one odd
    week does not set the bar): by at least `min_rise_kw` and `min_rise_ratio` of before."""
    known = [b for b in before_kw if b is not None]
    if now_kw is None or len(known) < min_weeks:
        return None
    before = float(median(known))
    rise = now_kw - before
    if rise < min_rise_kw or rise < min_rise_ratio * max(before, 0.0):
        return None
    return BaseLoad(now_kw, before, len(known))


def night_base_rise(
    night: Sequence[float],
    nights_before: Sequence[Sequence[float]],
    *,
    q: float,
    min_hours: int,
    above_q: float,
    min_rise_kw: float,
    min_rise_ratio: float,
) -> BaseLoad | None:
    """The short look at a base load: the last night's `q` percentile (`night`: its
    out-of-hours hourly means, at least `min_hours`) risen by `min_rise_kw` and
    `min_rise_ratio` above the `above_q` percentile of the previous nights' own bases (runs of
    as many out-of-hours hours), so a meter whose nights scatter more (frost heaters on cold
    nights, a weekday night above a weekend's) sets its own bar higher. A night is judged
    against nights, never against the weeks' base: that is set by the quietest hours of a week
    (a weekend's), and a weekday night above a weekend's is the building, not a fault. The low
    percentile keeps a cleaner's hour or an hour of noise from counting: a load left on all
    night is what lifts it. Returns the night's base against the median of the nights before
    (what the rise costs), None when it has not risen or there is too little to say."""
    now = low_percentile(night, q, min_hours)
    bases = [b for b in (low_percentile(n, q, min_hours) for n in nights_before) if b is not None]
    if now is None or not bases:
        return None
    values = np.asarray(bases, dtype=np.float64)
    bar = float(np.percentile(values, above_q))
    rise = now - bar
    if rise < min_rise_kw or rise < min_rise_ratio * max(bar, 0.0):
        return None
    return BaseLoad(now, float(np.median(values)), 0)


def chunks(values: Sequence[float], size: int) -> list[list[float]]:
    """`values` cut into runs of `size` from the end (the oldest, shorter run left out): the
    previous nights, as runs of as many out-of-hours hours as the night judged."""
    n = len(values) // size * size
    start = len(values) - n
    return [list(values[i : i + size]) for i in range(start, len(values), size)]


@dataclass(frozen=True)
class Run:
    """Days in a row a building used more than its model."""

    first: date
    last: date
    excess: float  # actual - expected summed over the run's days (kWh)
    expected: float  # expected over the run's days

    @property
    def days(self) -> int:
        return (self.last - self.first).days + 1


def cusum_rising(
    days: Sequence[tuple[date, float | None, float | None]],
    *,
    min_days: int,
    day_margin: float,
) -> list[Run]:
    """Runs of at least `min_days` days in a row whose CUSUM rose each day by more than
    `day_margin` of the day's expected use. `days` is (day, CUSUM at the end of the day,
    the day's expected use) as the energy report gives them; a day with no CUSUM (a gap in
    the data or in the model) ends a run."""
    runs: list[Run] = []
    current: list[tuple[date, float, float]] = []
    previous = 0.0  # the CUSUM is 0 before the first day of the range

    def close() -> None:
        if len(current) >= min_days:
            excess = sum(rise for _d, rise, _e in current)
            expected = sum(e for _d, _r, e in current)
            runs.append(Run(current[0][0], current[-1][0], excess, expected))
        current.clear()

    for day, cusum, expected in days:
        if cusum is None or expected is None:
            # a gap adds nothing to the CUSUM: the next day's rise is measured from the last
            # known value, but the run ends here
            close()
            previous = cusum if cusum is not None else previous
            continue
        rise = cusum - previous
        previous = cusum
        if rise > day_margin * expected and rise > 0:
            current.append((day, rise, expected))
        else:
            close()
    close()
    return runs


def profile_max(series: Hourly) -> dict[int, float]:
    """The highest output seen at each local hour of the day: a clear day's shape, taken
    from the best hour of the days given."""
    found: dict[int, float] = {}
    for t, kw in series:
        found[t.hour] = max(found.get(t.hour, 0.0), kw)
    return found


def envelope_ratio(now: Hourly, before: Hourly, *, daylight_share: float) -> float | None:
    """This range's best-hour profile against the clear-day envelope of the weeks before,
    as a ratio of their sums over the daylight hours (where the envelope reaches
    `daylight_share` of its peak). A shaded or dead string lowers every hour of even the
    clearest day; None when the envelope has no daylight (no history)."""
    env = profile_max(before)
    peak = max(env.values(), default=0.0)
    if peak <= 0:
        return None
    hours = [h for h, kw in env.items() if kw >= daylight_share * peak]
    best = profile_max(now)
    return sum(best.get(h, 0.0) for h in hours) / sum(env[h] for h in hours)


@dataclass(frozen=True)
class Shortfall:
    ratio: float  # this array's yield against its own past, as a share
    reference: float  # the same share of its siblings (their median) or 1 for the envelope
    missing_kwh: float


def sibling_shortfall(
    now_kwh: float, before_kwh: float, siblings: Sequence[float], *, min_share: float
) -> Shortfall | None:
    """An array yielding under `min_share` of what its siblings yield, each against its own
    past (`before_kwh`: what it made in as many hours before, at its past mean; `siblings`:
    their now / before ratios), so arrays of any size are compared and the weather (the
    same sky over all of them) cancels out. The missing kWh is what it would have made at
    its siblings' ratio."""
    if before_kwh <= 0 or not siblings:
        return None
    ratio = now_kwh / before_kwh
    reference = float(median(siblings))
    if reference <= 0 or ratio >= min_share * reference:
        return None
    return Shortfall(ratio, reference, reference * before_kwh - now_kwh)


@dataclass(frozen=True)
class DayShortfall:
    share: float  # this array's hourly share of its envelope ÷ its sibling's (the median)
    hours: list[datetime]  # the bright hours judged


def bright_hours_shortfall(
    now: Hourly,
    envelope: dict[int, float],
    sibling_now: Hourly,
    sibling_envelope: dict[int, float],
    *,
    bright_share: float,
    daylight_share: float,
    min_hours: int,
    min_share: float,
) -> DayShortfall | None:
    """The short look at a PV array: over the hours its sibling was bright (made at least
    `bright_share` of its own clear-day envelope at that hour of the day), each hour's share
    of this array's envelope against the sibling's, their median under `min_share`. Only
    bright hours are judged, so a grey day is no evidence either way; the median, so one
    hour a cloud shades one array and not the other does not decide. Dawn and dusk (an
    envelope under `daylight_share` of its peak) are left out. None with fewer than
    `min_hours` bright hours or no shortfall."""
    peak = max(envelope.values(), default=0.0)
    sibling_peak = max(sibling_envelope.values(), default=0.0)
    if peak <= 0 or sibling_peak <= 0:
        return None
    sibling = dict(sibling_now)
    ratios, hours = [], []
    for t, kw in now:
        env, sib_env = envelope.get(t.hour, 0.0), sibling_envelope.get(t.hour, 0.0)
        if env < daylight_share * peak or sib_env < daylight_share * sibling_peak:
            continue
        sib = sibling.get(t)
        if sib is None or sib < bright_share * sib_env:
            continue
        ratios.append((kw / env) / (sib / sib_env))
        hours.append(t)
    if len(ratios) < min_hours:
        return None
    share = float(median(ratios))
    return DayShortfall(share, hours) if share < min_share else None


@dataclass(frozen=True)
class Standstill:
    hours: list[datetime]  # the hours with water and no output
    missing_kwh: float  # what it made at such flows before


def absent_with_flow(
    power: Hourly,
    flow: Hourly,
    power_before: Hourly,
    flow_before: Hourly,
    *,
    running_share: float,
    flow_quantile: float,
    min_hours: int,
    flow_band: float,
) -> Standstill | None:
    """Hours in runs of at least `min_hours` in which a turbine gave no output though the
    water it has run on before was there. From the weeks before: it runs when its output
    exceeds `running_share` of its 95th-percentile output; the flow it runs on is the
    `flow_quantile` percentile of the flow while running. The missing kWh of an hour is the
    median output of the hours before with a flow within `flow_band` of that hour's (else
    its median running output). None without a history of running."""
    pb = dict(power_before)
    history = [(f, pb[t]) for t, f in flow_before if t in pb]
    if not history:
        return None
    top = float(np.percentile([p for _f, p in history], 95))
    if top <= 0:
        return None
    on_kw = running_share * top
    running = [(f, p) for f, p in history if p > on_kw]
    if not running:
        return None
    flow_on = float(np.percentile([f for f, _p in running], flow_quantile))
    if flow_on <= 0:
        return None
    now_power = dict(power)
    idle = [(t, f) for t, f in flow if f >= flow_on and now_power.get(t, on_kw + 1) <= on_kw]
    kept: list[tuple[datetime, float]] = []
    run: list[tuple[datetime, float]] = []
    for t, f in idle:
        if run and (t - run[-1][0]).total_seconds() > 3600:
            kept += run if len(run) >= min_hours else []
            run = []
        run.append((t, f))
    kept += run if len(run) >= min_hours else []
    if not kept:
        return None
    typical = float(median(p for _f, p in running))
    missing = 0.0
    for _t, f in kept:
        near = [p for rf, p in running if abs(rf - f) <= flow_band * f]
        missing += float(median(near)) if near else typical
    return Standstill([t for t, _f in kept], missing)
