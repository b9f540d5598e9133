"""Heating plants: the boiler fed by its zones' demand, the circulation pump with its overrun
and kick, plant frost protection from the outside and flow temperatures, and the open circuit
a plant without a bypass needs while its pump runs."""

from __future__ import annotations

from dataclasses import replace

from control.engine.specs import (
    FROST,
    HEATING_PLANT,
    NO_BYPASS,
    NO_OPEN_CIRCUIT,
    OVERRIDE,
    PUMP_OVERRUN,
    SAFETY_STRATEGIES,
    VALVE_KINDS,
    ActuatorSpec,
    Decision,
    PlantSpec,
    Reading,
    ZoneResult,
)
from control.engine.strategies import frost, pump, sensor_health
from control.engine.strategies import override as override_rules
from control.engine.tick import Tick


def outside_frost(tick: Tick, plant: PlantSpec) -> tuple[bool, float | None]:
    """Plant frost protection from the outside temperature (with a band, held across
    ticks). A configured outside sensor that is lost raises its own alarm."""
    return _frost_from(
        tick, plant, "outside", plant.outside, plant.outside_name, plant.frost_outside_c,
        "plant frost protection cannot work",
    )  # fmt: skip


def flow_frost(tick: Tick, plant: PlantSpec) -> tuple[bool, float | None]:
    """Plant frost protection from the flow temperature (Siemens RVD/Synco: flow below
    5 °C -> pump and heat), with a band, held across ticks. The flow sensor sees the
    water itself: it works when every room sensor is lost and the outside one too."""
    return _frost_from(
        tick, plant, "flow", plant.flow, plant.flow_name, plant.flow_frost_c,
        "flow frost protection and the mixing loop cannot work",
    )  # fmt: skip


def _frost_from(
    tick: Tick,
    plant: PlantSpec,
    what: str,
    reading: Reading | None,
    name: str,
    threshold_c: float,
    lost: str,
) -> tuple[bool, float | None]:
    """(frost active, temperature) from one plant sensor; a configured sensor that is lost
    raises plant-<what>:<id> saying what stops working, and counts as no frost."""
    if not name:
        return False, None
    problem = sensor_health.problem(
        reading, True, tick.now_s, plant.sensor_stale_after_s, name, tick.tz
    )
    if problem:
        tick.alarms[f"plant-{what}:{plant.id}"] = (
            f"Heating plant '{plant.name}': {what} {problem[0].lower()}{problem[1:]}: {lost}"
        )
        return False, None
    temp = reading.value  # type: ignore[union-attr]  # checked by sensor_health above
    key = f"plant:{plant.id}:{what}_frost"
    active = frost.active(
        temp, threshold_c, threshold_c + plant.limit_band_k, bool(tick.remembered.get(key))
    )
    if active:
        tick.memory[key] = True
    return active, temp


def zone_valves(tick: Tick, zone_id: int) -> list[ActuatorSpec]:
    """The valves (and radiator valves) of a zone that the snapshot knows."""
    zone = tick.zones.get(zone_id)
    if zone is None:
        return []
    acts = (tick.snapshot.actuators.get(aid) for aid in zone.actuator_ids)
    return [a for a in acts if a is not None and a.kind in VALVE_KINDS]


def _takes_heat(tick: Tick, zone_id: int, decisions: dict) -> str:
    """Why a calling zone cannot take heat yet ("" if it can): a zone with valves takes heat
    only through a valve the board confirmed open (and that stays open this tick). A valve
    merely commanded open, refused by its board or on a dead board is not an open circuit."""
    valves = zone_valves(tick, zone_id)
    if not valves:
        return ""  # nothing to confirm: the circuit is always open (no zone valve)
    if any(v.confirmed_open and decisions.get(v.id, _SHUT).state for v in valves):
        return ""
    if all(v.fault for v in valves):
        return "every valve in fault"
    return "valve not yet confirmed open"


