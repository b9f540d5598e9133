"""Reading conversions: raw device values -> engineering units. Pure functions, no Django.

Each function is checked in tests/sensors/test_conversions.py against published reference
values (IEC 60751 RTD tables, NIST ITS-90 type K tables, thermistor datasheet coefficients).

`convert(kind, raw, params)` is what the ingest worker calls for every kind except pulse
counters, which need the previous count and are handled by `pulse_step`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

KELVIN_OFFSET = 273.15


class ConversionError(ValueError):
    """The raw value or the sensor's params cannot be converted (reported, value skipped)."""


# --- Calibration -------------------------------------------------------------------------


def calibrate(value: float, scale: float = 1.0, offset: float = 0.0) -> float:
    """Linear calibration applied after conversion: value × scale + offset."""
    return value * scale + offset


# --- RTD (IEC 60751 Callendar–Van Dusen) ---------------------------------------------------

# Coefficients for platinum with alpha = 0.00385 (IEC 60751:2008).
CVD_A = 3.9083e-3
CVD_B = -5.775e-7
CVD_C = -4.183e-12  # only below 0 °C


def rtd_resistance(t_c: float, r0: float = 100.0) -> float:
    """Resistance (Ω) of a platinum RTD at t_c °C (the forward Callendar–Van Dusen equation)."""
    r = 1.0 + CVD_A * t_c + CVD_B * t_c * t_c
    if t_c < 0:
        r += CVD_C * (t_c - 100.0) * t_c**3
    return r0 * r


def rtd_temperature(resistance: float, r0: float = 100.0) -> float:
    """Temperature (°C) of a platinum RTD (PT100: r0=100, PT1000: r0=1000).

    At and above 0 °C the equation is a quadratic and is inverted exactly. Below 0 °C the
    C term makes it a quartic: start from the quadratic answer and refine with Newton's
    method, which converges in a few steps because the curve is almost linear.
    """
    if resistance <= 0 or r0 <= 0:
        raise ConversionError(f"RTD resistance must be positive, got {resistance!r} Ω")
    ratio = resistance / r0
    discriminant = CVD_A * CVD_A - 4.0 * CVD_B * (1.0 - ratio)
    if not math.isfinite(ratio) or discriminant < 0:
        # Above about 7.6 x r0 the quadratic has no real root (far beyond 850 °C, the top of
        # IEC 60751): a broken wire or a wrong r0, not a temperature.
        raise ConversionError(f"RTD resistance {resistance} Ω is above the IEC 60751 range")
    t = (-CVD_A + math.sqrt(discriminant)) / (2.0 * CVD_B)
    if ratio >= 1.0:
        return t
    if t < -250:  # outside IEC 60751 (−200 °C lower bound with margin)
        raise ConversionError(f"RTD resistance {resistance} Ω is below the IEC 60751 range")
    for _ in range(20):
        f = rtd_resistance(t, r0) - resistance
        dfdt = r0 * (CVD_A + 2 * CVD_B * t + CVD_C * (4 * t**3 - 300 * t * t))
        step = f / dfdt
        t -= step
        if abs(step) < 1e-9:
            break
    return t


# --- NTC thermistors -------------------------------------------------------------------------


def ntc_beta_temperature(
    resistance: float, r0: float = 10_000.0, beta: float = 3950.0, t0_c: float = 25.0
) -> float:
    """Temperature (°C) from the Beta equation: 1/T = 1/T0 + ln(R/R0)/B."""
    if resistance <= 0 or r0 <= 0 or beta <= 0:
        raise ConversionError("NTC resistance, r0 and beta must be positive")
    ratio = resistance / r0
    if not (t0_c + KELVIN_OFFSET > 0 and 0 < ratio < math.inf):
        raise ConversionError(f"NTC resistance {resistance} Ω or r0/t0 out of range")
    inv_t = 1.0 / (t0_c + KELVIN_OFFSET) + math.log(ratio) / beta
    if not inv_t > 0:  # a resistance so low it would be below absolute zero: a short circuit
        raise ConversionError(f"NTC resistance {resistance} Ω gives a non-physical temperature")
    return 1.0 / inv_t - KELVIN_OFFSET


