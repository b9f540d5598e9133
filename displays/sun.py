"""Where the sun is, for a kiosk saying why solar shows zero ("after sunset").

Pure, no Django. The NOAA solar position approximation (declination and equation of time
from the fractional year; NOAA Global Monitoring Laboratory, "General Solar Position
Calculations"): within a few tenths of a degree, plenty to tell night from day.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime


def elevation_deg(latitude: float, longitude: float, t: float) -> float:
    """The sun's elevation above the horizon in degrees at unix time `t`."""
    when = datetime.fromtimestamp(t, UTC)
    day = when.timetuple().tm_yday
    hours = when.hour + when.minute / 60 + when.second / 3600
    g = 2 * math.pi / 365 * (day - 1 + (hours - 12) / 24)  # fractional year, radians
    eqtime = 229.18 * (0.000075 + 0.001868 * math.cos(g) - 0.032077 * math.sin(g)
                       - 0.014615 * math.cos(2 * g) - 0.040849 * math.sin(2 * g))  # fmt: skip
    decl = (0.006918 - 0.399912 * math.cos(g) + 0.070257 * math.sin(g)
            - 0.006758 * math.cos(2 * g) + 0.000907 * math.sin(2 * g)
            - 0.002697 * math.cos(3 * g) + 0.00148 * math.sin(3 * g))  # fmt: skip
    true_solar_min = hours * 60 + eqtime + 4 * longitude
    hour_angle = math.radians(true_solar_min / 4 - 180)
    lat = math.radians(latitude)
    cos_zenith = math.sin(lat) * math.sin(decl) + math.cos(lat) * math.cos(decl) * math.cos(
        hour_angle
    )
    return 90 - math.degrees(math.acos(max(-1.0, min(1.0, cos_zenith))))


def is_up(latitude: float, longitude: float, t: float) -> bool:
    # -0.833°: the sun's upper edge on the horizon, with refraction (sunrise and sunset)
    return elevation_deg(latitude, longitude, t) > -0.833
