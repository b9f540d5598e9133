"""Over-temperature cut-off: heating off from the zone's maximum until it has cooled a band
below it (without a band a reading flickering 28.0 / 27.9 °C toggled the boiler
every tick, and a safety decision rightly skips the minimum run/off times, so the band must
come from the limit itself)."""

from __future__ import annotations


def cut_off(
    temperature: float, max_temperature: float, band_k: float = 0.0, was_active: bool = False
) -> bool:
    if temperature >= max_temperature:
        return True
    return was_active and temperature > max_temperature - band_k