def ntc_steinhart_hart_temperature(resistance: float, a: float, b: float, c: float) -> float:
    """Temperature (°C) from Steinhart–Hart: 1/T = A + B·ln R + C·(ln R)³."""
    if resistance <= 0:
        raise ConversionError(f"NTC resistance must be positive, got {resistance!r} Ω")
    ln_r = math.log(resistance)
    inv_t = a + b * ln_r + c * ln_r**3
    if not 0 < inv_t < math.inf:  # NaN too: absurd coefficients overflow to inf - inf
        raise ConversionError("Steinhart–Hart coefficients give a non-physical temperature")
    return 1.0 / inv_t - KELVIN_OFFSET


# --- Type K thermocouple (NIST ITS-90, NIST Monograph 175) ------------------------------

# Forward polynomial, temperature (°C) -> EMF (mV).
_K_FORWARD_NEG = (  # −270 °C to 0 °C
    0.0,
    0.394501280250e-1,
    0.236223735980e-4,
    -0.328589067840e-6,
    -0.499048287770e-8,
    -0.675090591730e-10,
    -0.574103274280e-12,
    -0.310888728940e-14,
    -0.104516093650e-16,
    -0.198892668780e-19,
    -0.163226974860e-22,
)
_K_FORWARD_POS = (  # 0 °C to 1372 °C, plus the exponential term below
    -0.176004136860e-1,
    0.389212049750e-1,
    0.185587700320e-4,
    -0.994575928740e-7,
    0.318409457190e-9,
    -0.560728448890e-12,
    0.560750590590e-15,
    -0.320207200030e-18,
    0.971511471520e-22,
    -0.121047212750e-25,
)
_K_EXP_A0, _K_EXP_A1, _K_EXP_A2 = 0.118597600000e0, -0.118343200000e-3, 0.126968600000e3

# Inverse polynomials, EMF (mV) -> temperature (°C), with their EMF ranges.
_K_INVERSE = (
    (
        -5.891,
        0.0,
        (
            0.0,
            2.5173462e1,
            -1.1662878,
            -1.0833638,
            -8.9773540e-1,
            -3.7342377e-1,
            -8.6632643e-2,
            -1.0450598e-2,
            -5.1920577e-4,
        ),
    ),
    (
        0.0,
        20.644,
        (
            0.0,
            2.508355e1,
            7.860106e-2,
            -2.503131e-1,
            8.315270e-2,
            -1.228034e-2,
            9.804036e-4,
            -4.413030e-5,
            1.057734e-6,
            -1.052755e-8,
        ),
    ),
    (
        20.644,
        54.886,
        (-1.318058e2, 4.830222e1, -1.646031, 5.464731e-2, -9.650715e-4, 8.802193e-6, -3.110810e-8),
    ),
)
TYPE_K_MIN_MV, TYPE_K_MAX_MV = -5.891, 54.886


def _poly(coefficients: tuple[float, ...], x: float) -> float:
    result = 0.0
    for c in reversed(coefficients):  # Horner's rule
        result = result * x + c
    return result


def type_k_emf(t_c: float) -> float:
    """EMF (mV) of a type K thermocouple with its reference junction at 0 °C."""
    if t_c < -270 or t_c > 1372:
        raise ConversionError(f"{t_c} °C is outside the type K range (−270…1372 °C)")
    if t_c < 0:
        return _poly(_K_FORWARD_NEG, t_c)
    return _poly(_K_FORWARD_POS, t_c) + _K_EXP_A0 * math.exp(_K_EXP_A1 * (t_c - _K_EXP_A2) ** 2)


