"""The heating curve, the PI mixing loop, three-point pulses and output scaling, by hand."""

from __future__ import annotations

import pytest

from control.engine.weather import (
    CLOSE,
    OPEN,
    ValveState,
    heating_curve,
    pi_step,
    three_point_pulse,
    to_raw,
)


def test_the_curve_gives_room_plus_slope_times_the_difference():
    # 20 + 0 + 1.5 × (20 − 0) = 50; at −10 °C: 20 + 1.5 × 30 = 65.
    assert heating_curve(0.0, 20.0, 1.5, 0.0, 20.0, 80.0) == pytest.approx(50.0)
    assert heating_curve(-10.0, 20.0, 1.5, 0.0, 20.0, 80.0) == pytest.approx(65.0)


def test_the_parallel_shift_adds_to_every_point():
    assert heating_curve(0.0, 20.0, 1.5, 3.0, 20.0, 80.0) == pytest.approx(53.0)


def test_room_influence_raises_the_flow_for_a_cold_room_only_when_the_room_is_known():
    # 1 K below set point × 2 = +2 K.
    assert heating_curve(0.0, 20.0, 1.5, 0.0, 20.0, 80.0, 2.0, 19.0) == pytest.approx(52.0)
    assert heating_curve(0.0, 20.0, 1.5, 0.0, 20.0, 80.0, 2.0, None) == pytest.approx(50.0)


def test_the_curve_is_clamped_to_flow_min_and_max():
    assert heating_curve(-30.0, 20.0, 2.0, 0.0, 20.0, 45.0) == 45.0
    assert heating_curve(25.0, 20.0, 1.5, 0.0, 25.0, 80.0) == 25.0


def test_a_pi_step_is_kp_times_error_plus_the_integral():
    # Kp 5 %/K, Ti 100 s -> Ki 0.05 %/(K·s). Error 10 K over 30 s: P 50, I 0 + 0.05×10×30 = 15.
    step = pi_step(50.0, 40.0, 5.0, 100.0, 0.0, 30.0)
    assert step.proportional == pytest.approx(50.0)
    assert step.integral == pytest.approx(15.0)
    assert step.output_pct == pytest.approx(65.0)


def test_the_integral_carries_from_the_previous_step():
    step = pi_step(50.0, 48.0, 5.0, 100.0, 15.0, 30.0)  # P 10, I 15 + 0.05×2×30 = 18
    assert step.output_pct == pytest.approx(28.0)
    assert step.integral == pytest.approx(18.0)


def test_anti_windup_clamps_the_integral_at_the_output_limit():
    # A cold flow for an hour: without clamping the integral would reach 0.05×20×3600 = 3600 %.
    integral = 0.0
    for _ in range(120):
        step = pi_step(60.0, 40.0, 5.0, 100.0, integral, 30.0)
        integral = step.integral
    assert step.output_pct == 100.0
    assert integral == pytest.approx(100.0)
    # The flow overshoots by 2 K: P −10, I 100 − 0.05×2×30 = 97 -> 87 % at once (an unclamped
    # integral of 3600 % would hold the valve fully open for many more minutes).
    step = pi_step(60.0, 62.0, 5.0, 100.0, integral, 30.0)
    assert step.output_pct == pytest.approx(87.0)
    assert step.integral == pytest.approx(97.0)


def test_the_output_never_goes_below_zero():
    step = pi_step(40.0, 70.0, 5.0, 100.0, 0.0, 30.0)
    assert step.output_pct == 0.0
    assert step.integral == 0.0


def test_a_pulse_is_proportional_to_the_movement():
    # 120 s stroke: 0 -> 25 % is 30 s; at most 20 s a tick, so 20 s and ~16.7 %.
    pulse = three_point_pulse(25.0, ValveState(0.0), 120.0, 20.0, 2.0)
    assert (pulse.direction, pulse.seconds) == (OPEN, 20.0)
    assert pulse.after.position_pct == pytest.approx(100 * 20 / 120)
    pulse = three_point_pulse(25.0, pulse.after, 120.0, 20.0, 2.0)
    assert pulse.seconds == pytest.approx(10.0)
    assert pulse.after.position_pct == pytest.approx(25.0)


def test_a_pulse_closes_when_the_target_is_below_the_position():
    pulse = three_point_pulse(40.0, ValveState(50.0), 120.0, 20.0, 2.0)
    assert (pulse.direction, pulse.seconds) == (CLOSE, pytest.approx(12.0))
    assert pulse.after.position_pct == pytest.approx(40.0)


def test_a_movement_under_the_minimum_pulse_waits():
    pulse = three_point_pulse(51.0, ValveState(50.0), 120.0, 20.0, 2.0)  # 1.2 s < 2 s
    assert pulse.direction == 0
    assert pulse.after.position_pct == 50.0


def test_an_end_position_is_driven_a_full_stroke_then_synchronised():
    # The estimate says 95 %, the valve may be anywhere: drive open a full 120 s in 20 s steps.
    state = ValveState(95.0)
    total = 0.0
    for _ in range(6):
        pulse = three_point_pulse(100.0, state, 120.0, 20.0, 2.0)
        assert pulse.direction == OPEN
        total += pulse.seconds
        state = pulse.after
    assert total == pytest.approx(120.0)
    assert state.synced_end == 100.0 and state.position_pct == 100.0
    assert three_point_pulse(100.0, state, 120.0, 20.0, 2.0).direction == 0
    # Moving away clears the synchronisation.
    assert three_point_pulse(50.0, state, 120.0, 20.0, 2.0).after.synced_end is None


def test_raw_counts_scale_linearly_and_clamp():
    assert to_raw(50.0, 0.0, 100.0, 0, 10000) == 5000
    assert to_raw(45.0, 0.0, 100.0, 0, 27648) == 12442  # Siemens S7 analogue 0-27648
    # 4-20 mA module 4000-20000 counts: 25 % is 8000.
    assert to_raw(25.0, 0.0, 100.0, 4000, 20000) == 8000
    assert to_raw(150.0, 0.0, 100.0, 0, 10000) == 10000
    assert to_raw(-5.0, 0.0, 100.0, 0, 10000) == 0
