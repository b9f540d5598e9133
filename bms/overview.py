"""Data for the staff overview, gathered from every app (bms/ is the one place that may)."""

from __future__ import annotations

from django.utils import timezone

from control.models import ActuatorCommand, Booking, Zone
from sensors.models import Actuator, Alarm, Node


def _last_commands() -> dict[int, ActuatorCommand]:
    latest: dict[int, ActuatorCommand] = {}
    # One query: newest first, keep the first seen per actuator.
    for command in ActuatorCommand.objects.order_by("-requested_at")[:2000]:
        latest.setdefault(command.actuator_id, command)
    return latest


def site_overview() -> dict:
    now = timezone.now()
    last = _last_commands()
    actuators = [{"actuator": a, "last": last.get(a.pk)} for a in Actuator.objects.order_by("name")]
    zones = []
    for zone in Zone.objects.filter(enabled=True).order_by("name"):
        next_booking = (
            Booking.objects.filter(zone=zone, cancelled=False, end__gt=now)
            .order_by("start")
            .first()
        )
        zones.append({"zone": zone, "next_booking": next_booking})
    return {
        "now": now,
        "nodes": Node.objects.order_by("name"),
        "zones": zones,
        "actuators": actuators,
        "open_alarms": Alarm.objects.filter(cleared_at__isnull=True),
    }