def type_k_temperature(emf_mv: float, cold_junction_c: float = 0.0) -> float:
    """Hot-junction temperature (°C) from the measured EMF (mV) and cold-junction temperature.

    Cold-junction compensation: the meter sees E(T_hot) − E(T_cj), so add back E(T_cj) from
    the forward polynomial and invert the total with the NIST inverse polynomial.
    """
    total = emf_mv + (type_k_emf(cold_junction_c) if cold_junction_c else 0.0)
    for low, high, coefficients in _K_INVERSE:
        if low <= total <= high:
            return _poly(coefficients, total)
    raise ConversionError(
        f"{total:.3f} mV is outside the type K range ({TYPE_K_MIN_MV}…{TYPE_K_MAX_MV} mV)"
    )


# --- CT power ------------------------------------------------------------------------------


def ct_current(
    burden_volts: float, burden_ohms: float = 22.0, turns_ratio: float = 2000.0
) -> float:
    """Primary current (A rms) from the rms voltage across a CT's burden resistor."""
    if burden_ohms <= 0 or turns_ratio <= 0:
        raise ConversionError("CT burden_ohms and turns_ratio must be positive")
    return burden_volts / burden_ohms * turns_ratio


def ct_power(irms: float, voltage: float = 230.0, power_factor: float = 1.0) -> float:
    """Real power (W) from a CT's rms current, the supply voltage and the power factor."""
    return irms * voltage * power_factor


# --- Pulse counters --------------------------------------------------------------------------


@dataclass(frozen=True)
class PulseState:
    """What is remembered between readings of one pulse counter."""

    t: int  # unix seconds of the last reading
    count: int  # the raw counter value (counts since the node booted) last accepted
    total: float  # units accumulated since the sensor was created
    # A reading that did not follow from `count` (a fall that is not a wrap, or a rise beyond
    # the rate limit): held until the next reading says whether it was a glitch or real.
    pending: int | None = None


@dataclass(frozen=True)
class PulseResult:
    state: PulseState
    delta_pulses: int
    rate: float | None  # units per second × rate_scale; None for the first or a held reading
    reset: bool  # the counter restarted (node reboot) or moved to a new level


# A rise of more than this many pulses per second since the last reading is not believed
# at once (param max_pulse_rate): an emonTx pulse input debounces far below it.
DEFAULT_MAX_PULSE_RATE = 1000.0


def unwrap_signed(count: int, bits: int) -> int:
    """A count sent as a signed integer (emonhub's datacode `h` for 16 bits, `l` for 32)
    arrives negative past the half-way point: add 2**bits, as emoncms's signed2unsigned."""
    if -(1 << (bits - 1)) <= count < 0:
        return count + (1 << bits)
    return count


def pulse_delta(previous: int, current: int, bits: int = 32) -> tuple[int, bool]:
    """Pulses since `previous`, allowing for counter wrap and node reboots.

    A counter that went down either wrapped (it was in its top quarter and is now in its
    bottom quarter) or the node rebooted and counts from zero again: then the pulses
    since boot are `current`. Returns (delta, reset).
    """
    modulus = 1 << bits
    if current < 0 or current >= modulus:
        raise ConversionError(f"pulse count {current} does not fit a {bits}-bit counter")
    if not 0 <= previous < modulus:
        # The remembered count does not fit this counter: its width was reconfigured (32 to
        # 16 bits). Start again from this reading rather than count a negative delta.
        return current, True
    if current >= previous:
        return current - previous, False
    if previous >= modulus * 3 // 4 and current < modulus // 4:
        return current + modulus - previous, False
    return current, True


