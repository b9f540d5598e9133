"""Weather compensation in the evaluator: curve -> PI -> output, and the limits that win."""

from __future__ import annotations

from dataclasses import replace

import pytest

from control.engine.evaluator import evaluate
from control.engine.specs import (
    FROST,
    OVER_TEMPERATURE,
    SENSOR_FALLBACK,
    WEATHER,
    PlantSpec,
    Reading,
)

from .helpers import NOW, actuator_spec, plant_spec, snapshot, valve, weather_spec, zone

T = NOW.timestamp()
BOILER = actuator_spec(20, "Boiler", "boiler", 0, 0, False)
PUMP = actuator_spec(21, "Pump", "pump", 0, 0, False)
OPENER = actuator_spec(30, "Mix open", "relay", 0, 0, False)
CLOSER = actuator_spec(31, "Mix close", "relay", 0, 0, False)
# Kp 5 %/K, Ti 100 s; slope 1.5: outside 0 °C and a 20 °C room -> 50 °C flow.
MIXING = weather_spec(kp=5.0, ti_s=100.0, flow_min_c=20.0, flow_max_c=75.0, flow_limit_c=85.0)


def plant(outside: float | None = 0.0, flow: float | None = 40.0, **kw) -> PlantSpec:
    base = plant_spec(
        1,
        "Boiler house",
        20,
        (1,),
        pump_id=21,
        has_bypass=True,
        outside=None if outside is None else Reading(T - 10, outside),
        outside_name="outside-t",
        flow=None if flow is None else Reading(T - 10, flow),
        flow_name="flow-t",
        weather=MIXING,
        frost_outside_c=-5.0,  # so 0 °C outside is not plant frost here
    )
    return replace(base, **kw)


def heating_zone(**kw):
    # Below its setback set point: the zone calls for heat at 20 °C.
    return zone(temp=15.0, setback_setpoint=20.0, **kw)


def run(p: PlantSpec, zones=None, memory=None, actuators=None):
    zones = [heating_zone()] if zones is None else zones
    actuators = (valve(), BOILER, PUMP) if actuators is None else actuators
    return evaluate(snapshot(zones, actuators, plants=(p,), memory=memory or {}))


def test_the_mixing_loop_runs_pi_from_the_curve_and_carries_its_integral():
    ev = run(plant(flow=40.0))
    out = ev.outputs[1]
    # Curve 50 °C; error 10 K; first step dt 30 s: P 50 + I 15 = 65 %.
    assert out.flow_setpoint_c == pytest.approx(50.0)
    assert out.value == pytest.approx(65.0) and out.strategy == WEATHER
    assert out.raw == 6500  # 0-100 % on 0-10000 counts
    assert "outside 0.0 °C, room 20.0 °C → flow 50.0 °C" in out.reason
    assert "→ valve 65 %" in out.reason
    # 30 s later the flow is 48 °C: P 10 + I (15 + 0.05×2×30 = 18) = 28 %.
    later = {**ev.memory["plant:1:weather"], "t": T - 30}
    ev2 = run(plant(flow=48.0), memory={"plant:1:weather": later})
    assert ev2.outputs[1].value == pytest.approx(28.0)


def test_flow_over_temperature_closes_the_valve_and_holds_the_integral():
    memory = {"plant:1:weather": {"integral": 40.0, "t": T - 30}}
    ev = run(plant(flow=86.0), memory=memory)
    out = ev.outputs[1]
    assert (out.value, out.strategy) == (0.0, OVER_TEMPERATURE)
    assert out.reason.startswith("Flow over-temperature: 86.0 °C (closed from 85 °C")
    assert ev.memory["plant:1:weather"]["integral"] == 40.0
    # 84.5 °C is inside the 1 K band: still closed; 83.9 °C releases.
    held = run(plant(flow=84.5), memory=ev.memory)
    assert held.outputs[1].strategy == OVER_TEMPERATURE
    assert run(plant(flow=83.9), memory=held.memory).outputs[1].strategy == WEATHER


def test_outside_frost_opens_the_valve_without_any_demand():
    ev = run(plant(outside=-8.0, flow=30.0), zones=[zone(temp=18.0)])
    out = ev.outputs[1]
    assert (out.value, out.strategy) == (100.0, FROST)
    assert "outside -8.0 °C below -5 °C — valve open" in out.reason


def test_over_temperature_beats_frost():
    ev = run(plant(outside=-10.0, flow=90.0))
    assert (ev.outputs[1].value, ev.outputs[1].strategy) == (0.0, OVER_TEMPERATURE)


