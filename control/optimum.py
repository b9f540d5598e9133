"""Optimum start learning: after each pre-heated occupancy starts, measure how fast the zone
really heated (from its own recorded feed) and move the zone's rate toward it.

The rate is minutes per K. A zone that was short of its setpoint at occupancy start heated
slower than predicted: its measured rate is the pre-heat time over the rise it achieved.
A zone that reached setpoint early is measured by when it got there. The step is damped
(half way to the measurement) so one odd day — a door left open — does not swing it, and
bounded to the model's limits. Self-tuning in this way is what Siemens SSTO, Johnson
Controls OST and Niagara's optimum start do.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime

from django.conf import settings

from control.models import OptimumStartLog, Zone
from feeds.store import service as feed_service
from feeds.store.phpfina import FeedError

log = logging.getLogger(__name__)

MIN_RATE = 0.5
MAX_RATE = 600.0
DAMPING = 0.5  # fraction of the way from the old rate to the measured one
MIN_RISE_K = 0.2  # below this the rise is noise: no measurement


@dataclass(frozen=True)
class Learning:
    rate_after: float
    miss_k: float
    note: str


def corrected_rate(
    rate_before: float,
    preheat_run_min: float,
    temp_at_preheat: float,
    temp_at_start: float,
    setpoint: float,
    reached_after_min: float | None = None,
) -> Learning:
    """The new min/K rate after one pre-heated occupancy start (pure)."""
    miss = setpoint - temp_at_start
    if reached_after_min is not None and setpoint - temp_at_preheat >= MIN_RISE_K:
        measured = reached_after_min / (setpoint - temp_at_preheat)
        note = f"reached {setpoint:.1f} °C after {reached_after_min:.0f} min"
    elif temp_at_start - temp_at_preheat >= MIN_RISE_K:
        measured = preheat_run_min / (temp_at_start - temp_at_preheat)
        note = f"rose {temp_at_start - temp_at_preheat:.1f} K in {preheat_run_min:.0f} min"
    elif miss > 0:
        # Heated and did not warm: slower than thought (or a plant fault; see alarms).
        measured = rate_before * 1.5
        note = "no measurable rise: rate raised by half"
    else:
        return Learning(rate_before, miss, "already warm: nothing to learn")
    new = rate_before + DAMPING * (measured - rate_before)
    new = min(MAX_RATE, max(MIN_RATE, new))
    return Learning(round(new, 2), round(miss, 2), f"{note}; measured {measured:.1f} min/K")


def first_reached(points: list[list], setpoint: float, start_s: float) -> float | None:
    """Minutes from start_s to the first recorded value at or above setpoint."""
    for t_ms, value in points:
        if value is not None and value >= setpoint:
            return max(0.0, (t_ms / 1000 - start_s) / 60)
    return None


def learn_from_event(event: dict) -> OptimumStartLog | None:
    """Apply one 'occupancy_start' event from the evaluator. Reads the zone's feed."""
    zone = (
        Zone.objects.select_related("temperature_sensor__feed").filter(pk=event["zone_id"]).first()
    )
    if zone is None or not zone.optimum_start:
        return None
    started, occupancy = float(event["started"]), float(event["occupancy"])
    setpoint = float(event["setpoint"])
    reached = None
    feed = zone.temperature_sensor.feed if zone.temperature_sensor else None
    if feed is not None:
        try:
            points = feed_service.read(
                feed.pk,
                int(started),
                int(occupancy),
                max(feed.interval, 10),
                average=True,
                timezone=settings.TIME_ZONE,
            )
            reached = first_reached(points, setpoint, started)
        except FeedError as exc:
            log.warning("optimum start: cannot read feed %s of zone %s: %s", feed.pk, zone, exc)
    learning = corrected_rate(
        zone.heating_rate_min_per_k,
        (occupancy - started) / 60,
        float(event["temp"]),
        float(event["temp_at_start"]),
        setpoint,
        reached,
    )
    entry = OptimumStartLog.objects.create(
        zone=zone,
        occupancy_start=datetime.fromtimestamp(occupancy, UTC),
        label=str(event.get("label", ""))[:300],
        setpoint=setpoint,
        preheat_started=datetime.fromtimestamp(started, UTC),
        temp_at_preheat=float(event["temp"]),
        temp_at_start=float(event["temp_at_start"]),
        miss_k=learning.miss_k,
        rate_before=zone.heating_rate_min_per_k,
        rate_after=learning.rate_after,
        note=learning.note[:300],
    )
    Zone.objects.filter(pk=zone.pk).update(heating_rate_min_per_k=learning.rate_after)
    return entry
