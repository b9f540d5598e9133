"""Defaults live once, on the models: a spec mapped from a fresh (unsaved, default) row carries
exactly the model's defaults, and the spec dataclasses declare none of their own for them.

Before the engine split (#24) the same defaults were written twice, on the model fields and on
the spec dataclasses, with nothing holding them together: tests built specs from one copy and
the live tick from the other.
"""

from __future__ import annotations

from dataclasses import MISSING, fields
from typing import Any

import pytest
from django.core.exceptions import FieldDoesNotExist
from django.db import models

from control import mapper
from control.engine.specs import ZoneSpec
from control.models import HeatingPlant, SolarCircuit, WeatherCompensation, Zone, ZoneTuning
from control.runtime import ActuatorRuntime
from sensors.models import Actuator

# Spec fields named differently from the model field they come from.
WEATHER_NAMES = {
    "host": "register_host",
    "port": "register_port",
    "device_id": "register_device_id",
    "register": "register_address",
    "open_id": "open_actuator",
    "close_id": "close_actuator",
}
# Derived from model fields, not copies of one (checked on their own below).
DERIVED = {"kick", "max_pulse_s", "has_sensor", "sensor_name", "outside_name", "flow_name"}


def _twins(spec: Any, *rows: models.Model, names: dict[str, str] | None = None) -> dict:
    """spec field -> (spec value, model default, dataclass field) for every spec field a model
    field backs (by name, by attname such as `boiler_id`, or through `names`)."""
    found = {}
    for f in fields(spec):
        if f.name in DERIVED:
            continue
        name = (names or {}).get(f.name, f.name)
        for row in rows:
            try:
                model_field = row._meta.get_field(name)
            except FieldDoesNotExist:
                continue
            # Concrete columns only: a reverse relation (Zone.bookings) is not a default.
            if getattr(model_field, "concrete", False) and not model_field.primary_key:
                found[f.name] = (getattr(spec, f.name), model_field.get_default(), f)
            break
    return found


def _site() -> mapper.SiteSettings:
    return mapper.site_settings()


CASES = {
    "zone": lambda: (mapper.zone_spec(Zone(), _site()), (Zone(), ZoneTuning()), None),
    "actuator": lambda: (mapper.actuator_spec(Actuator()), (Actuator(),), None),
    "plant": lambda: (mapper.plant_spec(HeatingPlant(), _site()), (HeatingPlant(),), None),
    "solar": lambda: (mapper.solar_spec(SolarCircuit()), (SolarCircuit(),), None),
    "weather": lambda: (
        mapper.weather_config_spec(WeatherCompensation(), _site()),
        (WeatherCompensation(),),
        WEATHER_NAMES,
    ),
}


@pytest.mark.parametrize("kind", CASES)
def test_a_spec_from_a_default_row_carries_the_models_defaults(kind):
    spec, rows, names = CASES[kind]()
    twins = _twins(spec, *rows, names=names)
    assert twins, f"no model field backs a {kind} spec field"
    for name, (value, default, _field) in twins.items():
        assert value == default, f"{kind}.{name}: spec {value!r}, model default {default!r}"


@pytest.mark.parametrize("kind", CASES)
def test_the_spec_declares_no_default_of_its_own_for_a_model_field(kind):
    spec, rows, names = CASES[kind]()
    for name, (_value, _default, f) in _twins(spec, *rows, names=names).items():
        has_default = f.default is not MISSING or f.default_factory is not MISSING
        # A nullable relation's "no default" is None on both sides (e.g. the index zone).
        assert not has_default or f.default is None, f"{kind}.{name} has a default of its own"


def test_every_twin_has_one_source():
    """The 43 defaults the issue counted twice (and the ones found since) come from the models."""
    total = 0
    for make in CASES.values():
        spec, rows, names = make()
        total += sum(
            1
            for _v, _d, f in _twins(spec, *rows, names=names).values()
            if f.default is MISSING and f.default_factory is MISSING
        )
    assert total >= 43


def test_the_pump_kick_comes_from_the_plants_fields():
    plant = HeatingPlant()
    kick = mapper.plant_spec(plant, _site()).kick
    assert kick is not None
    assert (kick.idle_s, kick.run_s) == (plant.pump_kick_idle_days * 86400, plant.pump_kick_s)
    assert mapper.plant_spec(HeatingPlant(pump_kick=False), _site()).kick is None


def test_settings_reach_the_specs_through_the_mapper(settings):
    settings.BMS_CONTROL_FALLBACK_DUTY = 30
    settings.BMS_CONTROL_LIMIT_BAND = 2.0
    settings.BMS_CONTROL_TICK = 10
    spec = mapper.zone_spec(Zone(), _site())
    assert spec.fallback_duty_pct == settings.BMS_CONTROL_FALLBACK_DUTY == 30.0
    assert spec.fallback_period_s == settings.BMS_CONTROL_FALLBACK_PERIOD
    assert spec.limit_band_k == 2.0
    assert mapper.plant_spec(HeatingPlant(), _site()).limit_band_k == 2.0
    weather = mapper.weather_config_spec(WeatherCompensation(), _site())
    assert weather.max_pulse_s == 6.0  # a pulse ends well before the next (10 s) tick
    assert _site().time_zone == settings.TIME_ZONE


def test_runtime_state_is_put_on_an_actuator_spec():
    spec = mapper.actuator_spec(Actuator(pk=3, name="Boiler", kind="boiler"))
    assert spec.is_on is None and spec.fault is False  # unknown until the runtime says
    state = ActuatorRuntime(on=True, changed_at=100.0, fault="no answer", owner="zone 'Hall'")
    live = mapper.with_runtime(spec, state)
    assert (live.is_on, live.changed_at, live.fault, live.owner) == (
        True,
        100.0,
        True,
        "zone 'Hall'",
    )
    assert live.min_on_s == Actuator._meta.get_field("min_on_s").get_default()


def test_a_zone_spec_cannot_be_built_without_its_settings():
    with pytest.raises(TypeError):
        ZoneSpec(id=1, name="Hall")  # type: ignore[call-arg]
