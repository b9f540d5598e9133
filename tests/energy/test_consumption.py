"""energy/consumption.py against hand-computed values: DST days, a meter reset, gaps."""

from __future__ import annotations

from datetime import date

import pytest

from energy.consumption import (
    ESTIMATED,
    GAP,
    MEASURED,
    combine,
    cumulative_usage,
    group_days,
    local_bounds,
    power_usage,
)

LONDON = "Europe/London"
H = 3600


def test_local_bounds_on_both_dst_days_are_23_and_25_hours():
    spring = local_bounds(date(2024, 3, 31), date(2024, 3, 31), LONDON)
    autumn = local_bounds(date(2024, 10, 27), date(2024, 10, 27), LONDON)
    assert spring[1] - spring[0] == 23 * H
    assert autumn[1] - autumn[0] == 25 * H
    # 2024-03-31 00:00 GMT is 1711843200
    assert spring[0] == 1711843200


def _hourly(bounds):
    return list(range(bounds[0], bounds[-1], H))


def test_power_constant_1kw_gives_23_24_25_kwh():
    bounds = local_bounds(date(2024, 3, 30), date(2024, 3, 31), LONDON)
    t = _hourly(bounds)
    usage = power_usage(t, [1000.0] * len(t), H, bounds, max_fill_s=0)
    assert [u.value for u in usage] == [24.0, 23.0]
    assert all(u.status == MEASURED for u in usage)
    bounds = local_bounds(date(2024, 10, 27), date(2024, 10, 28), LONDON)
    t = _hourly(bounds)
    usage = power_usage(t, [1000.0] * len(t), H, bounds, max_fill_s=0)
    assert [u.value for u in usage] == [25.0, 24.0]


def test_cumulative_one_kwh_an_hour_on_dst_days():
    bounds = local_bounds(date(2024, 10, 26), date(2024, 10, 27), LONDON)
    t = list(range(bounds[0], bounds[-1] + 1, H))
    regs = [1000.0 + i for i in range(len(t))]
    usage = cumulative_usage(t, regs, bounds, resolution_s=H, max_fill_s=0)
    assert [u.value for u in usage] == [24.0, 25.0]
    bounds = local_bounds(date(2024, 3, 31), date(2024, 3, 31), LONDON)
    t = list(range(bounds[0], bounds[-1] + 1, H))
    usage = cumulative_usage(
        t, [float(i) for i in range(len(t))], bounds, resolution_s=H, max_fill_s=0
    )
    assert usage[0].value == 23.0


def test_meter_reset_counts_on_from_the_new_value():
    # Readings at 0..6 h: 100, 102, 105, [reset] 1, 4, 6, 10. Before the reset: 5 kWh; the
    # step across the drop (105 -> 1) counts 0; after it 1 -> 10 = 9 kWh. Total 14.
    t = [i * H for i in range(7)]
    regs = [100, 102, 105, 1, 4, 6, 10]
    usage = cumulative_usage(t, regs, [0, 3 * H, 6 * H], resolution_s=H, max_fill_s=0)
    assert [u.value for u in usage] == [5.0, 9.0]
    whole = cumulative_usage(t, regs, [0, 6 * H], resolution_s=H, max_fill_s=0)
    assert whole[0].value == 14.0  # never 14 - 90 (a negative day) nor 10 - 100
    assert whole[0].status == MEASURED


def test_cumulative_edge_between_sparse_readings_is_estimated_then_gap():
    # Readings at 0 h (0 kWh) and 10 h (20 kWh), edge at 4 h: 8 kWh by the straight line.
    t, regs = [0, 10 * H], [0.0, 20.0]
    est = cumulative_usage(t, regs, [0, 4 * H], resolution_s=H, max_fill_s=12 * H)
    assert est[0].value == pytest.approx(8.0)
    assert est[0].status == ESTIMATED
    gap = cumulative_usage(t, regs, [0, 4 * H], resolution_s=H, max_fill_s=5 * H)
    assert gap[0].value is None and gap[0].status == GAP


def test_cumulative_hole_inside_a_period_is_still_measured():
    # The register counts through the hole: the edges are what matter.
    t = [0, H, 5 * H, 6 * H]
    usage = cumulative_usage(t, [0, 1, 9, 10], [0, 6 * H], resolution_s=H, max_fill_s=0)
    assert usage[0].value == 10.0 and usage[0].status == MEASURED


def test_power_hole_filled_on_a_line_is_estimated_and_long_hole_is_a_gap():
    # 6 hourly windows: 1000, 2000, -, -, 5000, 6000 W: the line fills 3000, 4000 -> 21 kWh.
    w = [1000, 2000, None, None, 5000, 6000]
    t = [i * H for i in range(6)]
    filled = power_usage(t, w, H, [0, 6 * H], max_fill_s=2 * H)
    assert filled[0].value == pytest.approx(21.0)
    assert filled[0].status == ESTIMATED
    hole = power_usage(t, w, H, [0, 6 * H], max_fill_s=1 * H)
    assert hole[0].value is None and hole[0].status == GAP


def test_power_window_missing_at_the_edge_is_a_gap_not_a_guess():
    t = [i * H for i in range(1, 6)]
    usage = power_usage(t, [1000.0] * 5, H, [0, 6 * H], max_fill_s=10 * H)
    assert usage[0].status == GAP


def test_group_days_into_weeks_and_months_names_missing_days():
    days = [
        (date(2024, 1, 29), 1.0, MEASURED),  # Monday
        (date(2024, 1, 30), 2.0, ESTIMATED),
        (date(2024, 1, 31), 3.0, MEASURED),
        (date(2024, 2, 1), None, GAP),
        (date(2024, 2, 2), 5.0, MEASURED),
    ]
    assert group_days(days, "week") == [(date(2024, 1, 29), None, GAP, 1)]
    assert group_days(days, "month") == [
        (date(2024, 1, 1), 6.0, ESTIMATED, 0),
        (date(2024, 2, 1), None, GAP, 1),
    ]
    assert group_days(days, "year")[0][3] == 1


def test_combine_is_a_signed_sum_and_a_gap_in_any_term_is_a_gap():
    main = [(10.0, MEASURED), (12.0, ESTIMATED), (9.0, MEASURED)]
    sub = [(4.0, MEASURED), (5.0, MEASURED), (None, GAP)]
    assert combine([(1, main), (-1, sub)]) == [(6.0, MEASURED), (7.0, ESTIMATED), (None, GAP)]
