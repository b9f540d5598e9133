"""Reasons say what the engine does (issue 27, item 9): the over-temperature release threshold,
and a boiler fired for frost says which frost."""

from __future__ import annotations

from datetime import timedelta

from control.engine.specs import FROST, OVER_TEMPERATURE, OVERRIDE, OverrideSpec, Reading

from .helpers import NOW, actuator_spec, plant_spec, valve, zone
from .test_evaluator import run

ON = OverrideSpec(True, NOW + timedelta(hours=1), "drying plaster")


def test_over_temperature_says_the_threshold_it_releases_at():
    tripped = run([zone(temp=28.0, override=ON)])
    d = tripped.decisions[10]
    assert d.strategy == OVER_TEMPERATURE
    assert "(off from 28 °C until at or below 27 °C)" in d.reason
    held = run([zone(temp=27.1, override=ON)], memory=tripped.memory)
    assert held.decisions[10].strategy == OVER_TEMPERATURE
    released = run([zone(temp=27.0, override=ON)], memory=held.memory)  # "at or below 27"
    assert released.decisions[10].strategy == OVERRIDE and released.decisions[10].state


def _plant_acts():
    return (
        valve(is_on=True),
        actuator_spec(20, "Boiler", "boiler", 0, 0, False),
        actuator_spec(21, "Pump", "pump", 0, 0, False),
    )


def test_a_boiler_fired_by_flow_frost_says_so():
    lost = Reading(NOW.timestamp() - 3600, 15.0)  # Room C's sensor lost: plant frost heats it
    plant = plant_spec(1, "Boiler house", 20, (1,), pump_id=21, flow_name="plant:flow",
                       flow=Reading(NOW.timestamp() - 30, 4.0))  # fmt: skip
    ev = run([zone(reading=lost, name="Room C")], _plant_acts(), plants=(plant,))
    boiler = ev.decisions[20]
    assert boiler.state is True and boiler.strategy == FROST
    assert boiler.reason.startswith("Frost protection: flow 4.0 °C (below 5 °C)")


def test_a_boiler_fired_by_outside_frost_says_so():
    lost = Reading(NOW.timestamp() - 3600, 15.0)
    plant = plant_spec(1, "Boiler house", 20, (1,), pump_id=21, outside_name="roof:outside",
                       outside=Reading(NOW.timestamp() - 60, 0.5))  # fmt: skip
    ev = run([zone(reading=lost, name="Room C")], _plant_acts(), plants=(plant,))
    assert ev.decisions[20].reason.startswith("Frost protection: outside 0.5 °C (below 1.5 °C)")


def test_a_boiler_fired_by_room_frost_names_the_room_and_its_temperature():
    plant = plant_spec(1, "Boiler house", 20, (1,), pump_id=21)
    ev = run([zone(temp=4.0, name="Room C")], _plant_acts(), plants=(plant,))
    assert ev.decisions[20].strategy == FROST
    assert ev.decisions[20].reason.startswith("Frost protection: Room C 4.0 °C")


def test_ordinary_demand_keeps_its_words():
    plant = plant_spec(1, "Boiler house", 20, (1,), pump_id=21)
    ev = run([zone(temp=15.0, name="Room C", override=ON)], _plant_acts(), plants=(plant,))
    assert ev.decisions[20].reason == "Heat demand from Room C"
