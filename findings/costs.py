"""A fault's weekly waste in kWh, money and CO₂ from the site's own tariff and factor.

The tariff and carbon factor are the energy model's (energy.models.FuelRate; the DESNZ
default factor when the site set none). A site with no tariff for the fuel has no money
figure (None), never a made-up price.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from energy import benchmarks
from energy.models import EnergySite, FuelRate
from sensors.models import Site

WEEK = timedelta(days=7)
MIN_SPAN = timedelta(days=1)  # a range shorter than a day is scaled as a day: no ×168 of an hour


@dataclass(frozen=True)
class Waste:
    kwh_week: float
    money_week: float | None
    kg_co2_week: float
    currency: str


def per_week(kwh: float, span: timedelta) -> float:
    """`kwh` wasted over `span` as kWh a week."""
    return kwh * (WEEK / max(span, MIN_SPAN))


def waste(kwh: float, span: timedelta, fuel: str, site: Site | None) -> Waste:
    week = per_week(kwh, span)
    rate = FuelRate.objects.filter(site=site, fuel=fuel).first() if site else None
    factor = rate.factor if rate else benchmarks.DEFAULT_FACTORS[fuel]
    money = week * rate.price_per_unit if rate and rate.price_per_unit > 0 else None
    energy = EnergySite.objects.filter(site=site).first() if site else None
    return Waste(week, money, week * factor, energy.currency if energy else "GBP")
