"""A plain-words line for a solar panel showing zero for a reason (issue #28): "0 W ·
0.00 kWh" on a winter morning reads as broken; "Not running: collector cooler than the
store" or "after sunset" says it is doing what it should.

A panel asks for it with options.explain_zero: "sun" (PV: night) or "solar_thermal" (night,
then the collector against the store, options.collector_feed and options.store_feed). Only
when the value is zero; the reason is left out when what it needs is unknown (no site
position, no recent temperature), never guessed.
"""

from __future__ import annotations

from displays import sun
from feeds.models import Feed

ZERO = 0.5  # W or kWh: below this the panel reads 0
# The solar circuit's pump starts at collector - store >= 6 K (control/ defaults, DESIGN.md)
PUMP_START_K = 6.0
FRESH_S = 3600  # a temperature older than this says nothing about now


def _night(site, now: int) -> str | None:
    if site is None or site.latitude is None or site.longitude is None:
        return None
    if sun.is_up(site.latitude, site.longitude, now):
        return None
    noon_side = sun.elevation_deg(site.latitude, site.longitude, now + 6 * 3600)
    # six hours on the sun is higher: it is early morning, else evening
    return (
        "before sunrise"
        if noon_side > sun.elevation_deg(site.latitude, site.longitude, now)
        else "after sunset"
    )


def _temperature(feed_id, last: dict, now: int, public_only: bool) -> float | None:
    if not isinstance(feed_id, int) or isinstance(feed_id, bool):
        return None
    if public_only and not Feed.objects.filter(pk=feed_id, public=True).exists():
        return None  # a private feed's value never reaches an anonymous screen
    t, value = last.get(feed_id, (None, None))
    if t is None or value is None or now - t > FRESH_S:
        return None
    return float(value)


def reason(options: dict, site, now: int, last: dict, public_only: bool) -> str | None:
    """Why the panel's value is zero, in words, or None."""
    kind = options.get("explain_zero")
    if kind not in ("sun", "solar_thermal"):
        return None
    night = _night(site, now)
    if night:
        return f"Not running: {night}"
    if kind == "sun":
        return None
    collector = _temperature(options.get("collector_feed"), last, now, public_only)
    store = _temperature(options.get("store_feed"), last, now, public_only)
    if collector is None or store is None:
        return None
    if collector <= store:
        return (f"Not running: collector ({collector:.0f} °C) cooler than the store "
                f"({store:.0f} °C)")  # fmt: skip
    if collector - store < PUMP_START_K:
        return (f"Not running: collector only {collector - store:.0f} °C warmer than the "
                f"store; the pump starts at {PUMP_START_K:.0f} °C")  # fmt: skip
    return None
