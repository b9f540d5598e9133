"""Tables and arithmetic for benchmarks, money and carbon: pure, no Django (docs/ENERGY.md).

TM46_TYPICAL: CIBSE TM46:2008 "Energy benchmarks", Table 1, typical annual use per m² of
floor area (electricity, fossil-thermal) for a few common categories. TM46 publishes typical
values only; it has no "good practice" column (good practice figures come from older guides
such as ECON 19 and are not used here). Which values were checked against a source, and
which could not be, is in docs/ENERGY.md "Values checked against sources" and beside each row.

DEFAULT_FACTORS: kg CO2e per kWh (water: per m³), UK Government GHG Conversion Factors for
Company Reporting 2023 (DESNZ flat file v1.1, published 20 June 2023; scope 1 fuels at gross
calorific value, scope 2 electricity generated, scope 3 water supply). All five were checked
against that file's rows (factor ids beside each value). The 2023 set is used because it is
the newest year for which every factor could be checked; a site reporting on another year
sets its own (energy.models.FuelRate).

The Display Energy Certificate operational rating (CIBSE TM47, DCLG "The Government's
methodology for the production of Operational Ratings"): 100 x the building's CO2 per m²
divided by the CO2 per m² of the typical building of its category, both from the same
emission factors. The statutory rating also adjusts the benchmark for weather, occupancy
hours and separable uses; we do not (docs/ENERGY.md says so).
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


@dataclass(frozen=True)
class Benchmark:
    category: str
    label: str
    electricity: float  # kWh/m² per year, typical
    fossil: float  # kWh/m² per year, typical


TM46_TYPICAL = {
    b.category: b
    for b in (
        # Checked: a reproduction of TM46 Table 1 (with its kg CO2/m² columns) in UK
        # public-sector decarbonisation guidance, ppponline.affinitext.com (book 5926).
        Benchmark("general_office", "General office", 95, 120),
        Benchmark("schools", "Schools and seasonal public buildings", 40, 150),
        Benchmark("cultural", "Cultural activities", 70, 200),
        Benchmark("public_light", "Public buildings with light usage", 20, 105),
        Benchmark("dry_sports", "Dry sports and leisure facility", 95, 330),
        Benchmark("swimming_pool", "Swimming pool centre", 245, 1130),
        # Fossil 240 checked (Energies 2020, 13(24), 6606: "CIBSE TM46 UC ... 240
        # kWh/m2/yr"); electricity 80 NOT checked against any source found.
        Benchmark("university", "University campus", 80, 240),
        # NOT checked: no source found that quotes these rows (docs/ENERGY.md).
        Benchmark("workshop", "Workshop", 35, 180),
        Benchmark("storage", "Storage facility", 35, 160),
        Benchmark("hotel", "Hotel", 105, 330),
    )
}
TM46_CHOICES = [(b.category, b.label) for b in TM46_TYPICAL.values()]


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
) -> float | None:
    """DEC operational rating: 100 = typical for the category, lower is better."""
    bench = TM46_TYPICAL.get(category)
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
