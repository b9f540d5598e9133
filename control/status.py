"""What every zone and actuator is doing, and why — for the staff pages and the admin.

    from control.status import actuator_status, zone_status
    zone_status()      -> [{"zone": Zone, "mode": ..., "reason": ..., "flags": [...], ...}]
    actuator_status()  -> [{"actuator": Actuator, "state": "ON", "why": ..., "fault": ...}]

Read from what the last control tick stored in Redis (control/runtime.py), so a page never
waits on a relay board.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from django.conf import settings
from django.db.models import Prefetch
from django.utils import timezone

from control import calendar, runtime
from control.models import (
    CalendarEntry,
    HeatingPlant,
    OutputOverride,
    Override,
    RelayBoard,
    ScheduleException,
    WeatherCompensation,
    Zone,
)
from control.words import zone_words
from core.dates import time_text
from feeds.store import service as feed_service
from sensors.models import Actuator

COMING_DAYS = 7  # days of each zone's schedule shown on the plant status page

FLAG_LABELS = {
    "sensor_fault": "sensor fault: fallback",
    "actuator_fault": "actuator fault",
    "window_open": "window open: heating paused",
}
# Flags that say what a zone is doing, not that something is wrong with it.
NOT_FAULTS = frozenset({"window_open"})


def _dt(ts: float | None) -> datetime | None:
    return None if ts is None else datetime.fromtimestamp(ts, UTC)


def _state_label(state: runtime.ActuatorRuntime) -> str:
    if state.relinquished:
        return "released to its controller"
    if state.on is None:
        return "unknown"
    return "ON" if state.on else "OFF"


def _owner(actuator: Actuator, state: runtime.ActuatorRuntime) -> str:
    """Who drives it: "zone 'Hall'", "heating plant 'Boiler house'", or nobody."""
    if not actuator.enabled:
        return "disabled: never switched"
    if state.owner:
        return state.owner
    if state.relinquished:
        return "not controlled — handed back to its BACnet controller"
    return f"not controlled — idle state {'ON' if actuator.idle_state else 'OFF'}"


def actuator_status(actuators: list[Actuator] | None = None) -> list[dict[str, Any]]:
    if actuators is None:
        actuators = list(Actuator.objects.select_related("node"))
    states = runtime.load_actuators([a.pk for a in actuators])
    now = timezone.now()
    overrides: dict[int, Override] = {}
    for o in Override.objects.active(now).filter(actuator__in=actuators).order_by("starts"):
        overrides[o.actuator_id] = o
    rows = []
    for a in actuators:
        s = states[a.pk]
        if not a.enabled:
            why = "Actuator disabled: never switched"
        elif s.decided_at is None:
            why = "Not driven by any zone, plant or override yet"
        else:
            why = s.reason
        rows.append(
            {
                "actuator": a,
                "id": a.pk,
                "owner": _owner(a, s),
                "name": a.name,
                "kind": a.get_kind_display(),
                "driver": a.get_driver_display(),
                "state": _state_label(s),
                "on": s.on,
                "confirmed": s.confirmed,
                "fault": s.fault,
                "why": why,
                "strategy": s.strategy,
                "since": _dt(s.changed_at),
                "decided_at": _dt(s.decided_at),
                "sent_at": _dt(s.sent_at),
                "override": overrides.get(a.pk),
            }
        )
    return rows


def zone_status(zones: list[Zone] | None = None) -> list[dict[str, Any]]:
    now = timezone.now()
    tz = ZoneInfo(settings.TIME_ZONE)
    today = now.astimezone(tz).date()
    if zones is None:
        zones = list(
            Zone.objects.select_related("temperature_sensor", "schedule").prefetch_related(
                "actuators",
                "schedule__periods",
                Prefetch(
                    "schedule__exceptions",
                    queryset=ScheduleException.objects.filter(
                        date__gte=today - timedelta(days=1),
                        date__lte=today + timedelta(days=COMING_DAYS),
                    ),
                ),
                # Only the calendar entries of the days shown (control/calendar.coming_days).
                Prefetch(
                    "schedule__calendars__entries",
                    queryset=CalendarEntry.objects.filter(
                        first_day__lte=today + timedelta(days=COMING_DAYS),
                        last_day__gte=today - timedelta(days=1),
                    ),
                ),
            )
        )
    results = runtime.load_zones([z.pk for z in zones])
    feed_ids = [
        z.temperature_sensor.feed_id
        for z in zones
        if z.temperature_sensor and z.temperature_sensor.feed_id
    ]
    last = feed_service.last_values(feed_ids)
    all_actuators = {a.pk: a for z in zones for a in z.actuators.all()}
    by_id = {row["id"]: row for row in actuator_status(list(all_actuators.values()))}
    rows = []
    coming: dict[tuple, list[dict]] = {}
    for z in zones:
        result = results.get(z.pk)
        feed_id = z.temperature_sensor.feed_id if z.temperature_sensor else None
        reading = last.get(feed_id) if feed_id else None
        actuators = [by_id[a.pk] for a in z.actuators.all()]
        # A disabled zone is not evaluated: what its last evaluation flagged is history.
        flags = list(result["flags"]) if result and z.enabled else []
        if any(a["fault"] for a in actuators) and "actuator_fault" not in flags:
            flags.append("actuator_fault")
        if not z.enabled:
            mode, reason = "disabled", "Zone disabled: not controlled"
        elif result is None:
            mode, reason = "waiting", "Not evaluated yet: waiting for the first control tick"
        else:
            mode, reason = result["mode"], result["reason"]
        next_booking = z.bookings.filter(cancelled=False, end__gt=now).order_by("start").first()
        rows.append(
            {
                "zone": z,
                "id": z.pk,
                "name": z.name,
                "slug": z.slug,
                "temperature": reading[1] if reading else None,
                "reading_at": _dt(reading[0]) if reading else None,
                "target": result.get("target") if result else None,
                "demand": bool(result and result["demand"]),
                "mode": mode,
                "mode_words": zone_words(
                    mode,
                    bool(result and result["demand"]),
                    reading[1] if reading else None,
                    result.get("target") if result else None,
                ),
                "reason": reason,
                "flags": flags,
                "flag_labels": [FLAG_LABELS.get(f, f) for f in flags],
                "fault": bool(set(flags) - NOT_FAULTS),
                "preheat_min": result.get("preheat_min") if result else None,
                "evaluated_at": _dt(result["evaluated_at"]) if result else None,
                "actuators": actuators,
                "next_booking": next_booking,
                # What the schedule will do each day (closures included), as the strategy sees it.
                "coming_days": _coming_days(z, today, tz, coming),
            }
        )
    return rows


def _coming_days(zone: Zone, today, tz: ZoneInfo, seen: dict[tuple, list[dict]]) -> list[dict]:
    # Rooms sharing a schedule (a whole building) share its days: work each out once a page.
    key = (zone.schedule_id, zone.comfort_setpoint)
    if key not in seen:
        seen[key] = calendar.coming_days(zone, today, tz, COMING_DAYS)
    return seen[key]


def _weather(plant: HeatingPlant) -> WeatherCompensation | None:
    try:
        return plant.weather
    except WeatherCompensation.DoesNotExist:
        return None


def output_rows() -> list[dict[str, Any]]:
    """Each weather-compensated circuit as the last tick left it (control/outputs.py keeps it
    in Redis): outside, target and measured flow, the output, who owns it and its fault."""
    from control.outputs import output_status

    plants = [
        p
        for p in HeatingPlant.objects.select_related("weather").order_by("name")
        if _weather(p) is not None
    ]
    states = output_status([p.pk for p in plants])
    now = timezone.now()
    held: dict[int, OutputOverride] = {}
    for o in (
        OutputOverride.objects.active(now)
        .filter(plant__in=plants)
        .select_related("created_by")
        .order_by("starts", "pk")
    ):
        held[o.plant_id] = o  # the newest wins, as in the tick (control/snapshot.py)
    rows = []
    for p in plants:
        w = p.weather
        s = states.get(p.pk) or {}
        three_point = w.output == WeatherCompensation.Output.THREE_POINT
        if not (w.enabled and p.enabled):
            owner, why = "disabled: not driven", "Weather compensation or plant disabled"
        elif not s.get("decided_at"):
            owner, why = "—", "Not evaluated yet: waiting for the first control tick"
        else:
            owner, why = s.get("owner") or "weather compensation", s.get("reason", "")
        rows.append(
            {
                "plant": p,
                "id": p.pk,
                "name": p.name,
                "mode": w.get_mode_display(),
                "output_kind": "three-point valve"
                if three_point
                else (
                    f"BACnet {w.bacnet_object} at priority {w.bacnet_priority}"
                    if w.output == WeatherCompensation.Output.BACNET
                    else "holding register"
                ),
                "unit": "°C" if w.mode == WeatherCompensation.Mode.BOILER_SETPOINT else "%",
                "outside_c": s.get("outside_c"),
                "flow_setpoint_c": s.get("flow_setpoint_c"),
                "flow_c": s.get("flow_c"),
                "value": s.get("value"),
                "position_pct": s.get("position_pct") if three_point else None,
                "raw": s.get("raw"),
                "owner": owner,
                "strategy": s.get("strategy", ""),
                "why": why,
                "fault": s.get("fault") or "",
                "confirmed": bool(s.get("confirmed")) if not three_point else not s.get("fault"),
                "decided_at": _dt(s.get("decided_at")),
                "override": held.get(p.pk),
            }
        )
    return rows


def watchdog_text(board: RelayBoard, state: dict[str, Any]) -> tuple[str, bool]:
    """A board's watchdog in words, and whether that is a fault: for the status page and the
    admin list alike."""
    if board.watchdog_register is None:
        return "no watchdog on this board", False
    if not board.enabled:
        return "disabled: not written", False
    if not state:
        return "not written yet (the next control tick writes it)", False
    if state.get("ok"):
        text = f"{state['value']} written to register {state['register']}"
        if state.get("read_value") is not None and state.get("read_at") is not None:
            at = time_text(timezone.localtime(_dt(state["read_at"])), seconds=True)
            text += f"; read back {state['read_value']} at {at}"
        elif state.get("unreadable"):
            text += f"; the board does not read it back ({state['unreadable']})"
        if state.get("rewrite_reason"):
            text += f"; last rewritten: {state['rewrite_reason']}"
        return text, False
    text = f"FAULT: {state.get('error') or 'not written'}"
    if state.get("read_value") is not None and state.get("read_at") is not None:
        at = time_text(timezone.localtime(_dt(state["read_at"])), seconds=True)
        text += f" (read {state['read_value']} at {at})"
    return text, True


def board_rows() -> list[dict[str, Any]]:
    """Each relay board's own communication watchdog as the last tick left it: whether the
    plant will drop to the board's safe state if this server goes silent."""
    from control.outputs import watchdog_status

    boards = list(RelayBoard.objects.all())
    states = watchdog_status([b.pk for b in boards])
    rows = []
    for b in boards:
        state = states.get(b.pk) or {}
        status, fault = watchdog_text(b, state)
        rows.append(
            {
                "id": b.pk,
                "name": b.name,
                "address": f"{b.host}:{b.port} unit {b.device_id}",
                "status": status,
                "fault": fault,
                "written_at": _dt(state.get("written_at")) if state.get("ok") else None,
                "read_at": _dt(state.get("read_at")),
                "read_value": state.get("read_value"),
            }
        )
    return rows
