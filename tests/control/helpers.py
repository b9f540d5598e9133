"""Builders for hand-made snapshots (the evaluator is pure, so tests need no database)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from control.engine.specs import ActuatorSpec, Reading, Snapshot, ZoneSpec

NOW = datetime(2026, 1, 14, 9, 0, tzinfo=UTC)  # a Wednesday, GMT = UTC


def at(hour: int, minute: int = 0, day: int = 14, month: int = 1) -> datetime:
    return datetime(2026, month, day, hour, minute, tzinfo=UTC)


def zone(temp: float | None = 15.0, now: datetime = NOW, **kw) -> ZoneSpec:
    reading = None if temp is None else Reading(now.timestamp() - 30, temp)
    base = ZoneSpec(id=1, name="Hall", slug="hall", reading=reading, actuator_ids=(10,))
    return replace(base, **kw)


def valve(**kw) -> ActuatorSpec:
    base = ActuatorSpec(
        id=10, name="Hall valve", kind="valve", min_on_s=0, min_off_s=0, is_on=False
    )
    return replace(base, **kw)


def snapshot(zones=(), actuators=(), now: datetime = NOW, **kw) -> Snapshot:
    return Snapshot(now=now, zones=tuple(zones), actuators={a.id: a for a in actuators}, **kw)