def _frost_words(tick: Tick, plant: PlantSpec, calling: list[tuple[int, ZoneResult]]) -> str:
    """Why a boiler fired for frost, in the words of the frost that fired it: the plant's own
    (flow, then outside) when it is active, else the rooms below their frost limit. An engineer
    reading "Heat demand from Room C" went looking for a booking that did not exist."""
    cold, flow = tick.flow_frost.get(plant.id, (False, None))
    if cold and flow is not None:
        return f"Frost protection: flow {flow:.1f} °C (below {plant.flow_frost_c:g} °C)"
    frosty, outside = tick.outside_frost.get(plant.id, (False, None))
    if frosty and outside is not None:
        return f"Frost protection: outside {outside:.1f} °C (below {plant.frost_outside_c:g} °C)"
    rooms = [
        f"{tick.zones[zid].name} {r.temperature:.1f} °C"
        if r.temperature is not None
        else tick.zones[zid].name
        for zid, r in calling
        if r.mode == FROST
    ]
    return "Frost protection: " + ", ".join(rooms[:5])


def decide(tick: Tick, plant: PlantSpec, results: dict[int, ZoneResult], decisions: dict) -> None:
    boiler = tick.snapshot.actuators.get(plant.boiler_id)
    if boiler is None:
        return
    calling, waiting = [], []
    for zid in plant.zone_ids:
        if zid in results and results[zid].demand:
            why_not = _takes_heat(tick, zid, decisions)
            (waiting if why_not else calling).append((zid, results[zid], why_not))
    if calling:
        listed = ", ".join(tick.zones[zid].name for zid, _, _ in calling[:5])
        more = f" and {len(calling) - 5} more" if len(calling) > 5 else ""
        strategy = FROST if any(r.mode == FROST for _, r, _ in calling) else HEATING_PLANT
        why = f"Heat demand from {listed}{more}"
        if strategy == FROST:
            why = f"{_frost_words(tick, plant, [(z, r) for z, r, _ in calling])} — {why}"
        proposal = Decision(boiler.id, True, why, strategy)
    elif waiting:
        listed = "; ".join(f"{tick.zones[zid].name}: {why}" for zid, _, why in waiting[:5])
        proposal = Decision(boiler.id, False, f"No zone can take heat ({listed})", HEATING_PLANT)
    else:
        proposal = Decision(boiler.id, False, "No zone calls for heat", HEATING_PLANT)
    owner = f"heating plant '{plant.name}'"
    boiler_decision = replace(tick.finalize(boiler, proposal), owner=owner)
    if not plant.has_bypass and boiler_decision.state:
        # Whatever keeps the boiler on (minimum burner run, an override, frost), it does not
        # fire against shut valves: a circuit is held open, and if none can be, it stops.
        if not _keep_a_circuit_open(tick, plant, decisions, boiler_decision.reason):
            boiler_decision = Decision(
                boiler.id,
                False,
                f"No circuit of '{plant.name}' can be shown open and it has no bypass: boiler "
                f"held off (then: {boiler_decision.reason})",
                NO_OPEN_CIRCUIT,
                owner=owner,
            )
    decisions[boiler.id] = boiler_decision

    pump_act = tick.snapshot.actuators.get(plant.pump_id) if plant.pump_id else None
    if pump_act is None:
        return
    frosty, outside = tick.outside_frost.get(plant.id, (False, None))
    cold, flow = tick.flow_frost.get(plant.id, (False, None))
    if boiler_decision.state:
        proposal = Decision(pump_act.id, True, "Follows the boiler (firing)", HEATING_PLANT)
    elif frosty:
        # Siemens RVD/Synco plant frost protection: circulate so no pipe stands still.
        proposal = Decision(
            pump_act.id,
            True,
            f"Plant frost protection: outside {outside:.1f} °C below "
            f"{plant.frost_outside_c:g} °C — pump circulates",
            FROST,
        )
    elif cold:
        proposal = Decision(
            pump_act.id,
            True,
            f"Plant frost protection: flow {flow:.1f} °C below "
            f"{plant.flow_frost_c:g} °C — pump circulates",
            FROST,
        )
    else:
        # An overrun carries residual heat out of a boiler that fired: one that never
        # confirmed ON (a new plant, a refused relay) has none, and forces no valve open.
        stopped_at = None
        if boiler.confirmed_fired:
            stopped_at = tick.now_s if boiler.is_on else boiler.last_off_at
        left = pump.overrun_left_s(False, stopped_at, tick.now_s, plant.pump_overrun_s)
        if left > 0:
            proposal = Decision(
                pump_act.id, True, pump.overrun_reason(left, plant.pump_overrun_s), PUMP_OVERRUN
            )
        else:
            proposal = Decision(pump_act.id, False, "Boiler off, overrun done", HEATING_PLANT)
    pump_decision = tick.finalize(pump_act, tick.kick(pump_act, plant.kick, proposal))
    decisions[pump_act.id] = replace(pump_decision, owner=owner)
    if not plant.has_bypass and pump_decision.state:
        _keep_a_circuit_open(tick, plant, decisions, pump_decision.reason)