def test_no_demand_closes_the_valve_and_resets_the_integral():
    memory = {"plant:1:weather": {"integral": 40.0, "t": T - 30}}
    ev = run(plant(outside=8.0), zones=[zone(temp=18.0)], memory=memory)
    assert ev.outputs[1].value == 0.0
    assert ev.memory["plant:1:weather"]["integral"] == 0.0


def test_a_lost_flow_sensor_holds_the_valve_and_raises_an_alarm():
    memory = {"plant:1:weather": {"integral": 30.0, "output": 42.0, "t": T - 30}}
    ev = run(plant(flow=None), memory=memory)
    assert ev.outputs[1].value == 42.0
    assert ev.outputs[1].reason.startswith("Flow sensor lost: valve held at 42 %")
    assert "plant-flow:1" in ev.alarms


def test_a_modulating_boiler_gets_the_curve_as_its_flow_set_point():
    boiler = weather_spec(
        mode="boiler_setpoint", flow_min_c=20.0, flow_max_c=80.0, scale_low=0, scale_high=100
    )
    ev = run(plant(outside=-10.0, weather=boiler, flow_name="", flow=None))
    out = ev.outputs[1]
    assert (out.value, out.unit, out.raw) == (pytest.approx(65.0), "°C", 6500)
    # Room influence from the index zone: 15 °C against 20 °C × 2 = +10 K.
    ev = run(plant(outside=-10.0, weather=replace(boiler, room_influence=2.0), flow=None))
    assert ev.outputs[1].value == pytest.approx(75.0)


def test_a_three_point_valve_pulses_one_relay_and_both_rest_off():
    three = replace(MIXING, output="three_point", open_id=30, close_id=31, max_pulse_s=20.0)
    acts = (valve(), BOILER, PUMP, OPENER, CLOSER)
    ev = run(plant(weather=three), actuators=acts)
    out = ev.outputs[1]
    # Target 65 % from 0 %: 78 s of a 120 s stroke wanted, 20 s this tick on the open relay.
    assert (out.pulse_actuator_id, out.pulse_s) == (30, 20.0)
    assert ev.decisions[30].state is False and ev.decisions[31].state is False
    assert ev.decisions[30].owner == "heating plant 'Boiler house'"
    assert ev.memory["plant:1:weather"]["valve"]["position_pct"] == pytest.approx(100 * 20 / 120)


def test_a_blind_zone_heats_when_the_flow_is_near_freezing():
    """Plant frost protection from the flow temperature when room sensors are lost
    and the outside is not frosty (or not known)."""
    blind = zone(temp=None, reading=None)
    p = plant(outside=None, flow=4.0, weather=None)
    ev = run(p, zones=[blind])
    assert ev.decisions[10].state is True and ev.decisions[10].strategy == FROST
    assert "flow 4.0 °C below 5 °C ('Boiler house') — heating on" in ev.decisions[10].reason
    assert ev.decisions[21].state is True  # the pump circulates
    warm = run(replace(p, flow=Reading(T - 10, 30.0)), zones=[blind])
    assert warm.decisions[10].strategy == SENSOR_FALLBACK and warm.decisions[10].state is False


def test_the_configured_index_zone_is_held_open_for_a_plant_without_bypass():
    hall = zone(temp=22.0)
    annex = zone(temp=22.0, id=2, name="Annex", actuator_ids=(11,))
    idle = T - 8 * 86400
    acts = (
        valve(),
        valve(id=11, name="Annex valve"),
        actuator_spec(20, "Boiler", "boiler", 0, 0, False, idle, idle),
        actuator_spec(21, "Pump", "pump", 0, 0, False, idle, idle),
    )
    p = plant(weather=None, zone_ids=(1, 2), has_bypass=False, index_zone_id=2)
    ev = evaluate(snapshot([hall, annex], acts, plants=(p,)))
    assert ev.decisions[11].state is True and ev.decisions[10].state is False


def test_the_plants_own_staleness_limit_applies_to_its_flow_and_outside_sensors():
    """Outside test, session 6: plant sensors were stale only after a fixed 15 min, so a loop
    steered for 15 min on a frozen flow value; the limit is now the plant's setting."""
    old = plant(flow=None, outside=None, sensor_stale_after_s=120)
    old = replace(old, flow=Reading(T - 300, 40.0), outside=Reading(T - 300, 0.0))
    memory = {"plant:1:weather": {"integral": 30.0, "output": 42.0, "t": T - 30}}
    ev = run(old, memory=memory)
    assert "plant-flow:1" in ev.alarms and "plant-outside:1" in ev.alarms
    assert ev.outputs[1].reason.startswith("Flow sensor lost: valve held at 42 %")
    ev = run(replace(old, sensor_stale_after_s=900), memory=memory)
    assert "plant-flow:1" not in ev.alarms and "plant-outside:1" not in ev.alarms
