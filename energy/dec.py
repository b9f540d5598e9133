"""A building's Display Energy Certificate operational rating over a range, as the league and
the monthly report show it: the use a year with its separable uses taken out, against the
TM46 benchmark of its category adjusted for the year's degree days and its occupancy hours
(docs/ENERGY.md "Benchmarks and the DEC operational rating"). Pure: arrays in, figures out.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

import numpy as np

from energy import benchmarks, degree_days
from energy.models import Meter, MeterNode


@dataclass(frozen=True)
class DecResult:
    rating: float | None
    details: dict | None  # the benchmark used and what adjusted it; None without a category
    warning: str | None


def degree_days_a_year(means: dict[date, float | None]) -> float | None:
    """Heating degree days a year at TM46's base (15.5 °C, whatever the site's own base): the
    range's days with a mean outside temperature, scaled to 365 days, as the use is. None
    without any such day (no outside temperature feed, or no data in the range)."""
    hdd = [
        degree_days.heating_degree_days(m, benchmarks.DEC_HDD_BASE_C)
        for m in means.values()
        if m is not None
    ]
    if not hdd:
        return None
    return sum(hdd) * 365.0 / len(hdd)


def separable_a_year(
    meters: list[Meter], arrays: dict[int, np.ndarray]
) -> tuple[dict[str, float], list[str]]:
    """kWh a year of the separable meters by TM46 class (electricity, fossil), each meter
    annualised over its own days with data, and how each is named on the page."""
    out = {"electricity": 0.0, "fossil": 0.0}
    names = []
    for meter in meters:
        values = arrays.get(meter.pk)
        known = ~np.isnan(values) if values is not None else np.zeros(0, dtype=bool)
        if known.any():
            out[benchmarks.TM46_CLASS[meter.fuel]] += (
                float(values[known].sum()) * 365.0 / int(known.sum())
            )
        names.append(f"{meter.separable_use.strip()} ({meter.name}, {meter.fuel})")
    return out, names


def building_rating(
    node: MeterNode,
    electricity_year: float,
    fossil_year: float,
    separable: tuple[dict[str, float], list[str]],
    hdd_year: float | None,
    electricity_factor: float,
    fossil_factor: float,
) -> DecResult:
    """The operational rating of one building and the figures behind it."""
    bench = benchmarks.TM46_TYPICAL.get(node.tm46_category)
    if bench is None or not node.floor_area_m2:
        return DecResult(None, None, None)
    sep, sep_names = separable
    elec = electricity_year - sep["electricity"]
    fossil = fossil_year - sep["fossil"]
    hours = node.annual_occupancy_hours
    adjusted = benchmarks.adjusted_benchmark(node.tm46_category, hdd_year, hours)
    warning = None
    if (sep["electricity"] and elec < 0) or (sep["fossil"] and fossil < 0):
        # A separable meter larger than its building is a metering or tree mistake.
        warning = (
            "the separable uses take out more than the building uses (check the separable "
            "meters and where they sit in the tree); no DEC rating is given"
        )
    rating = benchmarks.operational_rating(
        elec, fossil, node.floor_area_m2, node.tm46_category, electricity_factor,
        fossil_factor, hdd_year, hours,
    )  # fmt: skip
    notes = [_weather_note(hdd_year, bench)]
    if bench.hours_standard is None:
        notes.append(f"occupancy: TM46 does not adjust {bench.label.lower()}")
    elif adjusted.occupancy_hours is None:
        notes.append(f"occupancy: standard hours ({bench.hours_standard:,} h a year) assumed")
    else:
        entered = ""
        if hours < bench.hours_standard:
            entered = f"{hours:,} h entered, under the standard: "
        elif hours > bench.hours_max:
            entered = f"{hours:,} h entered, over the maximum: "
        notes.append(
            f"occupancy: {entered}{adjusted.occupancy_hours:,} h a year counted (standard "
            f"{bench.hours_standard:,}, maximum {bench.hours_max:,})"
        )
    if sep_names:
        taken = " + ".join(f"{v:,.0f} kWh {k}" for k, v in sep.items() if v) or "no data yet"
        notes.append(f"separable uses taken out a year: {taken}: {'; '.join(sep_names)}")
    details = {
        "benchmark_electricity": round(adjusted.electricity, 1),
        "benchmark_fossil": round(adjusted.fossil, 1),
        "hdd_year": None if hdd_year is None else round(hdd_year, 0),
        "hdd_reference": benchmarks.REFERENCE_HDD,
        "hdd_base_c": benchmarks.DEC_HDD_BASE_C,
        "weather_ratio": None
        if adjusted.weather_ratio is None
        else round(adjusted.weather_ratio, 3),
        "occupancy_hours": adjusted.occupancy_hours,
        "hours_standard": bench.hours_standard,
        "hours_max": bench.hours_max,
        "separable_kwh_year": {k: round(v, 1) for k, v in sep.items()},
        "separable_uses": sep_names,
        "notes": notes,
    }
    return DecResult(rating, details, warning)


def _weather_note(hdd_year: float | None, bench: benchmarks.Benchmark) -> str:
    if not (bench.weather_electricity or bench.weather_fossil):
        return f"weather: TM46 does not adjust {bench.label.lower()}"
    if hdd_year is None:
        return "weather: not adjusted (no outside temperature in the range)"
    return (
        f"weather: {hdd_year:,.0f} degree days a year (15.5 °C) against TM46's "
        f"{benchmarks.REFERENCE_HDD:,.0f}"
    )
