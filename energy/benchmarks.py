"""Tables and arithmetic for benchmarks, money and carbon: pure, no Django (docs/ENERGY.md).

TM46_TYPICAL: CIBSE TM46:2008 "Energy benchmarks", Table 1, typical annual use per m² of
floor area (electricity, fossil-thermal) of each of its 29 categories, with the weather and
occupancy adjustments and separable uses of each. TM46 publishes typical values only; it has
no "good practice" column (good practice figures come from older guides such as ECON 19 and
are not used here). Which values were checked against a source, and how, is in
docs/ENERGY.md "Values checked against sources" and in each row's `source`.

DEFAULT_FACTORS: kg CO2e per kWh (water: per m³), UK Government GHG Conversion Factors for
Company Reporting 2023 (DESNZ flat file v1.1, published 20 June 2023; scope 1 fuels at gross
calorific value, scope 2 electricity generated, scope 3 water supply). All five were checked
against that file's rows (factor ids beside each value). The 2023 set is used because it is
the newest year for which every factor could be checked; a site reporting on another year
sets its own (energy.models.FuelRate).

The Display Energy Certificate operational rating (CIBSE TM46 and TM47, DCLG "The
Government's methodology for the production of Operational Ratings"): 100 x the building's
CO2 per m² (its separable uses taken out) divided by the CO2 per m² of the typical building of
its category, both from the same emission factors, the benchmark adjusted for the year's
degree days and the building's occupancy hours (docs/ENERGY.md says where each figure comes
from and how far it was checked).
"""

from __future__ import annotations

from dataclasses import dataclass

# Fuels a meter may measure; the unit each counts in.
ELECTRICITY = "electricity"
GAS = "gas"
HEAT = "heat"
OIL = "oil"
WATER = "water"
GENERATION = "generation"
FUELS = (ELECTRICITY, GAS, HEAT, OIL, WATER, GENERATION)
UNIT = {ELECTRICITY: "kWh", GAS: "kWh", HEAT: "kWh", OIL: "kWh", WATER: "m³", GENERATION: "kWh"}
# The units a meter's feed may be in, by the meter's source, and the factor to the unit the
# figures are computed in: a cumulative register to kWh (water: m³), a power feed to W. A feed
# with an empty unit is taken to be in the first (kWh, m³, W), as before units were checked.
CUMULATIVE_ENERGY_UNITS = {"kwh": 1.0, "wh": 0.001}
CUMULATIVE_WATER_UNITS = {"m³": 1.0, "m3": 1.0}
POWER_UNITS = {"w": 1.0, "kw": 1000.0}


def feed_units(fuel: str, source: str) -> dict[str, float]:
    """{normalised unit: factor} a feed of a `source` ("cumulative"/"power") meter of `fuel`
    may be in."""
    if source == "power":
        return POWER_UNITS
    return CUMULATIVE_WATER_UNITS if fuel == WATER else CUMULATIVE_ENERGY_UNITS


def normal_unit(unit: str) -> str:
    return unit.replace(" ", "").lower()


def same_unit(a: str, b: str) -> bool:
    """'kWh' and 'kwh', 'm3' and 'm³' are the same unit."""
    a, b = normal_unit(a).replace("m3", "m³"), normal_unit(b).replace("m3", "m³")
    return a == b


# Quantities that may be added and subtracted in a virtual meter: electricity bought and
# electricity generated are the same quantity (house = import + PV - export); gas and
# electricity are not, even though both count kWh.
QUANTITY = {
    ELECTRICITY: "electricity",
    GENERATION: "electricity",
    GAS: "gas",
    HEAT: "heat",
    OIL: "oil",
    WATER: "water",
}
# TM46 splits use into electricity and fossil-thermal (gas, oil; heat bought counts as
# thermal). Water and generation are not energy use of the building.
TM46_CLASS = {ELECTRICITY: "electricity", GAS: "fossil", OIL: "fossil", HEAT: "fossil"}

DEFAULT_FACTORS = {  # kg CO2e per unit, DESNZ 2023 flat file v1.1 (docs/ENERGY.md)
    ELECTRICITY: 0.20707,  # 7_400_4000_5_1 Electricity: UK, kWh: 0.207074289
    GAS: 0.18293,  # 1_100_1004_6_1 Natural gas, kWh (Gross CV): 0.182928926
    OIL: 0.24677,  # 1_101_1010_6_1 Burning oil, kWh (Gross CV): 0.24677325
    HEAT: 0.17965,  # 10_401_4003_5_1 District heat and steam, kWh: 0.179646572
    WATER: 0.17668,  # 17_404_4005_1_1 Water supply, cubic metres: 0.176684547
    GENERATION: 0.0,  # on-site renewables: no emissions at the point of use
}


# TM46's standard year: 2,021 heating degree days (base 15.5 °C). Each category's weather
# dependent share of a benchmark is scaled by the building's degree days over this.
REFERENCE_HDD = 2021.0
DEC_HDD_BASE_C = 15.5
# TM46's two ways of counting a year's occupancy hours, one per category.
OCCUPANTS = "hours when the recorded occupants exceed 25 % of the nominal maximum"
OPENING = "hours fully open to customers (published opening hours)"
# Where each row's figures come from (docs/ENERGY.md "Values checked against sources").
CHECKED_TWICE = "typical values checked against a reproduction of TM46 Table 1"
ONE_SOURCE = "from one reproduction of TM46 Table 1, not checked against TM46 itself"


