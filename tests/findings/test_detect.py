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
