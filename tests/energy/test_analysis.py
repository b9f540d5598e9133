"""Degree days, the performance line, CUSUM and the DEC rating against hand-computed values."""

from __future__ import annotations

import pytest

from energy.benchmarks import dec_grade, operational_rating, per_m2
from energy.degree_days import daily_means, heating_degree_days
from energy.regression import cusum, fit_line

H = 3600


def test_hdd_is_base_minus_mean_and_never_negative():
    assert heating_degree_days(5.5) == pytest.approx(10.0)
    assert heating_degree_days(20.0) == 0.0
    assert heating_degree_days(10.0, base_c=18.0) == pytest.approx(8.0)
    assert heating_degree_days(None) is None


def test_daily_mean_needs_three_quarters_of_the_hours():
    t = [i * H for i in range(24)]
    temps = [4.0] * 12 + [8.0] * 12
    assert daily_means(t, temps, [0, 24 * H]) == [6.0]
    sparse = [4.0] * 17 + [None] * 7  # 17 of 24 hours < 18
    assert daily_means(t, sparse, [0, 24 * H]) == [None]
    enough = [4.0] * 18 + [None] * 6
    assert daily_means(t, enough, [0, 24 * H]) == [4.0]


def test_fit_line_against_hand_computed_values():
    # x = 0,2,4,6; y = 10,13,19,20: Sxy = 36, Sxx = 20 -> slope 1.8, base 15.5 - 5.4 = 10.1;
    # residuals -0.1,-0.7,1.7,-0.9: SSres 4.2, SStot 69 -> R² = 1 - 4.2/69.
    line = fit_line([0, 2, 4, 6], [10, 13, 19, 20])
    assert line.slope == pytest.approx(1.8)
    assert line.base_load == pytest.approx(10.1)
    assert line.r2 == pytest.approx(1 - 4.2 / 69)
    assert line.n == 4
    assert line.expected(5) == pytest.approx(19.1)


def test_fit_line_skips_unknowns_and_needs_three_points():
    assert fit_line([1, None, 3], [2, 5, None]) is None
    line = fit_line([0, 1, None, 2], [1, 3, 100, 5])
    assert (line.slope, line.base_load, line.r2) == (pytest.approx(2), pytest.approx(1), 1.0)
    assert fit_line([1, 2, 3], [4, 4, 4]).r2 is None


def test_cusum_runs_over_known_periods_only():
    assert cusum([10, 8, None, 7], [10, 10, 10, 10]) == [0.0, -2.0, None, -5.0]


def test_operational_rating_of_a_typical_office_is_100():
    # General office typical: 95 kWh/m² electricity, 120 fossil. With factors 0.2 and 0.18 the
    # typical is 19 + 21.6 = 40.6 kg/m²; 100 m² using 9500 + 12000 kWh is exactly typical.
    assert operational_rating(9500, 12000, 100, "general_office", 0.2, 0.18) == pytest.approx(100)
    assert operational_rating(4750, 6000, 100, "general_office", 0.2, 0.18) == pytest.approx(50)
    assert operational_rating(1, 1, 100, "no_such_category", 0.2, 0.18) is None
    assert dec_grade(50) == "B" and dec_grade(100) == "D" and dec_grade(151) == "G"
    assert per_m2(1000, 50) == 20 and per_m2(1000, None) is None
