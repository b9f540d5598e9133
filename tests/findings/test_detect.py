"""The rules' conditions on hand-made series, with and without each fault (findings/detect.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from findings import detect, rules

T0 = datetime(2030, 1, 7, tzinfo=UTC)  # a Monday, 00:00
H = timedelta(hours=1)
M = timedelta(minutes=1)


def cmd(hours: float, state: bool, strategy: str = "schedule") -> detect.Command:
    return detect.Command(T0 + hours * H, state, strategy)


def test_on_spans_hold_each_command_until_the_next_and_start_from_the_state_before_the_range():
    commands = [cmd(-2, True), cmd(1, False), cmd(3, True, "booking")]
    spans = detect.on_spans(commands, T0, T0 + 5 * H)
    assert spans == [
        detect.Span(T0, T0 + H, "schedule"),
        detect.Span(T0 + 3 * H, T0 + 5 * H, "booking"),
    ]


def _unoccupied(commands, occupied, preheat=timedelta()):
    return detect.heating_unoccupied(
        detect.on_spans(commands, T0, T0 + 24 * H),
        occupied,
        excused=rules.HEATING_EXCUSED,
        preheat=preheat,
        min_duration=timedelta(minutes=30),
    )


def test_heating_inside_occupancy_is_no_fault():
    occupied = [(T0 + 8 * H, T0 + 17 * H)]
    assert _unoccupied([cmd(8, True), cmd(17, False)], occupied) == []


def test_heating_left_on_after_occupancy_is_found_with_its_hours():
    occupied = [(T0 + 8 * H, T0 + 17 * H)]
    found = _unoccupied([cmd(8, True), cmd(21, False)], occupied)
    assert found == [detect.Span(T0 + 17 * H, T0 + 21 * H, "schedule")]
    assert found[0].hours == 4.0


def test_frost_override_and_optimum_start_are_reasons_to_heat_an_empty_room():
    commands = [cmd(1, True, "frost_protection"), cmd(3, True, "manual_override"), cmd(5, False)]
    assert _unoccupied(commands, []) == []
    preheat = [cmd(6.5, True, "schedule"), cmd(17, False)]
    assert _unoccupied(preheat, [(T0 + 8 * H, T0 + 17 * H)], preheat=2 * H) == []


def test_a_spell_shorter_than_the_minimum_duration_is_not_a_fault():
    occupied = [(T0 + 8 * H, T0 + 17 * H)]
    assert _unoccupied([cmd(8, True), cmd(17 + 29 / 60, False)], occupied) == []
    assert len(_unoccupied([cmd(8, True), cmd(17.5, False)], occupied)) == 1


def _flat(readings, heat):
    return detect.flatline(
        readings, heat, T0, T0 + 24 * H, window=6 * H, band_k=0.05,
        min_readings=12, min_heat=30 * M,
    )  # fmt: skip


def _series(value_at) -> list[tuple[datetime, float]]:
    return [(T0 + i * 5 * M, value_at(i)) for i in range(24 * 12)]


def test_a_stuck_sensor_while_the_valve_is_on_is_a_flatline():
    heat = [detect.Span(T0 + 7 * H, T0 + 9 * H)]
    found = _flat(_series(lambda i: 19.0 + 0.01 * (i % 2)), heat)
    assert found == [detect.Span(T0 + 6 * H, T0 + 12 * H)]


def test_a_sensor_that_warms_when_heated_is_no_flatline():
    heat = [detect.Span(T0 + 7 * H, T0 + 9 * H)]
    assert _flat(_series(lambda i: 17.0 + 0.02 * i), heat) == []


def test_a_flat_sensor_in_an_unheated_room_is_no_finding():
    """A room at a steady temperature with no heat applied is just steady."""
    assert _flat(_series(lambda i: 19.0), []) == []


def test_a_window_with_too_few_readings_is_not_judged():
    sparse = [(T0 + i * H, 19.0) for i in range(24)]  # one an hour: 6 in a window, under 12
    assert _flat(sparse, [detect.Span(T0, T0 + 24 * H)]) == []


def test_starts_count_off_to_on_only():
    commands = [cmd(0, True), cmd(0.1, True), cmd(0.2, False), cmd(0.3, True)]
    assert detect.starts(commands) == [T0, T0 + 0.3 * H]


def _cycling(every_min: float, hours: int) -> list[detect.Command]:
    out, t = [], 0.0
    while t < hours * 60:
        out += [detect.Command(T0 + t * M, True, "heating_plant")]
        out += [detect.Command(T0 + (t + every_min / 2) * M, False, "heating_plant")]
        t += every_min
    return out


def test_ten_starts_an_hour_is_short_cycling_and_four_is_not():
    fast = detect.short_cycling(detect.starts(_cycling(6, 3)), T0, T0 + 3 * H, per_hour=6)
    assert [n for _, n in fast] == [10, 10, 10]
    slow = detect.short_cycling(detect.starts(_cycling(15, 3)), T0, T0 + 3 * H, per_hour=6)
    assert slow == []


def test_exactly_the_threshold_is_not_short_cycling():
    at = detect.short_cycling(detect.starts(_cycling(10, 1)), T0, T0 + H, per_hour=6)
    assert at == []


def test_two_valves_on_at_once_are_one_zone_heated_not_two():
    a = detect.Span(T0, T0 + 2 * H, "schedule")
    b = detect.Span(T0 + H, T0 + 3 * H, "booking")
    c = detect.Span(T0 + 5 * H, T0 + 6 * H, "schedule")
    assert detect.union([c, b, a]) == [detect.Span(T0, T0 + 3 * H, "schedule"), c]


OFFICE = [(T0 + 8 * H, T0 + 17 * H, 20.0)]  # occupied 08:00–17:00 wanting 20 °C
ALL_DAY = (detect.Span(T0, T0 + 24 * H),)


def _under(value_at, heat=ALL_DAY, occupied=OFFICE):
    return detect.under_setpoint(
        _series(value_at), occupied, list(heat), margin_k=1.0, step=5 * M, min_total=2 * H
    )


def test_a_heated_zone_cold_for_three_occupied_hours_does_not_reach_its_setpoint():
    found = _under(lambda i: 18.5 if i < 11 * 12 else 20.0)  # 18.5 °C until 11:00
    assert found == [detect.Span(T0 + 8 * H, T0 + 11 * H)]


def test_a_zone_cold_only_outside_occupancy_or_within_a_kelvin_is_no_fault():
    assert _under(lambda i: 15.0 if i < 8 * 12 or i >= 17 * 12 else 20.0) == []
    assert _under(lambda i: 19.1) == []  # 0.9 K short: within the margin


def test_two_hours_under_is_the_bound_and_five_minutes_more_trips():
    assert _under(lambda i: 18.0 if i < 10 * 12 else 20.0) == []  # 08:00–10:00: exactly 2 h
    found = _under(lambda i: 18.0 if i <= 10 * 12 else 20.0)
    assert found == [detect.Span(T0 + 8 * H, T0 + 10 * H + 5 * M)]


def test_a_cold_zone_whose_valve_was_off_is_not_short_of_heat_it_was_not_given():
    assert _under(lambda i: 15.0, heat=[detect.Span(T0 + 8 * H, T0 + 9 * H)]) == []


def test_a_gap_in_the_feed_is_not_counted_as_cold_time():
    readings = [(T0 + 8 * H, 15.0), (T0 + 16 * H, 15.0)]  # two readings eight hours apart
    found = detect.under_setpoint(
        readings, OFFICE, [detect.Span(T0, T0 + 24 * H)], margin_k=1.0, step=5 * M,
        min_total=2 * H,
    )  # fmt: skip
    assert found == []


def test_off_spans_mirror_on_spans_and_the_state_before_the_first_command_is_unknown():
    commands = [cmd(2, False), cmd(4, True), cmd(6, False)]
    assert detect.off_spans(commands, T0, T0 + 8 * H) == [
        detect.Span(T0 + 2 * H, T0 + 4 * H, "schedule"),
        detect.Span(T0 + 6 * H, T0 + 8 * H, "schedule"),
    ]


def test_intersect_keeps_the_time_both_cover():
    a = [detect.Span(T0, T0 + 3 * H), detect.Span(T0 + 5 * H, T0 + 7 * H)]
    b = [detect.Span(T0 + 2 * H, T0 + 6 * H)]
    assert detect.intersect(a, b) == [
        detect.Span(T0 + 2 * H, T0 + 3 * H),
        detect.Span(T0 + 5 * H, T0 + 6 * H),
    ]


def _warming(value_at, during=ALL_DAY):
    return detect.warming(_series(value_at), list(during), rate_k_per_h=1.0, sustain=H, step=5 * M)


def _ramp(rate_k_per_h: float, from_h: float, to_h: float):
    """16 °C, rising at `rate_k_per_h` from `from_h` to `to_h`, then steady: in quarter-hour
    steps, so each value is exact in binary and a rise of exactly the rate is exactly it."""

    def value_at(i: int) -> float:
        quarters = (min(max(i, from_h * 12), to_h * 12) - from_h * 12) // 3
        return 16.0 + rate_k_per_h / 4 * quarters

    return value_at


def test_a_room_rising_one_and_a_half_kelvin_an_hour_for_two_hours_is_warming():
    [(span, rise)] = _warming(_ramp(1.5, 6, 8))
    # the hour from 05:45 already rises 1.125 K (three quarter-hour steps), and so does the
    # last one, 07:25–08:25; the rise is the span's, 16 → 19 °C
    assert (span.start, span.end) == (T0 + 5 * H + 45 * M, T0 + 8 * H + 25 * M)
    assert rise == 3.0


def test_a_room_rising_one_kelvin_an_hour_or_less_than_a_kelvin_in_all_is_not_warming():
    assert _warming(_ramp(1.0, 6, 9)) == []  # exactly the rate
    assert _warming(_ramp(1.6, 6, 6.5)) == []  # fast, but 0.8 K in all: no hour rises 1 K


def test_warming_outside_the_spans_judged_is_not_counted():
    assert _warming(_ramp(1.5, 6, 8), during=[detect.Span(T0 + 9 * H, T0 + 24 * H)]) == []
    # a span shorter than the sustain cannot hold an hour's rise
    assert _warming(_ramp(1.5, 6, 8), during=[detect.Span(T0 + 6 * H, T0 + 6.5 * H)]) == []


def _spikes(readings):
    return detect.spikes(readings, jump_k=5.0, revert_k=1.0, within=15 * M, step=5 * M)


def test_a_jump_of_over_five_kelvin_that_comes_back_within_fifteen_minutes_is_a_spike():
    spiked = {24: 27.0, 48: 12.0, 49: 12.0, 50: 12.0}  # up one point; down for 15 min
    found = _spikes(_series(lambda i: spiked.get(i, 20.0)))
    assert found == [T0 + 24 * 5 * M, T0 + 48 * 5 * M]


def test_a_jump_that_stays_or_of_five_kelvin_exactly_or_across_a_gap_is_no_spike():
    assert _spikes(_series(lambda i: 20.0 if i < 24 else 26.0)) == []  # a step that stays
    assert _spikes(_series(lambda i: 25.0 if i == 24 else 20.0)) == []  # exactly 5 K
    slow = {24: 27.0, 25: 27.0, 26: 27.0, 27: 27.0}  # back after 20 min: not within 15
    assert _spikes(_series(lambda i: slow.get(i, 20.0))) == []
    gap = [(T0, 20.0), (T0 + H, 27.0), (T0 + H + 5 * M, 20.0)]  # an hour's gap before it
    assert _spikes(gap) == []


def test_days_with_more_than_n_of_them_are_counted_from_the_start():
    times = [T0 + h * H for h in (1, 2, 3, 4)] + [T0 + 24 * H + h * H for h in (1, 2, 3)]
    found = detect.per_day(times, T0, T0 + 48 * H, more_than=3)
    assert found == [(detect.Span(T0, T0 + 24 * H), 4)]


# --- the plant rules' conditions ----------------------------------------------------------

D = timedelta(days=1)


def test_held_counts_a_passing_readings_slot_and_not_a_gap_after_it():
    readings = [(T0, 3.0), (T0 + 5 * M, 4.0), (T0 + 10 * M, 9.0), (T0 + 60 * M, 2.0)]
    spans = detect.held(readings, lambda v: v < 5, 5 * M)
    assert spans == [detect.Span(T0, T0 + 10 * M), detect.Span(T0 + 60 * M, T0 + 65 * M)]


def test_difference_pairs_two_feeds_at_the_times_both_were_read():
    a = [(T0, 60.0), (T0 + 5 * M, 61.0), (T0 + 10 * M, 62.0)]
    b = [(T0, 50.0), (T0 + 10 * M, 59.0)]
    assert detect.difference(a, b) == [(T0, 10.0), (T0 + 10 * M, 3.0)]


def test_strategy_spans_join_a_change_and_its_keep_alives_into_one_event():
    commands = [
        cmd(9, True),
        cmd(10, False, "open_window"),
        cmd(10.25, False, "open_window"),
        cmd(10.5, True),
        cmd(11, False, "schedule"),
    ]
    spans = detect.strategy_spans(commands, T0, T0 + D, state=False, strategy="open_window")
    assert spans == [detect.Span(T0 + 10 * H, T0 + 10.5 * H, "open_window")]


def test_pinned_days_at_the_maximum_lead_within_the_tolerance_or_a_rate_at_a_bound():
    def start(day: int, lead_min: float, rate: float = 30.0):
        occ = T0 + day * D + 8 * H
        return occ, occ - lead_min * M, rate

    starts = [start(0, 178), start(1, 177.9), start(2, 60, 0.5), start(2, 60, 600.0)]
    pinned, days = detect.pinned_days(
        starts, max_lead=180 * M, tolerance=2 * M, rate_bounds=rules.OPTIMUM_RATE_BOUNDS
    )
    assert days == 3 and [s.end for s in pinned] == [starts[0][0], starts[2][0], starts[3][0]]


def _gaps(values: list[float]) -> list[tuple[detect.Span, float]]:
    return [(detect.Span(T0 + i * D, T0 + (i + 1) * D), g) for i, g in enumerate(values)]


def test_growing_gap_needs_the_band_the_growth_and_the_days():
    kw = {"band_k": 2.0, "min_k_per_day": 0.25, "min_days": 4}
    assert detect.growing_gap(_gaps([0.0, -1.0, -2.0, -3.0]), **kw) == (-3.0, -1.0)
    assert detect.growing_gap(_gaps([1.25, 1.5, 1.75, 2.0]), **kw) is None  # at the band
    assert detect.growing_gap(_gaps([1.5, 1.75, 2.0, 2.25]), **kw) is not None  # 0.25 K/day
    assert detect.growing_gap(_gaps([3.0, 3.0, 3.0, 3.0]), **kw) is None  # steady offset
    assert detect.growing_gap(_gaps([1.0, 2.0, 3.0]), **kw) is None  # three days only


def test_daily_means_leave_out_a_day_with_too_few_readings():
    readings = [(T0 + i * 5 * M, 20.0) for i in range(288)] + [(T0 + D, 25.0)]
    assert detect.daily_means(readings, T0, T0 + 2 * D, min_readings=144) == [
        (detect.Span(T0, T0 + D), 20.0)
    ]