@dataclass(frozen=True)
class Benchmark:
    """One row of TM46 Table 1: typical kWh/m² a year and how the row is adjusted."""

    category: str
    label: str
    electricity: float  # kWh/m² per year, typical
    fossil: float  # kWh/m² per year, typical
    weather_electricity: float  # share of the benchmark scaled by degree days / 2021
    weather_fossil: float
    # Occupancy: between the standard and the maximum hours a year, the benchmark grows
    # linearly up to (1 + occupancy_*) times itself. None: TM46 does not adjust the category.
    hours_standard: int | None
    hours_max: int | None
    occupancy_electricity: float
    occupancy_fossil: float
    hours_basis: str  # OCCUPANTS or OPENING ("" when not adjusted)
    separable: str  # the separable energy uses TM46 names for the category ("" if none)
    source: str  # CHECKED_TWICE or ONE_SOURCE


def _row(category, label, elec, fossil, w_e, w_f, hours, occ_e, occ_f, basis, separable,
         source=ONE_SOURCE) -> Benchmark:  # fmt: skip
    standard, maximum = hours if hours else (None, None)
    return Benchmark(category, label, elec, fossil, w_e, w_f, standard, maximum, occ_e, occ_f,
                     basis if hours else "", separable, source)  # fmt: skip


# CIBSE TM46:2008 Table 1, all 29 categories: typical electricity and fossil-thermal, the
# weather dependent shares, the occupancy hours (standard, maximum) and the fractions added at
# the maximum, and the separable uses. The typical values of the rows marked CHECKED_TWICE
# were checked against a second reproduction (docs/ENERGY.md); every other figure comes from
# one reproduction of the table, the MIT-licensed BenchmarkingJS data file (2018) of
# buildingphysicsonline.com, which matches all the checked values.
TM46_TYPICAL = {
    b.category: b
    for b in (
        _row("general_office", "General office", 95, 120, 0.0, 0.55, (2040, 8760), 1.07, 0.44,
             OCCUPANTS, "regional server room, trading floor", CHECKED_TWICE),
        _row("high_street_agency", "High street agency", 140, 0, 0.20, 0.0, (2448, 3672), 0.22,
             0.0, OPENING, ""),
        _row("general_retail", "General retail", 165, 0, 0.15, 0.0, (2448, 3672), 0.22, 0.0,
             OPENING, ""),
        _row("large_non_food_shop", "Large non-food shop", 70, 170, 0.0, 0.55, (2448, 4284),
             0.32, 0.15, OPENING, ""),
        _row("small_food_store", "Small food store", 310, 0, 0.15, 0.0, (2448, 3672), 0.22, 0.0,
             OPENING, ""),
        _row("large_food_store", "Large food store", 400, 105, 0.0, 0.55, (2983, 4284), 0.20,
             0.09, OPENING, "bakery oven"),
        _row("restaurant", "Restaurant", 90, 370, 0.20, 0.30, (3060, 5712), 0.37, 0.17, OPENING,
             "cooking equipment in a catering kitchen"),
        _row("bar_pub_club", "Bar, pub or licensed club", 130, 350, 0.0, 0.40, (3060, 5712),
             0.37, 0.17, OPENING, ""),
        _row("hotel", "Hotel", 105, 330, 0.0, 0.45, None, 0.0, 0.0, "", ""),
        _row("cultural", "Cultural activities", 70, 200, 0.0, 0.55, (2040, 4284), 0.45, 0.20,
             OPENING, "", CHECKED_TWICE),
        _row("entertainment_halls", "Entertainment halls", 150, 420, 0.0, 0.55, (2856, 5712),
             0.41, 0.19, OPENING, ""),
        _row("swimming_pool", "Swimming pool centre", 245, 1130, 0.0, 0.55, (2856, 4641), 0.27,
             0.13, OPENING, "", CHECKED_TWICE),
        _row("fitness_health", "Fitness and health centre", 160, 440, 0.0, 0.40, (2754, 5355),
             0.39, 0.18, OPENING, ""),
        _row("dry_sports", "Dry sports and leisure facility", 95, 330, 0.0, 0.55, (2754, 5355),
             0.39, 0.18, OPENING, "sports floodlighting", CHECKED_TWICE),
        _row("covered_car_park", "Covered car park", 20, 0, 0.0, 0.0, (4284, 8568), 0.41, 0.0,
             OPENING, ""),
        _row("public_light", "Public buildings with light usage", 20, 105, 0.0, 0.55,
             (2040, 3672), 0.34, 0.16, OPENING, "", CHECKED_TWICE),
        _row("schools", "Schools and seasonal public buildings", 40, 150, 0.0, 0.55,
             (1400, 3672), 0.62, 0.27, OPENING, "", CHECKED_TWICE),
        _row("university", "University campus", 80, 240, 0.0, 0.55, (2450, 5355), 0.48, 0.22,
             OPENING, "furnace or forming process"),
        _row("clinic", "Clinic", 70, 200, 0.0, 0.55, (2040, 4284), 0.45, 0.20, OPENING, ""),
        _row("hospital", "Hospital (clinical and research)", 90, 420, 0.0, 0.55, None, 0.0, 0.0,
             "", "furnace or forming process"),
        _row("long_term_residential", "Long term residential", 65, 420, 0.0, 0.55, None, 0.0,
             0.0, "", ""),
        _row("general_accommodation", "General accommodation", 60, 300, 0.0, 0.55,
             (2940, 4284), 0.21, 0.10, OPENING, ""),
        _row("emergency_services", "Emergency services", 70, 390, 0.0, 0.55, None, 0.0, 0.0, "",
             ""),
        _row("laboratory", "Laboratory or operating theatre", 160, 160, 0.0, 0.55, (2040, 8568),
             1.05, 0.43, OCCUPANTS, "furnace or forming process"),
        _row("public_waiting", "Public waiting or circulation", 30, 120, 0.0, 0.55, None, 0.0,
             0.0, "", ""),
        _row("terminal", "Terminal", 75, 200, 0.0, 0.55, None, 0.0, 0.0, "", ""),
        _row("workshop", "Workshop", 35, 180, 0.0, 0.55, (2040, 3672), 0.34, 0.16, OCCUPANTS,
             "furnace or forming process"),
        _row("storage", "Storage facility", 35, 160, 0.0, 0.70, (2040, 4284), 0.45, 0.20,
             OCCUPANTS, ""),
        _row("cold_storage", "Cold storage", 145, 80, 0.0, 0.55, None, 0.0, 0.0, "",
             "blast chilling or freezing plant"),
    )
}  # fmt: skip
TM46_CHOICES = [(b.category, b.label) for b in TM46_TYPICAL.values()]


