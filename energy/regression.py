"""The performance line (ISO 50006 energy baseline, IPMVP option C): consumption regressed on
heating degree days by ordinary least squares. Pure functions, no Django (docs/ENERGY.md).

    kWh per period = base_load + slope x HDD per period

base_load is the weather-independent use per period, slope the kWh per degree day, R² the
share of the variance the line explains. CUSUM is the running sum of actual - expected.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

MIN_POINTS = 3  # a line through fewer points says nothing about its fit


@dataclass(frozen=True)
class Line:
    slope: float  # kWh per degree day
    base_load: float  # kWh per period at zero degree days
    r2: float | None  # None when every y is equal (no variance to explain)
    n: int

    def expected(self, hdd: float) -> float:
        return self.base_load + self.slope * hdd


def fit_line(x: Sequence[float | None], y: Sequence[float | None]) -> Line | None:
    """Least-squares line through the pairs where both x and y are known; None if < 3 pairs."""
    xa = np.asarray(x, dtype=np.float64)  # None becomes NaN
    ya = np.asarray(y, dtype=np.float64)
    if xa.shape != ya.shape:
        raise ValueError(f"x and y differ in length: {xa.shape} and {ya.shape}")
    ok = np.isfinite(xa) & np.isfinite(ya)
    if int(ok.sum()) < MIN_POINTS:
        return None
    xs, ys = xa[ok], ya[ok]
    design = np.column_stack((xs, np.ones_like(xs)))
    (slope, intercept), *_ = np.linalg.lstsq(design, ys, rcond=None)
    residual = ys - (slope * xs + intercept)
    ss_tot = float(((ys - ys.mean()) ** 2).sum())
    ss_res = float((residual**2).sum())
    r2 = None if ss_tot == 0 else 1.0 - ss_res / ss_tot
    return Line(float(slope), float(intercept), r2, len(xs))


def cusum(actual: Sequence[float | None], expected: Sequence[float | None]) -> list[float | None]:
    """Running sum of actual - expected; a period missing either is None and adds nothing."""
    total, out = 0.0, []
    for a, e in zip(actual, expected, strict=True):
        if a is None or e is None:
            out.append(None)
            continue
        total += a - e
        out.append(total)
    return out
