"""The keys Panel.options may hold, checked in one place.

Panel.clean() (admin, API) refuses bad options with a message naming the key, so a typo in the
admin never reaches a screen in the entrance hall; the data builder still reads them defensively.
"""

from __future__ import annotations

import re
from typing import Any

from displays.equivalents import EQUIVALENTS

CO2_PERIODS = ("today", "7d", "30d", "total")
SAVED_PERIODS = ("30d", "90d", "365d")  # energy.public.SAVED_PERIODS
_HEX = re.compile(r"#[0-9a-fA-F]{6}")


def _positive_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0


def _number_between(value: Any, low: float, high: float) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and low <= value <= high


def _check_common(options: dict, errors: list[str]) -> None:
    if "span" in options and options["span"] not in (1, 2):
        errors.append("options.span: use 1 (one cell) or 2 (two cells wide).")
    if "stale_after_s" in options and not _positive_number(options["stale_after_s"]):
        errors.append("options.stale_after_s: a number of seconds above 0.")
    for key in ("labels", "colours"):
        if key not in options:
            continue
        value = options[key]
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            errors.append(f'options.{key}: an object of feed id -> text, e.g. {{"12": "Tank"}}.')
        elif key == "colours" and not all(_HEX.fullmatch(v) for v in value.values()):
            errors.append("options.colours: hex colours like #f5c400.")


def _check_co2(options: dict, errors: list[str]) -> None:
    if "grid_intensity_g_per_kwh" in options and not _number_between(
        options["grid_intensity_g_per_kwh"], 0, 2000
    ):
        errors.append("options.grid_intensity_g_per_kwh: a number of g/kWh from 0 to 2000.")
    if "period" in options and options["period"] not in CO2_PERIODS:
        errors.append(f"options.period: one of {', '.join(CO2_PERIODS)}.")
    if "equivalents" in options:
        chosen = options["equivalents"]
        if not isinstance(chosen, list) or any(k not in EQUIVALENTS for k in chosen):
            errors.append(f"options.equivalents: a list drawn from {', '.join(EQUIVALENTS)}.")
    for _basis, key, _default, _text in EQUIVALENTS.values():
        if key in options and not _positive_number(options[key]):
            errors.append(f"options.{key}: a number above 0.")


def _check_building(kind: str, options: dict, errors: list[str]) -> None:
    building = options.get("building")
    if not (isinstance(building, int) and not isinstance(building, bool) and building > 0):
        errors.append("options.building: the id of a building in the metering tree, e.g. 3.")
    if kind == "building_saved" and options.get("period", "30d") not in SAVED_PERIODS:
        errors.append(f"options.period: one of {', '.join(SAVED_PERIODS)}.")


def _check_chart(options: dict, errors: list[str]) -> None:
    if "interval" in options and not (
        isinstance(options["interval"], int) and 10 <= options["interval"] <= 3600
    ):
        errors.append("options.interval: whole seconds between points, 10 to 3600.")


ZERO_KINDS = ("live_value", "energy_today", "peak_today")
ZERO_REASONS = ("sun", "solar_thermal")
FLOW_ROLES = ("generation", "grid", "import", "export", "use")  # displays/energy_flow.py


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _check_zero(kind: str, options: dict, errors: list[str]) -> None:
    """options.explain_zero: a plain-words reason when the panel reads zero."""
    if "explain_zero" not in options:
        return
    if kind not in ZERO_KINDS:
        errors.append(f"options.explain_zero: only for {', '.join(ZERO_KINDS)} panels.")
    elif options["explain_zero"] not in ZERO_REASONS:
        errors.append(f"options.explain_zero: one of {', '.join(ZERO_REASONS)}.")
    elif options["explain_zero"] == "solar_thermal":
        for key in ("collector_feed", "store_feed"):
            if not _positive_int(options.get(key)):
                errors.append(f"options.{key}: the id of the {key.split('_')[0]} "
                              "temperature feed, e.g. 12.")  # fmt: skip


def _check_flow(options: dict, errors: list[str]) -> None:
    roles = options.get("roles")
    if (
        not isinstance(roles, dict)
        or not roles
        or len(roles) > 20
        or not all(str(k).isdigit() and v in FLOW_ROLES for k, v in roles.items())
    ):
        errors.append(
            "options.roles: an object of feed id -> one of "
            f'{", ".join(FLOW_ROLES)} (at most 20), e.g. {{"12": "generation", "13": "grid"}}.'
        )
    elif not any(v == "generation" for v in roles.values()):
        errors.append('options.roles: at least one feed of role "generation".')


COMMON_KEYS = ("span", "stale_after_s", "labels", "colours")
ZERO_KEYS = ("explain_zero", "collector_feed", "store_feed")
FLOW_KEYS = ("roles",)
CHART_KEYS = ("interval",)
BUILDING_KEYS = ("building",)  # and "period" (building_saved), shared with CO2_KEYS
CO2_KEYS = (
    "grid_intensity_g_per_kwh",
    "period",
    "equivalents",
    *(key for _basis, key, _default, _text in EQUIVALENTS.values()),
)
KNOWN_KEYS = frozenset(
    (*COMMON_KEYS, *CHART_KEYS, *CO2_KEYS, *BUILDING_KEYS, *ZERO_KEYS, *FLOW_KEYS)
)


def validate_options(kind: str, options: Any, *, strict: bool = False) -> list[str]:
    """Error messages (empty when fine) for a panel of `kind` with these options.

    `strict` (saving: admin, API) also refuses keys no panel reads, so a typo such as
    {"spann": 2} is named rather than stored and silently ignored. A display showing panels
    saved before this check does not (a stray key there changes nothing on screen).
    """
    if not isinstance(options, dict):
        return ['options: a JSON object, e.g. {} or {"period": "today"}.']
    errors: list[str] = []
    if strict:
        for key in sorted(set(options) - KNOWN_KEYS, key=str):
            errors.append(
                f"options.{str(key)[:40]}: unknown option; known: {', '.join(sorted(KNOWN_KEYS))}."
            )
    _check_common(options, errors)
    if kind == "co2_saved":
        _check_co2(options, errors)
    if kind in ("building_today", "building_saved"):
        _check_building(kind, options, errors)
    if kind == "chart_24h":
        _check_chart(options, errors)
    _check_zero(kind, options, errors)
    if kind == "energy_flow":
        _check_flow(options, errors)
    return errors