def pulse_step(
    state: PulseState | None,
    t: int,
    count: float,
    *,
    pulses_per_unit: float = 1.0,
    bits: int = 32,
    rate_scale: float = 1.0,
    max_rate: float = DEFAULT_MAX_PULSE_RATE,
) -> PulseResult | None:
    """Advance a pulse counter by one reading. None if the reading is not newer than the
    state (a redelivered batch must not count twice).

    A reading that does not follow from the last count (a fall that is not a wrap, or a
    rise beyond `max_rate` pulses/s) is held, not counted: if the next reading follows from
    the last count again, it was a glitch (a single 0, a corrupt radio packet) and is
    forgotten; if it follows from the held one, the counter really restarted (a reboot:
    the pulses since boot count) or moved (a jump: counting goes on from the new level).
    """
    if pulses_per_unit <= 0:
        raise ConversionError("pulses_per_unit must be positive")
    if max_rate <= 0:
        raise ConversionError("max_pulse_rate must be positive")
    if count != int(count):
        raise ConversionError(f"pulse count must be a whole number, got {count}")
    current = unwrap_signed(int(count), bits)
    if state is None:
        # First reading: nothing to difference against; the total starts here.
        pulse_delta(0, current, bits)  # validates the range
        return PulseResult(PulseState(t, current, 0.0), 0, None, False)
    if t <= state.t:
        return None
    elapsed = t - state.t
    limit = max_rate * elapsed
    delta, reset = pulse_delta(state.count, current, bits)
    if not reset and delta <= limit or reset and not 0 <= state.count < (1 << bits):
        # Follows from the last count (or the counter was narrowed: start again from here).
        return _advanced(state, t, current, delta, pulses_per_unit, rate_scale, elapsed, reset)
    pending = state.pending
    if pending is not None and 0 <= current - pending <= limit:
        # Two readings agree on a new level: a reboot (counting from 0: every pulse since
        # boot counts) or a jump (the jump itself is not counted).
        delta = current if pending < state.count else current - pending
        return _advanced(state, t, current, delta, pulses_per_unit, rate_scale, elapsed, True)
    held = PulseState(t, state.count, state.total, pending=current)
    return PulseResult(held, 0, None, False)  # no rate while in doubt


def _advanced(state, t, current, delta, pulses_per_unit, rate_scale, elapsed, reset):
    units = delta / pulses_per_unit
    rate = units / elapsed * rate_scale
    return PulseResult(PulseState(t, current, state.total + units), delta, rate, reset)


# --- Dispatch by Sensor.kind ------------------------------------------------------------------

PULSE_KIND = "pulse"


def _param(params: dict, name: str, default: float) -> float:
    value = params.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConversionError(f"param '{name}' must be a number, got {value!r}")
    return float(value)


def convert(kind: str, raw: float, params: dict) -> float:
    """Engineering value for one raw reading of a sensor of `kind` (not pulse counters)."""
    if kind == "rtd_pt100":
        return rtd_temperature(raw, _param(params, "r0", 100.0))
    if kind == "rtd_pt1000":
        return rtd_temperature(raw, _param(params, "r0", 1000.0))
    if kind == "ntc_beta":
        return ntc_beta_temperature(
            raw,
            r0=_param(params, "r0", _param(params, "r25", 10_000.0)),
            beta=_param(params, "beta", 3950.0),
            t0_c=_param(params, "t0", 25.0),
        )
    if kind == "ntc_steinhart":
        a, b, c = (_param(params, n, math.nan) for n in ("a", "b", "c"))
        if math.isnan(a) or math.isnan(b) or math.isnan(c):
            raise ConversionError("Steinhart–Hart sensor needs params a, b and c")
        return ntc_steinhart_hart_temperature(raw, a, b, c)
    if kind == "thermocouple_k":
        return type_k_temperature(raw, _param(params, "cold_junction", 0.0))
    if kind == "power":
        source = params.get("input", "watts")
        if source == "watts":
            return raw
        voltage = _param(params, "voltage", 230.0)
        pf = _param(params, "power_factor", 1.0)
        if source == "irms":
            return ct_power(raw, voltage, pf)
        if source == "burden_volts":
            irms = ct_current(
                raw, _param(params, "burden_ohms", 22.0), _param(params, "turns_ratio", 2000.0)
            )
            return ct_power(irms, voltage, pf)
        raise ConversionError(f"param 'input' must be watts, irms or burden_volts, not {source!r}")
    if kind == PULSE_KIND:
        raise ConversionError("pulse counters need their state: use pulse_step")
    # temperature, energy, voltage, current, flow, humidity, wind_speed, generic: as posted
    return raw
