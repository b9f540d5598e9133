"""CO₂ saved and plain-language equivalents for renewable energy, with the factors stated.

The factors are documented in docs/DISPLAYS.md; each can be overridden per panel in
Panel.options (keys below) because grid intensity and what a visitor relates to differ by site.
"""

from __future__ import annotations

from dataclasses import dataclass

# UK government GHG conversion factors (DESNZ 2024), "average car, unknown fuel": ≈ 0.17 kg CO₂/km.
CAR_G_PER_KM = 170.0
# Boiling 1 litre of water from 15 °C: 4.186 kJ/(kg·K) × 85 K ≈ 0.099 kWh, plus kettle losses.
KETTLE_KWH = 0.1
# A smartphone battery of ~15 Wh charged through a charger that is ~80 % efficient.
PHONE_CHARGE_KWH = 0.019

# What each equivalent needs: "co2" ones divide grams of CO₂, "energy" ones divide kWh.
EQUIVALENTS: dict[str, tuple[str, str, float, str]] = {
    # key: (basis, option key for the factor, default factor, text after the number)
    "car_km": ("co2", "car_g_per_km", CAR_G_PER_KM, "km not driven by car"),
    "kettles": ("energy", "kettle_kwh", KETTLE_KWH, "kettles boiled"),
    "phone_charges": ("energy", "phone_charge_kwh", PHONE_CHARGE_KWH, "phone charges"),
}
DEFAULT_EQUIVALENTS = ["car_km", "kettles"]


@dataclass(frozen=True)
class Equivalent:
    key: str
    amount: float
    text: str
    factor: float
    factor_unit: str

    def as_dict(self) -> dict:
        return {
            "key": self.key,
            "amount": self.amount,
            "text": self.text,
            "factor": self.factor,
            "factor_unit": self.factor_unit,
        }


def co2_grams(kwh: float, grid_g_per_kwh: float) -> float:
    """Grid CO₂ avoided by generating `kwh` on site instead of importing it."""
    return kwh * grid_g_per_kwh


def equivalents(kwh: float, grid_g_per_kwh: float, options: dict) -> list[Equivalent]:
    """The equivalents named in options["equivalents"] (default car km and kettles)."""
    grams = co2_grams(kwh, grid_g_per_kwh)
    found = []
    for key in options.get("equivalents", DEFAULT_EQUIVALENTS):
        basis, option_key, default, text = EQUIVALENTS[key]
        factor = float(options.get(option_key, default))
        amount = (grams if basis == "co2" else kwh) / factor
        unit = "g CO₂ per km" if basis == "co2" else "kWh each"
        found.append(Equivalent(key, amount, text, factor, unit))
    return found
