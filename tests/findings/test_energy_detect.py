"""The energy rules' pure conditions at their edges (findings/energy_detect.py): no Django."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from findings import energy_detect as ed

D0 = date(2030, 1, 7)


def _days(rises: list[float | None], expected: float = 100.0):
    """(day, CUSUM, expected) from each day's actual - expected (None: a gap)."""
    out, total = [], 0.0
    for i, r in enumerate(rises):
        if r is None:
            out.append((D0 + timedelta(days=i), None, None))
            continue
        total += r
        out.append((D0 + timedelta(days=i), total, expected))
    return out


def test_a_run_exactly_min_days_long_trips_and_one_shorter_does_not():
    assert [r.days for r in ed.cusum_rising(_days([6, 6, 6, 6]), min_days=4, day_margin=0.05)] == [
        4
    ]
    assert ed.cusum_rising(_days([6, 6, 6]), min_days=4, day_margin=0.05) == []


def test_a_day_exactly_at_the_margin_ends_a_run_and_a_gap_does_too():
    assert ed.cusum_rising(_days([6, 6, 5, 6, 6]), min_days=3, day_margin=0.05) == []
    assert ed.cusum_rising(_days([6, 6, None, 6, 6]), min_days=3, day_margin=0.05) == []
    # after a gap the CUSUM carries on from where it was, so the rise is judged day by day
    [run] = ed.cusum_rising(_days([None, 6, 6, 6]), min_days=3, day_margin=0.05)
    assert run.excess == 18 and run.first == D0 + timedelta(days=1)


def test_a_base_load_rise_exactly_at_both_bounds_trips():
    bounds = {"min_weeks": 2, "min_rise_kw": 0.5, "min_rise_ratio": 0.125}  # 0.125 × 4 = 0.5
    found = ed.base_load_rise(4.5, [4.0, 4.0], **bounds)
    assert found is not None and found.rise_kw == 0.5
    assert ed.base_load_rise(4.49, [4.0, 4.0], **bounds) is None
    assert ed.base_load_rise(9.0, [4.0, None], **bounds) is None  # one week known: too few


def test_a_percentile_of_too_few_hours_is_none():
    assert ed.low_percentile([1.0] * 23, 10, 24) is None
    assert ed.low_percentile([1.0] * 24, 10, 24) == 1.0


def test_out_of_hours_is_weekends_and_weekday_nights():
    monday = datetime(2030, 1, 7, tzinfo=UTC)
    hours = [monday + timedelta(hours=h) for h in range(168)]
    assert sum(ed.out_of_hours(t, opens=7, closes=19) for t in hours) == 108
    assert not ed.out_of_hours(monday.replace(hour=7), opens=7, closes=19)
    assert ed.out_of_hours(monday.replace(hour=19), opens=7, closes=19)


def test_an_envelope_with_no_daylight_is_not_judged():
    t = datetime(2030, 1, 7, 12, tzinfo=UTC)
    assert ed.envelope_ratio([(t, 1.0)], [(t, 0.0)], daylight_share=0.1) is None


def test_a_sibling_share_exactly_at_the_bound_is_no_finding():
    assert ed.sibling_shortfall(40, 100, [0.8], min_share=0.5) is None  # 40 % = 0.5 × 80 %
    found = ed.sibling_shortfall(39, 100, [0.8], min_share=0.5)
    assert found is not None and found.missing_kwh == 80 - 39


def test_a_turbine_without_a_history_of_running_is_not_judged():
    t = datetime(2030, 1, 7, tzinfo=UTC)
    idle = [(t + timedelta(hours=h), 0.0) for h in range(10)]
    flow = [(t + timedelta(hours=h), 80.0) for h in range(10)]
    assert ed.absent_with_flow(idle, flow, idle, flow, running_share=0.05, flow_quantile=10,
                               min_hours=3, flow_band=0.2) is None  # fmt: skip


def test_two_idle_hours_with_water_are_not_yet_a_stop_three_are():
    t0 = datetime(2030, 1, 7, tzinfo=UTC)
    before = [(t0 - timedelta(hours=h), 5.0) for h in range(1, 50)]
    flow_before = [(t, 80.0) for t, _ in before]
    flow = [(t0 + timedelta(hours=h), 80.0) for h in range(6)]

    def power(idle: int):
        return [(t, 0.0 if i < idle else 5.0) for i, (t, _f) in enumerate(flow)]

    args = {"running_share": 0.05, "flow_quantile": 10, "min_hours": 3, "flow_band": 0.2}
    assert ed.absent_with_flow(power(2), flow, before, flow_before, **args) is None
    found = ed.absent_with_flow(power(3), flow, before, flow_before, **args)
    assert found is not None and len(found.hours) == 3 and found.missing_kwh == 15.0


# --- the short looks: the last night's base load, a bright day's PV yield ---------------------

NIGHT_BARS = {"q": 10, "min_hours": 10, "above_q": 90, "min_rise_kw": 0.5, "min_rise_ratio": 0.125}
QUIET_NIGHTS = [[4.0] * 12] * 20


def _night(night, nights=QUIET_NIGHTS) -> float | None:
    found = ed.night_base_rise(night, nights, **NIGHT_BARS)
    return None if found is None else found.now_kw


def test_a_night_risen_exactly_at_both_bounds_trips_and_just_under_does_not():
    found = ed.night_base_rise([4.5] * 12, QUIET_NIGHTS, **NIGHT_BARS)
    assert found == ed.BaseLoad(4.5, 4.0, 0)
    assert _night([4.49] * 12) is None


