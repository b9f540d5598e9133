"""Grid electricity's CO2 weighted hour by hour: pure functions, no Django (docs/ENERGY.md).

A building that uses most of its electricity at the evening peak, when the grid burns more
gas, emits more than its daily use x the day's mean intensity says. With a grid carbon feed
(g CO2e/kWh) the day's kg CO2e is sum over windows (hours; half or quarter hours when the
carbon feed has that interval) of the window's use x the window's intensity.

Gaps are handled as the rest of the module handles them, never as zero:

- intensity: a window with no value (or one outside 0..2000 g/kWh, a broken reading) is filled
  on a straight line between the windows either side (the nearest known one at the day's
  edges), as a power meter's missing hour is; a day with under 75 % of its windows known has
  no weighted figure (None), as a day with under 75 % of its temperatures has no degree days,
  and the figures then use the period table or the constant factor for it;
- use: a window whose use is not known while the day's total is (a hole inside the day that a
  register counted through) carries the rest of the day's use, weighted by the mean intensity
  of the windows it covers; a gap day has no figure.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

MIN_COVERAGE = 0.75  # as degree days: a day needs 75 % of its windows measured
MAX_G_PER_KWH = 2000.0


def intensity_grid(
    times: Sequence[int], values: Sequence[float | None], grid: Sequence[int]
) -> np.ndarray:
    """Intensity (g/kWh) at each window start of `grid`; NaN where the feed has no (sane) value."""
    out = np.full(len(grid), np.nan)
    pos = {int(t): i for i, t in enumerate(grid)}
    for t, v in zip(times, values, strict=True):
        i = pos.get(int(t))
        if i is not None and v is not None and np.isfinite(v) and 0 <= v <= MAX_G_PER_KWH:
            out[i] = float(v)
    return out


def filled_day(intensity: np.ndarray) -> np.ndarray | None:
    """A day's window intensities with holes filled on a straight line; None under 75 % known."""
    known = np.flatnonzero(np.isfinite(intensity))
    if len(intensity) == 0 or len(known) < MIN_COVERAGE * len(intensity):
        return None
    if len(known) == len(intensity):
        return intensity
    idx = np.arange(len(intensity))
    # np.interp holds the end values flat beyond the first and last known window
    return np.interp(idx, known, intensity[known])


def day_kg(
    window_use: Sequence[float | None], intensity: np.ndarray, day_value: float | None
) -> float | None:
    """kg CO2e of one day: sum of use x intensity per window (docstring above for gaps).

    `window_use`: kWh per window of the day (None: not known), `intensity`: g/kWh per window
    (NaN: not known), `day_value`: the day's use as stored (None: a gap day)."""
    if day_value is None:
        return None
    g = filled_day(np.asarray(intensity, dtype=np.float64))
    if g is None:
        return None
    use = np.array([np.nan if u is None else u for u in window_use], dtype=np.float64)
    known = np.isfinite(use)
    kg = float(np.sum(use[known] * g[known])) / 1000.0
    rest = day_value - float(np.sum(use[known]))
    if abs(rest) > 1e-9:
        # use the windows do not account for: spread over the unknown windows (all of them
        # when every window is known and the rest is rounding)
        where = g[~known] if (~known).any() else g
        kg += rest * float(np.mean(where)) / 1000.0
    return kg
