"""Conversions against published reference values."""

from __future__ import annotations

import math

import pytest

from sensors import conversions as cv

# --- RTD: IEC 60751 table values -----------------------------------------------------------


@pytest.mark.parametrize(
    ("ohms", "celsius"),
    [
        (100.0, 0.0),
        (138.5055, 100.0),
        (18.52, -200.0),
        (60.26, -100.0),
        (80.31, -50.0),
        (175.86, 200.0),
        (280.98, 500.0),
    ],
)
def test_pt100_matches_iec_60751_table(ohms, celsius):
    # The table gives ohms to 0.01 Ω, about 0.013 °C of rounding.
    assert cv.rtd_temperature(ohms) == pytest.approx(celsius, abs=0.015)


def test_pt1000_is_pt100_scaled_by_ten():
    assert cv.rtd_temperature(1385.055, r0=1000) == pytest.approx(100.0, abs=1e-3)
    assert cv.convert("rtd_pt1000", 185.2, {}) == pytest.approx(-200.0, abs=0.01)


def test_rtd_inverse_round_trips_the_forward_equation_below_zero():
    for t in (-199.0, -120.5, -30.0, -0.5):
        assert cv.rtd_temperature(cv.rtd_resistance(t)) == pytest.approx(t, abs=1e-6)


def test_rtd_rejects_non_positive_resistance():
    with pytest.raises(cv.ConversionError):
        cv.rtd_temperature(0.0)


# --- NTC thermistors -------------------------------------------------------------------------

# Widely published Steinhart–Hart coefficients for a 10 kΩ (25 °C) NTC thermistor.
SH_10K = {"a": 1.129148e-3, "b": 2.34125e-4, "c": 8.76741e-8}


def test_steinhart_hart_gives_25c_at_10k_and_0c_at_32k65():
    assert cv.ntc_steinhart_hart_temperature(10_000, **SH_10K) == pytest.approx(25.0, abs=0.01)
    # 32.65 kΩ is the 0 °C entry of the standard 10 kΩ curve.
    assert cv.ntc_steinhart_hart_temperature(32_650, **SH_10K) == pytest.approx(0.0, abs=0.05)
    assert cv.convert("ntc_steinhart", 10_000, SH_10K) == pytest.approx(25.0, abs=0.01)


def test_beta_equation_gives_t0_at_r0_and_t50_at_the_datasheet_r50():
    # Datasheets define B25/50 = ln(R25/R50) / (1/298.15 − 1/323.15).
    beta = 3950.0
    r50 = 10_000 * math.exp(beta * (1 / 323.15 - 1 / 298.15))
    assert cv.ntc_beta_temperature(10_000, 10_000, beta) == pytest.approx(25.0, abs=1e-9)
    assert cv.ntc_beta_temperature(r50, 10_000, beta) == pytest.approx(50.0, abs=1e-9)
    assert cv.convert("ntc_beta", r50, {"r25": 10_000, "beta": beta}) == pytest.approx(50.0)


def test_steinhart_hart_needs_its_coefficients():
    with pytest.raises(cv.ConversionError, match="a, b and c"):
        cv.convert("ntc_steinhart", 10_000, {"a": 1e-3})


# --- Type K thermocouple: NIST ITS-90 table (reference junction 0 °C) ---------------------

NIST_K_TABLE = [  # (°C, mV)
    (-200, -5.891),
    (-100, -3.554),
    (0, 0.000),
    (25, 1.000),
    (100, 4.096),
    (300, 12.209),
    (500, 20.644),
    (800, 33.275),
    (1000, 41.276),
    (1372, 54.886),
]


@pytest.mark.parametrize(("celsius", "mv"), NIST_K_TABLE)
def test_type_k_forward_polynomial_matches_nist_table(celsius, mv):
    assert cv.type_k_emf(celsius) == pytest.approx(mv, abs=0.0015)


@pytest.mark.parametrize(("celsius", "mv"), NIST_K_TABLE)
def test_type_k_inverse_polynomial_matches_nist_table(celsius, mv):
    # NIST states the inverse is within −0.05…+0.06 °C over its range.
    assert cv.type_k_temperature(mv) == pytest.approx(celsius, abs=0.07)


def test_type_k_cold_junction_compensation_adds_the_junction_emf():
    # Hot junction 100 °C, cold junction 25 °C: the meter sees 4.096 − 1.000 mV.
    assert cv.type_k_temperature(3.096, cold_junction_c=25.0) == pytest.approx(100.0, abs=0.05)
    assert cv.convert("thermocouple_k", 3.096, {"cold_junction": 25}) == pytest.approx(
        100.0, abs=0.05
    )


def test_type_k_refuses_emf_outside_its_range():
    with pytest.raises(cv.ConversionError, match="outside the type K range"):
        cv.type_k_temperature(60.0)


# --- CT power ----------------------------------------------------------------------------------


def test_ct_burden_voltage_to_power():
    # SCT-013-000 (2000 turns) on a 22 Ω burden: 100 A primary -> 50 mA -> 1.1 V.
    assert cv.ct_current(1.1, 22.0, 2000.0) == pytest.approx(100.0)
    params = {"input": "burden_volts", "voltage": 240, "power_factor": 0.9}
    assert cv.convert("power", 1.1, params) == pytest.approx(100 * 240 * 0.9)