def test_a_night_needs_its_hours_and_a_history_of_nights():
    assert _night([9.0] * 10) == 9.0
    assert _night([9.0] * 9) is None
    assert _night([9.0] * 12, []) is None
    # nights with too few hours of data are no history
    assert _night([9.0] * 12, [[4.0] * 9] * 20) is None


def test_a_cleaners_hour_or_a_noisy_night_is_not_a_rise():
    cleaner = [4.0] * 11 + [12.0]
    assert _night(cleaner) is None
    # noise about a higher mean (5 kW): its low hours are still at the old base
    noisy = [4.0, 6.0] * 6
    assert _night(noisy) is None


def test_a_night_no_higher_than_the_nights_a_meter_has_had_before_is_not_a_rise():
    # frost heaters on one night in five: 5 kW nights are this meter's own, so the bar is
    # 5 kW and the rise is judged above it (0.5 kW and 12.5 % of 5 kW: 5.625 kW); the cost
    # is against the median night (4 kW)
    varied = ([[4.0] * 12] * 4 + [[5.0] * 12]) * 4
    assert _night([5.0] * 12, varied) is None
    assert _night([5.6] * 12, varied) is None
    found = ed.night_base_rise([5.625] * 12, varied, **NIGHT_BARS)
    assert found == ed.BaseLoad(5.625, 4.0, 0)


def test_a_weekday_night_above_the_weekends_is_not_a_rise():
    # the demo's Lecture block: weekday nights at 1.35 kW (a 4 % day-to-day spread), weekend
    # nights at 0.45 kW, so the weeks' 10th percentile is the weekend's; a weekday night at
    # the top of its own spread is the building, and a heater left on (+1 kW) is not
    weekday = [[1.35 * (1 + 0.04 * ((i * 7) % 5 - 2) / 2)] * 12 for i in range(15)]
    nights = weekday + [[0.45] * 12] * 5
    top = max(n[0] for n in weekday)
    assert _night([top * 1.02] * 12, nights) is None
    found = ed.night_base_rise([2.35] * 12, nights, **NIGHT_BARS)
    assert found is not None and found.before_kw == pytest.approx(1.35 * 0.98)  # the median night


def test_the_nights_before_are_cut_from_the_end():
    assert ed.chunks([1.0, 2.0, 3.0, 4.0, 5.0], 2) == [[2.0, 3.0], [4.0, 5.0]]
    assert ed.chunks([1.0], 2) == []


T9 = datetime(2030, 1, 13, 9, tzinfo=UTC)  # a Sunday morning
ENVELOPE = {9: 1.0, 10: 2.0, 11: 3.0, 12: 4.0, 13: 4.0, 14: 3.0, 15: 2.0, 16: 1.0}
DAY_BARS = {"bright_share": 0.6, "daylight_share": 0.1, "min_hours": 3, "min_share": 0.8}


def _day(shares: list[float], envelope=ENVELOPE):
    """Hourly kW from 09:00: each hour's share of the envelope."""
    return [(T9 + timedelta(hours=i), s * envelope[9 + i]) for i, s in enumerate(shares)]


def test_a_string_at_half_on_three_bright_hours_is_short_and_on_two_is_not_judged():
    found = ed.bright_hours_shortfall(_day([0.5] * 3), ENVELOPE, _day([1.0] * 3), ENVELOPE,
                                      **DAY_BARS)  # fmt: skip
    assert found is not None and found.share == 0.5 and len(found.hours) == 3
    assert ed.bright_hours_shortfall(_day([0.5] * 2), ENVELOPE, _day([1.0] * 2), ENVELOPE,
                                     **DAY_BARS) is None  # fmt: skip


def test_a_share_exactly_at_the_bound_is_no_shortfall():
    assert ed.bright_hours_shortfall(_day([0.8] * 8), ENVELOPE, _day([1.0] * 8), ENVELOPE,
                                     **DAY_BARS) is None  # fmt: skip
    found = ed.bright_hours_shortfall(_day([0.79] * 8), ENVELOPE, _day([1.0] * 8), ENVELOPE,
                                      **DAY_BARS)  # fmt: skip
    assert found is not None and round(found.share, 2) == 0.79


def test_a_grey_day_is_not_judged_and_a_cloud_over_one_string_for_an_hour_does_not_decide():
    # the sibling at 59 % of its envelope all day (under the 60 % of a bright hour): the
    # array at 20 % of its own is no evidence
    assert ed.bright_hours_shortfall(_day([0.2] * 8), ENVELOPE, _day([0.59] * 8), ENVELOPE,
                                     **DAY_BARS) is None  # fmt: skip
    # a bright day; a cloud over this array alone on two of eight hours
    passing = [1.0, 0.3, 1.0, 1.0, 0.3, 1.0, 1.0, 1.0]
    assert ed.bright_hours_shortfall(_day(passing), ENVELOPE, _day([1.0] * 8), ENVELOPE,
                                     **DAY_BARS) is None  # fmt: skip


def test_dawn_and_dusk_hours_are_not_judged():
    # an envelope whose 09:00 and 16:00 are under 10 % of its peak: those hours (where a
    # low sun on one array and not the other means little) are left out
    dim = ENVELOPE | {9: 0.3, 16: 0.3}
    found = ed.bright_hours_shortfall(_day([0.5] * 8, dim), dim, _day([1.0] * 8, dim), dim,
                                      **DAY_BARS)  # fmt: skip
    assert found is not None and [t.hour for t in found.hours] == [10, 11, 12, 13, 14, 15]