@dataclass(frozen=True)
class AdjustedBenchmark:
    """A category's benchmark for one building and year (kWh/m² a year), and what moved it."""

    electricity: float
    fossil: float
    weather_ratio: float | None  # the year's degree days / 2021; None: not adjusted
    occupancy_hours: int | None  # the hours counted (standard..maximum); None: not adjusted
    occupancy_share: float  # 0 at the standard hours, 1 at the maximum


def adjusted_benchmark(
    category: str, hdd_year: float | None = None, occupancy_hours: int | None = None
) -> AdjustedBenchmark | None:
    """TM46's benchmark adjusted for weather (the weather dependent share scaled by the year's
    degree days over 2021) and for extended occupancy (hours over the standard raise the
    benchmark linearly, up to the category's maximum hours; fewer hours never lower it)."""
    bench = TM46_TYPICAL.get(category)
    if bench is None:
        return None
    elec, fossil = bench.electricity, bench.fossil
    ratio = None
    if hdd_year is not None:
        ratio = hdd_year / REFERENCE_HDD
        elec *= 1 - bench.weather_electricity + bench.weather_electricity * ratio
        fossil *= 1 - bench.weather_fossil + bench.weather_fossil * ratio
    hours, share = None, 0.0
    if occupancy_hours is not None and bench.hours_standard is not None:
        hours = min(max(occupancy_hours, bench.hours_standard), bench.hours_max)
        share = (hours - bench.hours_standard) / (bench.hours_max - bench.hours_standard)
        elec *= 1 + bench.occupancy_electricity * share
        fossil *= 1 + bench.occupancy_fossil * share
    return AdjustedBenchmark(elec, fossil, ratio, hours, share)


def per_m2(kwh: float | None, area_m2: float | None) -> float | None:
    if kwh is None or not area_m2:
        return None
    return kwh / area_m2


def operational_rating(
    electricity_kwh: float,
    fossil_kwh: float,
    area_m2: float,
    category: str,
    electricity_factor: float,
    fossil_factor: float,
    hdd_year: float | None = None,
    occupancy_hours: int | None = None,
) -> float | None:
    """DEC operational rating: 100 = typical for the category, lower is better. The use is the
    building's a year with its separable uses taken out; the benchmark is adjusted for the
    year's degree days (base 15.5 °C) and the occupancy hours when they are known."""
    bench = adjusted_benchmark(category, hdd_year, occupancy_hours)
    if bench is None or not area_m2:
        return None
    if electricity_kwh < 0 or fossil_kwh < 0:
        # Negative use is a metering mistake (a virtual meter subtracting more than it adds),
        # not an excellent building: no rating rather than an "A" (found by an outside check).
        return None
    typical = bench.electricity * electricity_factor + bench.fossil * fossil_factor
    if typical <= 0:
        return None
    actual = (electricity_kwh * electricity_factor + fossil_kwh * fossil_factor) / area_m2
    return 100.0 * actual / typical


def dec_grade(rating: float | None) -> str | None:
    """A (0-25) to G (over 150), the DEC bands."""
    if rating is None:
        return None
    for limit, grade in ((25, "A"), (50, "B"), (75, "C"), (100, "D"), (125, "E"), (150, "F")):
        if rating <= limit:
            return grade
    return "G"
