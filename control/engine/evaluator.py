"""The evaluator: a pure function of a Snapshot returning per-actuator decisions with reasons.

Priority, highest first: safety (frost protection, over-temperature, solar emergency stop /
antifreeze / tank max) > manual override > demand (booking, schedule, setback, plant logic) > off.
Minimum on/off times (anti-short-cycle) hold back demand decisions only: safety and an
engineer's override switch at once.

No database, Redis or network here: snapshots are built from the models by control/mapper.py
(live in control/snapshot.py, from the cache in control/config_cache.py, over recorded history
in control/replay.py), and tests build them by hand. Each kind of plant has its module: zones.py,
heating_plant.py, weather_output.py, solar_circuit.py; tick.py holds what they share.
"""

from __future__ import annotations

from zoneinfo import ZoneInfo

from control.engine import (
    heat_main,
    heating_plant,
    solar_circuit,
    thermal_store,
    weather_output,
    zones,
)
from control.engine.specs import Decision, Evaluation, Snapshot
from control.engine.tick import Tick


def evaluate(snapshot: Snapshot) -> Evaluation:
    tick = Tick(snapshot, ZoneInfo(snapshot.time_zone), {}, [])
    # Plant frost first: a zone whose sensor is lost falls back on its plants' (zones.py).
    tick.outside_frost = {p.id: heating_plant.outside_frost(tick, p) for p in snapshot.plants}
    tick.flow_frost = {p.id: heating_plant.flow_frost(tick, p) for p in snapshot.plants}
    for plant in snapshot.plants:
        for zid in plant.zone_ids:
            tick.zone_plants.setdefault(zid, []).append(plant)
    zone_results = {z.id: zones.decide(tick, z) for z in snapshot.zones}
    decisions: dict[int, Decision] = {}
    zones.drive_actuators(tick, zone_results, decisions)
    for plant in snapshot.plants:
        heating_plant.decide(tick, plant, zone_results, decisions)
        if plant.weather is not None:
            weather_output.decide(tick, plant, zone_results, decisions)
    stores = {s.heat_main_id: thermal_store.plan(tick, s) for s in snapshot.stores}
    for main in snapshot.heat_mains:
        heat_main.decide(tick, main, zone_results, decisions, stores.get(main.id))
    for circuit in snapshot.solars:
        solar_circuit.decide(tick, circuit, decisions)
    # An actuator nothing drives (removed from its zone, its zone disabled, never
    # assigned) is held at its idle state, not left where the last owner put it.
    for actuator in snapshot.actuators.values():
        if actuator.id not in decisions:
            decisions[actuator.id] = tick.idle(actuator)
    return Evaluation(decisions, zone_results, tick.memory, tick.events, tick.alarms, tick.outputs)
