"""Solar thermal circuits: the differential controller with its limits (strategies/solar.py),
and a safe state for the pump when the readings are lost."""

from __future__ import annotations

from dataclasses import replace

from control.engine.specs import (
    SENSOR_FALLBACK,
    Decision,
    SolarSpec,
)
from control.engine.strategies import (
    sensor_health,
    solar,
)
from control.engine.tick import Tick

# A solar circuit without its readings stops its pump. Why that is the safe state: a pump run
# blind could carry steam from a stagnating collector into the pump and vessel, or keep loading
# a tank already at its maximum (scalding, relief valve); a collector standing still is what the
# system is built for (glycol against frost, the expansion vessel sized for stagnation). RESOL
# DeltaSol controllers do the same on a sensor fault.
SOLAR_FALLBACK = (
    ": safe state, pump off (a blind pump could pump steam from a stagnating collector or "
    "overheat the tank; the collector is built to stagnate)"
)


def decide(tick: Tick, circuit: SolarSpec, decisions: dict[int, Decision]) -> None:
    act = tick.snapshot.actuators.get(circuit.pump_id)
    if act is None:
        return
    key = f"solar:{circuit.id}"
    problems = [
        f"{label}: {p}"
        for label, reading in (("Collector", circuit.collector), ("Tank", circuit.tank))
        if (
            p := sensor_health.problem(
                reading, True, tick.now_s, circuit.sensor_stale_after_s, tz=tick.tz
            )
        )
    ]
    if problems:
        tick.alarms[f"solar-sensor:{circuit.id}"] = (
            f"Solar circuit '{circuit.name}': " + "; ".join(problems) + ": pump held off"
        )
        # Limits in force stay in force until a reading says otherwise.
        for flag in ("emergency", "antifreeze", "tank_full"):
            if tick.remembered.get(f"{key}:{flag}"):
                tick.memory[f"{key}:{flag}"] = True
        proposal = Decision(act.id, False, "; ".join(problems) + SOLAR_FALLBACK, SENSOR_FALLBACK)
    else:
        verdict = solar.decide(
            circuit,
            circuit.collector.value,  # type: ignore[union-attr]
            circuit.tank.value,  # type: ignore[union-attr]
            bool(act.is_on),
            bool(tick.remembered.get(f"{key}:emergency")),
            bool(tick.remembered.get(f"{key}:antifreeze")),
            bool(tick.remembered.get(f"{key}:tank_full")),
        )
        for flag in ("emergency", "antifreeze", "tank_full"):
            if getattr(verdict, flag):
                tick.memory[f"{key}:{flag}"] = True
        proposal = Decision(act.id, verdict.pump_on, verdict.reason, verdict.strategy)
    final = tick.finalize(act, tick.kick(act, circuit.kick, proposal))
    decisions[act.id] = replace(final, owner=f"solar circuit '{circuit.name}'")
