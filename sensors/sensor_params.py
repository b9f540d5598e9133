"""What `Sensor.params` may hold, per sensor kind, checked when a sensor is saved.

Without this a typo (`rzero` for `r0`), text where a number belongs (`{"r0": "abc"}`),
`pulses_per_unit: 0` or a Steinhart–Hart sensor without its coefficients was stored and then
lost every reading at ingest (a ConversionError per value, seen only in the worker log).
Here each kind lists the keys it understands, each key its type and range; `param_errors`
returns one message per bad key, naming it, and Sensor.clean() raises them on `params`, so the
admin shows them on the field and the API answers 400 (core/serializers.py, ModelCleanSerializer).

The defaults used at ingest live beside the code that uses them (sensors/conversions.py,
sensors/ingest/processing.py); a key added there must be listed here too, or saving refuses it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

KELVIN_OFFSET = 273.15


@dataclass(frozen=True)
class Param:
    """One key: a finite number (`low`/`high` bounds, `above` for strictly greater), an
    integer within bounds, or one of `choices`."""

    low: float | None = None
    high: float | None = None
    above: float | None = None
    integer: bool = False
    choices: tuple[str, ...] = ()

    def error(self, value: object) -> str | None:
        if self.choices:
            if value not in self.choices:
                return f"must be one of {', '.join(self.choices)}, got {_shown(value)}"
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"must be a number, got {_shown(value)}"
        if not math.isfinite(value):
            return "must be a finite number"
        if self.integer and value != int(value):
            return f"must be a whole number, got {value!r}"
        if self.above is not None and not value > self.above:
            return f"must be greater than {self.above:g}, got {value!r}"
        if self.low is not None and value < self.low:
            return f"must be at least {self.low:g}, got {value!r}"
        if self.high is not None and value > self.high:
            return f"must be at most {self.high:g}, got {value!r}"
        return None


POSITIVE = Param(above=0)
NUMBER = Param()

RTD = {"r0": POSITIVE}
KINDS: dict[str, dict[str, Param]] = {
    "rtd_pt100": RTD,
    "rtd_pt1000": RTD,
    "ntc_beta": {
        "r0": POSITIVE,
        "r25": POSITIVE,
        "beta": POSITIVE,
        "t0": Param(above=-KELVIN_OFFSET, high=1000),
    },
    "ntc_steinhart": {"a": NUMBER, "b": NUMBER, "c": NUMBER},
    "thermocouple_k": {"cold_junction": Param(low=-270, high=1372)},
    "power": {
        "input": Param(choices=("watts", "irms", "burden_volts")),
        "voltage": POSITIVE,
        "power_factor": Param(low=-1, high=1),
        "burden_ohms": POSITIVE,
        "turns_ratio": POSITIVE,
    },
    "pulse": {
        "pulses_per_unit": POSITIVE,
        # pulse_delta computes 1 << bits: a bound keeps that number small.
        "counter_bits": Param(low=1, high=64, integer=True),
        "rate_scale": POSITIVE,
        "output": Param(choices=("total", "rate")),
        # Pulses per second beyond which a rise is held as a possible glitch (conversions.py).
        "max_pulse_rate": POSITIVE,
    },
}
# Keys a kind cannot work without (no default could be right).
REQUIRED: dict[str, tuple[str, ...]] = {"ntc_steinhart": ("a", "b", "c")}
MAX_PARAMS = 16  # no kind has more keys: a bound on what a request can make us store


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:40] + "..."


def param_errors(kind: str, params: object) -> list[str]:
    """Messages like "r0: must be a number, got 'abc'"; empty when `params` suits `kind`."""
    if not isinstance(params, dict):
        return ['must be a JSON object, e.g. {} or {"r0": 100}']
    if len(params) > MAX_PARAMS:
        return [f"at most {MAX_PARAMS} keys"]
    known = KINDS.get(kind, {})
    errors = []
    for key, value in params.items():
        spec = known.get(key)
        if spec is None:
            allowed = ", ".join(sorted(known)) or "none"
            errors.append(f"{str(key)[:40]}: not a parameter of kind {kind} (known: {allowed})")
            continue
        problem = spec.error(value)
        if problem:
            errors.append(f"{key}: {problem}")
    for key in REQUIRED.get(kind, ()):
        if key not in params:
            errors.append(f"{key}: required for kind {kind}")
    return errors