_SHUT = Decision(0, False, "", "")


def _keep_a_circuit_open(tick: Tick, plant: PlantSpec, decisions: dict, why: str) -> bool:
    """A plant without a bypass must not run its pump (overrun, minimum burner run, kick,
    frost circulation) or fire its boiler against closed zone valves. Only what the boards
    confirmed counts: a valve commanded open that never read back open (refused coil, dead
    board) is not an open circuit. If no valve is confirmed open and staying open, the ones
    confirmed open at the last tick stay open; if none was, those of the index circuit (the
    configured one, else the first of the plant's zones) that are not in fault. A valve a
    safety limit or an engineer's override closed stays closed.

    False (and alarm `plant-circuit:<id>`) when no circuit can be shown open or opened: every
    valve left is in fault or held shut."""
    zones = tick.zones
    valves: list[ActuatorSpec] = []
    zone_of: dict[int, int] = {}
    for zid in plant.zone_ids:
        for aid in zones[zid].actuator_ids if zid in zones else ():
            act = tick.snapshot.actuators.get(aid)
            if act is not None and act.kind in VALVE_KINDS and aid in decisions:
                valves.append(act)
                zone_of.setdefault(aid, zid)
    if not valves:
        return True  # no zone valves configured: nothing can shut the circuit
    staying = [v for v in valves if decisions[v.id].state]
    # Open and confirmed; or being opened this tick by a driver that has not failed (its
    # read-back comes with this tick's write).
    if any(v.confirmed_open for v in staying) or any(not v.fault for v in staying):
        return True
    free = [
        v
        for v in valves
        if decisions[v.id].strategy not in SAFETY_STRATEGIES | {OVERRIDE}
        and override_rules.active(v.override, tick.now) is None
        and not v.fault
    ]
    held = [v for v in free if v.confirmed_open]
    if not held and free:
        # The configured index circuit, else the first of the plant's zones with a free valve.
        index = zone_of[free[0].id]
        if any(zone_of[v.id] == plant.index_zone_id for v in free):
            index = plant.index_zone_id
        held = [v for v in free if zone_of[v.id] == index]
    for v in held:
        before = decisions[v.id]
        decisions[v.id] = replace(
            before,
            state=True,
            reason=f"Held open: '{plant.name}' has no bypass and its pump runs ({why}) "
            f"(then: {before.reason})",
            strategy=NO_BYPASS,
            user_id=None,
        )
    if held:
        return True
    shut = ", ".join(
        f"'{v.name}' ({'fault' if v.fault else 'held shut: ' + decisions[v.id].strategy})"
        for v in valves[:8]
    )
    tick.alarms[f"plant-circuit:{plant.id}"] = (
        f"Heating plant '{plant.name}' has no bypass and none of its circuits can be shown "
        f"open: {shut}. The boiler is held off; its pump may run against shut valves"
    )
    return False


# --- weather compensation ---------------------------------------------------------------
