"""Optimum start learning, the impure half: after each pre-heated occupancy starts, read the
zone's own recorded feed, ask the engine for the corrected rate and store it on the zone.

The arithmetic and its reasoning (rate in minutes per K, damped, bounded) are in the engine:
control/engine/strategies/optimum_start.py (`corrected_rate`, `first_reached`).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from django.conf import settings

from control.engine.strategies.optimum_start import corrected_rate, first_reached
from control.models import OptimumStartLog, Zone
from feeds.store import service as feed_service
from feeds.store.phpfina import FeedError

log = logging.getLogger(__name__)


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
