"""Heating degree days from outside temperature: pure functions, no Django (docs/ENERGY.md).

Method: the mean daily temperature Tmean (mean of the day's hourly mean temperatures, local
day), HDD = max(0, base - Tmean), base 15.5 °C by default (the UK convention; CIBSE TM41:2006
"Degree-days: theory and application" section 2 describes it and the more exact methods).
A day with fewer than MIN_HOURS_FRACTION of its hours measured has no mean and no degree days:
a gap, never a guess.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

DEFAULT_BASE_C = 15.5
MIN_HOURS_FRACTION = 0.75


def daily_means(
    hour_starts: Sequence[int] | np.ndarray,
    hourly_means: Sequence[float | None] | np.ndarray,
    bounds: Sequence[int],
) -> list[float | None]:
    """Mean of the hourly means inside each period [bounds[i], bounds[i+1]), or None."""
    t = np.asarray(hour_starts, dtype=np.int64)
    v = np.asarray([np.nan if x is None else x for x in hourly_means], dtype=np.float64)
    out: list[float | None] = []
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        sel = v[(t >= a) & (t < b)]
        hours = (b - a) / 3600.0
        good = sel[np.isfinite(sel)]
        out.append(float(good.mean()) if len(good) >= MIN_HOURS_FRACTION * hours else None)
    return out


def heating_degree_days(mean_c: float | None, base_c: float = DEFAULT_BASE_C) -> float | None:
    if mean_c is None:
        return None
    return max(0.0, base_c - mean_c)
