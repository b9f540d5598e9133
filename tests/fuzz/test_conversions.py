"""Property tests of sensors/conversions.py: for any finite reading and any parameters a
sensor may be configured with, a number or ConversionError (documented), nothing else.
Inside the physical range, the inverse conversions undo the forward ones."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sensors import conversions as cv
from tests.fuzz.profiles import FUZZ

finite = st.floats(allow_nan=False, allow_infinity=False)
param_values = st.one_of(
    finite, st.integers(-(10**6), 10**6), st.text(max_size=5), st.none(), st.booleans()
)
KINDS = ["rtd_pt100", "rtd_pt1000", "ntc_beta", "ntc_steinhart", "thermocouple_k", "power",
         "pulse", "temperature", "generic"]  # fmt: skip
PARAM_NAMES = ["r0", "r25", "beta", "t0", "a", "b", "c", "cold_junction", "input", "voltage",
               "power_factor", "burden_ohms", "turns_ratio"]  # fmt: skip


@FUZZ
@given(
    st.sampled_from(KINDS),
    finite,
    st.dictionaries(
        st.sampled_from(PARAM_NAMES),
        st.one_of(param_values, st.sampled_from(["watts", "irms", "burden_volts"])),
        max_size=5,
    ),
)
def test_convert_returns_a_number_or_conversion_error(kind, raw, params):
    try:
        value = cv.convert(kind, raw, params)
    except cv.ConversionError:
        return
    assert isinstance(value, float)


@FUZZ
@given(finite, st.floats(min_value=1e-3, max_value=1e6))
def test_rtd_any_resistance(resistance, r0):
    try:
        t = cv.rtd_temperature(resistance, r0)
    except cv.ConversionError:
        return
    assert math.isfinite(t)


@FUZZ
@given(st.floats(min_value=-200, max_value=850), st.sampled_from([100.0, 1000.0]))
def test_rtd_inverse_undoes_forward(t_c, r0):
    assert cv.rtd_temperature(cv.rtd_resistance(t_c, r0), r0) == pytest.approx(t_c, abs=1e-6)


@FUZZ
@given(finite, st.floats(min_value=1e-3, max_value=1e9), st.floats(1.0, 1e5), finite)
def test_ntc_beta_is_physical_or_refused(resistance, r0, beta, t0):
    try:
        t = cv.ntc_beta_temperature(resistance, r0, beta, t0)
    except cv.ConversionError:
        return
    assert t > -cv.KELVIN_OFFSET


@FUZZ
@given(finite, finite, finite, finite)
def test_steinhart_hart_any_coefficients(resistance, a, b, c):
    try:
        t = cv.ntc_steinhart_hart_temperature(resistance, a, b, c)
    except cv.ConversionError:
        return
    assert t >= -cv.KELVIN_OFFSET


@FUZZ
@given(finite, finite)
def test_type_k_any_emf_and_cold_junction(emf, cold):
    try:
        t = cv.type_k_temperature(emf, cold)
    except cv.ConversionError:
        return
    assert -300 < t < 1400


@FUZZ
@given(st.floats(min_value=-199.5, max_value=1371.5))  # the inverse ends at -200 and 1372 °C
def test_type_k_inverse_close_to_forward(t_c):
    # NIST's inverse polynomials are accurate to within 0.06 °C of the forward tables.
    assert cv.type_k_temperature(cv.type_k_emf(t_c)) == pytest.approx(t_c, abs=0.07)


pulse_states = st.one_of(
    st.none(),
    st.builds(cv.PulseState, st.integers(0, 2**32), st.integers(0, 2**32 - 1), finite),
)


@FUZZ
@given(
    pulse_states,
    st.integers(0, 2**32),
    st.one_of(st.integers(-10, 2**33), finite),
    st.floats(-10, 1e6),
    st.sampled_from([16, 32]),
)
def test_pulse_step_any_count(state, t, count, pulses_per_unit, bits):
    try:
        result = cv.pulse_step(state, t, count, pulses_per_unit=pulses_per_unit, bits=bits)
    except cv.ConversionError:
        return
    if result is None:
        assert state is not None and t <= state.t
        return
    assert 0 <= result.delta_pulses < 2**bits
    if state is not None:
        assert result.state.total >= state.total or math.isnan(state.total)


@pytest.mark.parametrize(
    ("call", "why"),
    [
        (lambda: cv.rtd_temperature(1000.0, 100.0), "10x r0: no real root (was ValueError)"),
        (lambda: cv.ntc_beta_temperature(1e-300), "below absolute zero (was returned)"),
        (lambda: cv.ntc_beta_temperature(1e-300, 1e300), "ratio underflows (was ValueError)"),
        (lambda: cv.ntc_beta_temperature(10.0, t0_c=-273.15), "t0 at 0 K (was ZeroDivisionError)"),
    ],
)
def test_found_by_fuzzing_now_conversion_errors(call, why):
    with pytest.raises(cv.ConversionError):
        call()


def test_pulse_counter_narrowed_after_a_count_is_a_reset_not_a_negative_delta():
    """Found by fuzzing: a 32-bit count remembered, then the sensor set to 16 bits."""
    result = cv.pulse_step(cv.PulseState(t=1, count=70_000, total=5.0), 2, 0, bits=16)
    assert result.reset and result.delta_pulses == 0 and result.state.total == 5.0
