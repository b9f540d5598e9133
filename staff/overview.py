"""Data for the staff overview, gathered from every app (staff/ is the one app that may)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from django.utils import timezone

from alarms.models import Alarm
from control.engine.specs import OPTIMUM_START
from control.engine.strategies.optimum_start import preheat_minutes
from control.models import ActuatorCommand
from control.status import actuator_status, zone_status
from sensors.ingest import node_state as node_state
from sensors.models import Node


def _node_rows(now: float) -> list[dict]:
    nodes = list(Node.objects.select_related("site").order_by("name"))
    seen = node_state.heard_times({n.pk: n.interval for n in nodes}, now)
    rows = []
    for node in nodes:
        last = seen.get(node.pk)
        rows.append(
            {
                "node": node,
                "last_seen": datetime.fromtimestamp(last, UTC) if last else None,
                "online": node.enabled and not node_state.is_silent(last, node.interval, now),
            }
        )
    return rows


def _last_commands(actuator_ids: list[int]) -> dict[int, ActuatorCommand]:
    latest: dict[int, ActuatorCommand] = {}
    # Newest first, keep the first seen per actuator: one query, bounded.
    recent = ActuatorCommand.objects.filter(actuator_id__in=actuator_ids).order_by("-requested_at")
    for command in recent[:5000]:
        latest.setdefault(command.actuator_id, command)
    return latest


def _with_preheat_start(rows: list[dict]) -> list[dict]:
    """Add when pre-heat for the next booking will start, at the zone's learned rate."""
    for row in rows:
        zone, booking = row["zone"], row["next_booking"]
        row["preheat_start"] = None
        if booking is None or row["temperature"] is None or not zone.optimum_start:
            continue
        setpoint = booking.setpoint or zone.comfort_setpoint
        minutes = preheat_minutes(
            row["temperature"], setpoint, zone.heating_rate_min_per_k, zone.max_preheat_min
        )
        latched = row.get("preheat_min")
        if row["mode"] == OPTIMUM_START and latched is not None and booking.start > timezone.now():
            # Pre-heat has started: control holds the minutes it computed at switch-on (so the
            # start does not move while the room warms), so show those, not a figure recomputed from the room as it is now (the
            # page said 82 min while the zone's reason said 80).
            minutes = float(latched)
        row["preheat_start"] = booking.start - timedelta(minutes=minutes)
        row["preheat_min_planned"] = round(minutes)
    return rows


def site_overview() -> dict:
    now = time.time()
    actuators = actuator_status()
    last = _last_commands([row["id"] for row in actuators])
    for row in actuators:
        row["last_command"] = last.get(row["id"])
    return {
        "now": timezone.now(),
        "nodes": _node_rows(now),
        "zones": _with_preheat_start(zone_status()),
        "actuators": actuators,
        **open_alarm_summary(OVERVIEW_ALARMS),
    }


# Open alarms drawn on the overview (most urgent first); the alarm list pages through the rest.
OVERVIEW_ALARMS = 20


def open_alarm_summary(limit: int, offset: int = 0) -> dict:
    """The open alarms to draw (critical first, newest first within a severity) and what the
    page says of all of them: how many per severity and the newest unacknowledged one.

    A bounded slice plus two aggregate queries, whatever the number open: 10,000 open alarms
    (a flood) must not make a 3.6 MB page that buries the relay alarm."""
    open_alarms = Alarm.objects.open()
    by_severity = open_alarms.counts_by_severity()
    unacknowledged = open_alarms.filter(acknowledged_at__isnull=True)
    shown = open_alarms.by_urgency().select_related("acknowledged_by")[offset : offset + limit]
    return {
        "open_alarms": list(shown),
        "open_total": sum(by_severity.values()),
        "open_by_severity": [
            (severity, by_severity[severity])
            for severity in (Alarm.Severity.CRITICAL, Alarm.Severity.WARNING, Alarm.Severity.INFO)
            if by_severity.get(severity)
        ],
        "unacknowledged": unacknowledged.count(),
        "newest_unacknowledged": unacknowledged.order_by("-pk").values_list("pk", flat=True).first()
        or 0,
    }
