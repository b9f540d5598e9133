"""Sun position, clear-sky irradiance and PV output. No Django.

Solar position: Cooper's declination, the Spencer-style equation of time and the hour angle
from the longitude (good to ~0.5°, plenty for a demo). Clear-sky global horizontal irradiance:
Haurwitz (1945), GHI = 1098 · cos z · exp(−0.057 / cos z) W/m², which needs only the zenith angle.
PV output assumes the array sees the global horizontal irradiance (no tilt/azimuth transposition)
and a fixed performance ratio for inverter, wiring and temperature losses.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime


def declination_deg(day_of_year: int) -> float:
    """Cooper (1969): δ = 23.45° · sin(360° · (284 + n) / 365)."""
    return 23.45 * math.sin(math.radians(360.0 * (284 + day_of_year) / 365.0))


def equation_of_time_min(day_of_year: int) -> float:
    """Apparent minus mean solar time, minutes (Duffie & Beckman approximation)."""
    b = math.radians(360.0 * (day_of_year - 81) / 364.0)
    return 9.87 * math.sin(2 * b) - 7.53 * math.cos(b) - 1.5 * math.sin(b)


def solar_elevation_deg(latitude: float, longitude: float, when: datetime) -> float:
    """Sun's elevation above the horizon (degrees, negative at night) at an aware datetime."""
    utc = when.astimezone(UTC)
    day = utc.timetuple().tm_yday
    utc_hours = utc.hour + utc.minute / 60.0 + utc.second / 3600.0
    solar_time = utc_hours + longitude / 15.0 + equation_of_time_min(day) / 60.0
    hour_angle = math.radians(15.0 * (solar_time - 12.0))
    lat = math.radians(latitude)
    dec = math.radians(declination_deg(day))
    sin_alt = math.sin(lat) * math.sin(dec) + math.cos(lat) * math.cos(dec) * math.cos(hour_angle)
    return math.degrees(math.asin(max(-1.0, min(1.0, sin_alt))))


def solar_noon_utc_hours(longitude: float, day_of_year: int) -> float:
    """UTC hour at which the sun crosses the meridian (highest elevation)."""
    return 12.0 - longitude / 15.0 - equation_of_time_min(day_of_year) / 60.0


def clear_sky_ghi(elevation_deg: float) -> float:
    """Haurwitz clear-sky global horizontal irradiance, W/m² (0 with the sun below the horizon)."""
    cos_zenith = math.sin(math.radians(elevation_deg))
    if cos_zenith <= 0.0:
        return 0.0
    return 1098.0 * cos_zenith * math.exp(-0.057 / cos_zenith)


def pv_power_w(irradiance_w_m2: float, peak_kw: float, performance_ratio: float = 0.8) -> float:
    """AC output of an array rated `peak_kw` at 1000 W/m² (STC), linear in irradiance."""
    return max(0.0, peak_kw * irradiance_w_m2 * performance_ratio)