def test_ct_irms_and_watts_inputs():
    assert cv.convert("power", 10.0, {"input": "irms", "voltage": 230}) == pytest.approx(2300.0)
    assert cv.convert("power", 1234.0, {}) == 1234.0
    with pytest.raises(cv.ConversionError, match="input"):
        cv.convert("power", 1.0, {"input": "amps?"})


def test_calibration_is_scale_then_offset():
    assert cv.calibrate(20.0, 1.5, -2.0) == pytest.approx(28.0)


def test_non_numeric_param_is_reported():
    with pytest.raises(cv.ConversionError, match="'r0'"):
        cv.convert("rtd_pt100", 100.0, {"r0": "100"})


# --- Pulse counters ----------------------------------------------------------------------------


def test_pulse_delta_counts_up():
    assert cv.pulse_delta(100, 130) == (30, False)


@pytest.mark.parametrize("bits", [16, 32])
def test_pulse_counter_wrap_is_not_a_reset(bits):
    top = (1 << bits) - 6
    assert cv.pulse_delta(top, 4, bits) == (10, False)


def test_node_reboot_counts_pulses_since_boot():
    assert cv.pulse_delta(50_000, 7, bits=32) == (7, True)
    assert cv.pulse_delta(1000, 5, bits=16) == (5, True)


def test_pulse_count_must_fit_the_counter():
    with pytest.raises(cv.ConversionError):
        cv.pulse_delta(0, 70_000, bits=16)


def test_anemometer_pulses_per_second_to_metres_per_second():
    # Common cup anemometer: one switch closure per second = 2.4 km/h = 0.6667 m/s,
    # i.e. 1.5 pulses per metre of wind run.
    first = cv.pulse_step(None, 1000, 200, pulses_per_unit=1.5)
    assert first is not None and first.rate is None
    second = cv.pulse_step(first.state, 1010, 230, pulses_per_unit=1.5)
    assert second is not None
    assert second.rate == pytest.approx(2.0)  # 3 Hz × 0.6667 m/s
    assert second.state.total == pytest.approx(20.0)  # metres of wind run


def test_energy_meter_total_and_rate_across_a_reboot():
    ppu = 1000.0  # 1000 imp/kWh
    s = cv.pulse_step(None, 0, 10, pulses_per_unit=ppu, rate_scale=3600).state
    r = cv.pulse_step(s, 3600, 510, pulses_per_unit=ppu, rate_scale=3600)
    assert r.rate == pytest.approx(0.5)  # kW
    assert r.state.total == pytest.approx(0.5)  # kWh
    # Node rebooted: counter back to 250. Held until the next reading agrees (it could be a
    # glitch); then the 260 pulses since boot count.
    held = cv.pulse_step(r.state, 7200, 250, pulses_per_unit=ppu, rate_scale=3600)
    assert not held.reset and held.state.total == pytest.approx(0.5) and held.rate is None
    r2 = cv.pulse_step(held.state, 7210, 260, pulses_per_unit=ppu, rate_scale=3600)
    assert r2.reset and r2.state.total == pytest.approx(0.76)


def test_pulse_reading_not_newer_than_state_is_ignored():
    s = cv.pulse_step(None, 100, 10).state
    assert cv.pulse_step(s, 100, 20) is None
    assert cv.pulse_step(s, 90, 20) is None


def steps(counts, bits=32, max_rate=cv.DEFAULT_MAX_PULSE_RATE, dt=10):
    """Totals after each reading of `counts`, one every `dt` seconds."""
    state, totals = None, []
    for i, c in enumerate(counts):
        state = cv.pulse_step(state, i * dt, c, bits=bits, max_rate=max_rate).state
        totals.append(state.total)
    return totals


def test_a_single_zero_between_counts_is_a_glitch_not_a_reboot():
    # Was: the 0 counted as a reboot, then 5010 as 5010 pulses since boot (a spike).
    assert steps([5000, 5005, 0, 5010, 5012]) == [0, 5, 5, 10, 12]


def test_a_jump_far_beyond_the_rate_limit_is_a_glitch():
    assert steps([5000, 5005, 900_000, 5010], max_rate=100) == [0, 5, 5, 10]


def test_a_reboot_is_confirmed_by_the_next_reading_and_loses_no_pulse():
    # 5000, reboot (3 since boot), 7: the 7 pulses since boot count once confirmed.
    assert steps([5000, 3, 7, 9]) == [0, 0, 7, 9]


def test_a_counter_moved_to_a_new_level_continues_from_it_without_the_jump():
    assert steps([100, 900_000, 900_004, 900_010], max_rate=100) == [0, 0, 4, 10]


def test_signed_16_bit_counts_from_emonhub_are_unwrapped():
    # emonhub decodes datacode h as signed: 32767 + 1 arrives as -32768, 65535 as -1.
    counts = [32_000, 32_767, -32_768, -30_000, -1, 0, 500]
    assert steps(counts, bits=16, dt=100) == [0, 767, 768, 3_536, 33_535, 33_536, 34_036]


def test_34036_pulses_of_a_signed_16_bit_counter_all_count():
    """The issue's case: with counter_bits 16, 33,036 of 34,036 pulses were lost."""
    signed = [((c + 32768) % 65536) - 32768 for c in range(1000, 1000 + 34_037, 1000)]
    assert steps(signed, bits=16, dt=100)[-1] == 34_000
