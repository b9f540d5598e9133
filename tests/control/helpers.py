"""Builders for hand-made snapshots (the evaluator is pure, so tests need no database).

Every spec starts from an unsaved model row with its defaults, mapped by control/mapper.py as
the live tick maps a saved one: a test states only what it changes, and the defaults it runs on
are the models' own, never a second copy. Positional arguments follow the spec's field order,
as the dataclass constructor's would: `actuator_spec(20, "Boiler", "boiler", 600, 600, False)`.
"""

from __future__ import annotations

from dataclasses import fields, replace
from datetime import UTC, datetime
from typing import Any, TypeVar

from control import mapper
from control.engine.specs import (
    ActuatorSpec,
    ExceptionSpec,
    KickSpec,
    PlantSpec,
    Reading,
    Snapshot,
    SolarSpec,
    WeatherSpec,
    ZoneSpec,
)
from control.models import HeatingPlant, ScheduleException, SolarCircuit, WeatherCompensation, Zone
from sensors.models import Actuator

NOW = datetime(2026, 1, 14, 9, 0, tzinfo=UTC)  # a Wednesday, GMT = UTC

Spec = TypeVar("Spec")


def at(hour: int, minute: int = 0, day: int = 14, month: int = 1) -> datetime:
    return datetime(2026, month, day, hour, minute, tzinfo=UTC)


def _changed(base: Spec, args: tuple, kw: dict[str, Any]) -> Spec:
    names = [f.name for f in fields(base)]  # type: ignore[arg-type]
    given = dict(zip(names, args, strict=False))
    clash = given.keys() & kw.keys()
    assert not clash, f"given twice: {sorted(clash)}"
    return replace(base, **given, **kw)  # type: ignore[type-var]


def zone_spec(*args: Any, **kw: Any) -> ZoneSpec:
    return _changed(mapper.zone_spec(Zone(), mapper.site_settings()), args, kw)


def actuator_spec(*args: Any, **kw: Any) -> ActuatorSpec:
    return _changed(mapper.actuator_spec(Actuator()), args, kw)


def plant_spec(*args: Any, **kw: Any) -> PlantSpec:
    return _changed(mapper.plant_spec(HeatingPlant(), mapper.site_settings()), args, kw)


def solar_spec(*args: Any, **kw: Any) -> SolarSpec:
    return _changed(mapper.solar_spec(SolarCircuit()), args, kw)


def weather_spec(*args: Any, **kw: Any) -> WeatherSpec:
    base = mapper.weather_config_spec(WeatherCompensation(), mapper.site_settings())
    return _changed(base, args, kw)


def kick_spec(*args: Any, **kw: Any) -> KickSpec:
    plant = HeatingPlant()
    base = mapper.kick_spec(True, plant.pump_kick_idle_days, plant.pump_kick_s)
    assert base is not None
    return _changed(base, args, kw)


def exception_spec(*args: Any, **kw: Any) -> ExceptionSpec:
    return _changed(mapper.exception_spec(ScheduleException()), args, kw)


def zone(temp: float | None = 15.0, now: datetime = NOW, **kw) -> ZoneSpec:
    reading = None if temp is None else Reading(now.timestamp() - 30, temp)
    # A zone with a temperature sensor (an unsaved row has none).
    base = zone_spec(
        id=1, name="Hall", slug="hall", has_sensor=True, reading=reading, actuator_ids=(10,)
    )
    return replace(base, **kw)


def valve(**kw) -> ActuatorSpec:
    """The Hall valve, in the state its board last confirmed (closed unless `is_on=True`)."""
    base = actuator_spec(
        id=10, name="Hall valve", kind="valve", min_on_s=0, min_off_s=0, is_on=False,
        confirmed=True,
    )  # fmt: skip
    return replace(base, **kw)


def snapshot(zones=(), actuators=(), now: datetime = NOW, **kw) -> Snapshot:
    kw.setdefault("time_zone", mapper.site_settings().time_zone)
    return Snapshot(now=now, zones=tuple(zones), actuators={a.id: a for a in actuators}, **kw)
