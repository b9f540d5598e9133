"""An operator's hold on an analogue output in the evaluator: it sets the output, the limits
still win, it ends by itself, and the mixing loop resumes from it without a bump."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from control.engine.specs import (
    FROST,
    OVER_TEMPERATURE,
    OVERRIDE,
    WEATHER,
    OutputOverrideSpec,
)

from .helpers import NOW, valve, weather_spec
from .test_weather_evaluator import BOILER, CLOSER, MIXING, OPENER, PUMP, plant, run

HOLD = OutputOverrideSpec(30.0, NOW + timedelta(hours=1), "Commissioning", 7, "alice", 3)


def test_a_held_mixing_valve_carries_the_operators_value_reason_and_user():
    ev = run(plant(output_override=HOLD))
    out = ev.outputs[1]
    assert (out.value, out.raw, out.strategy, out.user_id) == (30.0, 3000, OVERRIDE, 7)
    assert out.reason == "Manual override by alice until 10:00: valve held at 30 % — Commissioning"
    assert out.owner == "manual override by alice"
    # The curve is still computed and shown: the target the loop would have.
    assert out.flow_setpoint_c == pytest.approx(50.0)
    # Bumpless: the integral is the held position, so the loop resumes from 30 %.
    assert ev.memory["plant:1:weather"]["integral"] == 30.0


def test_the_override_ends_by_itself_at_its_expiry():
    expired = replace(HOLD, expires=NOW)
    out = run(plant(output_override=expired)).outputs[1]
    assert out.strategy == WEATHER and out.user_id is None
    assert out.value == pytest.approx(65.0)  # the PI output of the plain weather test


def test_frost_and_over_temperature_beat_the_override():
    frost = run(plant(outside=-8.0, flow=30.0, output_override=HOLD)).outputs[1]
    assert (frost.value, frost.strategy) == (100.0, FROST)
    assert "beats the manual override by alice" in frost.reason
    assert frost.owner == "plant frost protection"
    hot = run(plant(flow=90.0, output_override=replace(HOLD, value=100.0))).outputs[1]
    assert (hot.value, hot.strategy) == (0.0, OVER_TEMPERATURE)


def test_a_held_boiler_set_point_is_in_degrees():
    boiler = weather_spec(mode="boiler_setpoint", flow_min_c=20.0, flow_max_c=80.0)
    out = run(plant(weather=boiler, flow=None, output_override=replace(HOLD, value=55.0))).outputs[
        1
    ]
    assert (out.value, out.unit, out.raw, out.strategy) == (55.0, "°C", 5500, OVERRIDE)
    assert "flow set point 55.0 °C" in out.reason


def test_a_three_point_valve_held_closed_is_driven_to_its_end():
    three = replace(MIXING, output="three_point", open_id=30, close_id=31, max_pulse_s=20.0)
    acts = (valve(), BOILER, PUMP, OPENER, CLOSER)
    memory = {"plant:1:weather": {"valve": {"position_pct": 60.0, "synced_end": None,
                                            "toward_end_s": 0.0}}}  # fmt: skip
    ev = run(plant(weather=three, output_override=replace(HOLD, value=0.0)), actuators=acts,
             memory=memory)  # fmt: skip
    out = ev.outputs[1]
    assert (out.pulse_actuator_id, out.pulse_s, out.strategy) == (31, 20.0, OVERRIDE)
    assert out.position_pct == pytest.approx(60.0 - 100 * 20 / 120)
    assert "Manual override by alice" in ev.decisions[31].reason
