"""A heat main fed by several heat sources (gas and biomass boilers) in lead/lag sequence.

As a boiler cascade controller does it (Siemens RVD/RVA cascade, Desigo sequencers):
- **Demand**: any of the main's zones calling for heat that can take it (a valve confirmed
  open, heating_plant.py) starts the lead; none calling stops every stage (each subject to its
  relay's minimum run: a biomass boiler's is hours).
- **Stage up**: the flow below set point − `stage_up_k` for `stage_up_s` starts the next source,
  but not before the newest running stage has run its `ramp_s` (a biomass boiler takes a long
  time to come to heat: judging it earlier would start every stage behind it).
- **Stage down**: the flow above set point + `stage_down_k` for `stage_down_s` stops the last.
- **Rotation**: the order of the sources that rotate is by run hours (fewest leads), changed
  weekly or when the lead's run hours exceed the least's by `rotate_hours`.
- **A source lost** (its relay in fault, or commanded on and not read back on) is skipped: the
  next one takes its stage at once, and an alarm says so.
- **Flow sensor lost**: sequencing cannot be judged; the stages running are held (at least the
  lead while there is demand) and an alarm is raised.

What is remembered (strategy memory, `heatmain:<id>`): the number of stages, when the flow
crossed a stage threshold, the lead order, when it last rotated and each source's run hours.
"""

from __future__ import annotations

from dataclasses import replace

from control.engine.heating_plant import _takes_heat
from control.engine.specs import (
    HEAT_MAIN,
    ActuatorSpec,
    Decision,
    HeatMainSpec,
    HeatSourceSpec,
    ZoneResult,
)
from control.engine.strategies import sensor_health
from control.engine.thermal_store import StorePlan, drive_pumps
from control.engine.tick import Tick

WEEK_S = 7 * 86400
# A gap between ticks longer than this (the worker was down) is not counted as run time.
MAX_RUN_STEP_S = 300


def _lost(act: ActuatorSpec | None) -> str:
    """Why a source cannot be counted on ("" if it can)."""
    if act is None:
        return "no relay"
    if act.fault:
        return "relay fault"
    if act.is_on and not act.confirmed:
        return "not confirmed on"
    return ""


def decide(
    tick: Tick,
    main: HeatMainSpec,
    results: dict[int, ZoneResult],
    decisions: dict[int, Decision],
    store: StorePlan | None = None,
) -> None:
    """`store`: the main's thermal store this tick (thermal_store.py): charging calls for heat
    like a zone; a store hot enough serves the zones' demand while the sources stand by."""
    key = f"heatmain:{main.id}"
    mem = dict(tick.remembered.get(key) or {})
    acts = tick.snapshot.actuators
    by_id = {s.id: s for s in main.sources}
    hours: dict[str, float] = dict(mem.get("hours") or {})
    step = min(max(0.0, tick.now_s - mem.get("at", tick.now_s)), MAX_RUN_STEP_S)
    for s in main.sources:
        a = acts.get(s.actuator_id)
        if a is not None and a.confirmed_open:
            hours[str(s.id)] = hours.get(str(s.id), 0.0) + step

    order, rotated = _order(tick, main, mem, hours)
    lost = {sid: why for sid in order if (why := _lost(acts.get(by_id[sid].actuator_id)))}
    available = [sid for sid in order if sid not in lost]

    calling = [
        zid
        for zid in main.zone_ids
        if zid in results and results[zid].demand and not _takes_heat(tick, zid, decisions)
    ]
    stages = int(mem.get("stages", 0))
    flow_problem = sensor_health.problem(
        main.flow, bool(main.flow_name), tick.now_s, main.sensor_stale_after_s, main.flow_name
    )
    if flow_problem:
        tick.alarms[f"heatmain-flow:{main.id}"] = (
            f"Heat main '{main.name}': {flow_problem}. Sequencing cannot judge the flow: the "
            "stages running are held"
        )
    why = ""
    charging = store.charging if store is not None else ""
    serving = bool(store is not None and store.can_serve and calling and not charging)
    if serving:
        stages, why = 0, f"{store.can_serve}; heat demand from {_names(tick, calling)}"  # type: ignore[union-attr]
        mem.pop("below_since", None)
        mem.pop("above_since", None)
    elif not calling and not charging:
        stages, why = 0, "No zone calls for heat"
        mem.pop("below_since", None)
        mem.pop("above_since", None)
    else:
        stages = max(1, min(stages, len(available)))
        demand = [f"Heat demand from {_names(tick, calling)}"] if calling else []
        why = "; ".join(demand + ([charging] if charging else []))
        if not flow_problem:
            stages, why = _stage(tick, main, mem, stages, available, why)
    if store is not None and store.solar:
        why = f"{why}; {store.solar}"
    if lost:
        _alarm_lost(tick, main, lost, available, by_id, stages)

    flow = (
        "" if flow_problem else f", flow {main.flow.value:.1f} °C (set {main.flow_setpoint_c:g} °C)"
    )  # type: ignore[union-attr]
    running = set(available[:stages])
    owner = f"heat main '{main.name}'"
    for pos, sid in enumerate(order):
        src = by_id[sid]
        act = acts.get(src.actuator_id)
        if act is None:
            continue
        role = "lead" if pos == 0 else f"lag {pos}"
        if sid in lost:
            reason = f"Lost ({lost[sid]}): {_next(available, by_id, stages)} takes over"
            proposal = Decision(act.id, False, reason, HEAT_MAIN)
        elif sid in running:
            stage = available.index(sid) + 1
            proposal = Decision(
                act.id, True, f"Stage {stage} of {stages} ({role}): {why}{flow}", HEAT_MAIN
            )
        else:
            proposal = Decision(act.id, False, f"Standby ({role}): {why}{flow}", HEAT_MAIN)
        if rotated and pos == 0:
            proposal = replace(proposal, reason=f"{proposal.reason}; {rotated}")
        decisions[act.id] = replace(tick.finalize(act, proposal), owner=owner)
    if store is not None:
        drive_pumps(tick, store, serving, decisions, _heating(main, order, acts, decisions))
    mem.update(stages=stages, order=order, hours=hours, at=tick.now_s)
    tick.memory[key] = mem


def _heating(main: HeatMainSpec, order: list[int], acts: dict, decisions: dict) -> str:
    """Which source gives the store heat to charge with: one reading back on, else one switched
    on this tick ("" if none: the lead resting after its minimum off time, every source lost)."""
    by_id = {s.id: s for s in main.sources}
    for sid in order:
        a = acts.get(by_id[sid].actuator_id)
        if a is not None and a.confirmed_open:
            return f"'{by_id[sid].name}' running"
    for sid in order:
        d = decisions.get(by_id[sid].actuator_id)
        if d is not None and d.state:
            return f"'{by_id[sid].name}' starting"
    return ""


def _order(
    tick: Tick, main: HeatMainSpec, mem: dict, hours: dict[str, float]
) -> tuple[list[int], str]:
    """The sequence, lead first, and what rotated it this tick ("" if nothing did)."""
    ids = {s.id for s in main.sources}
    order = [sid for sid in mem.get("order", []) if sid in ids]
    order += [s.id for s in sorted(main.sources, key=lambda s: s.order) if s.id not in order]
    fixed = [sid for sid in order if not _src(main, sid).rotate]
    rotating = [sid for sid in order if _src(main, sid).rotate]
    if "rotated_at" not in mem:
        mem["rotated_at"] = tick.now_s
    if len(rotating) < 2:
        return fixed + rotating, ""
    lead = rotating[0]
    least = min(rotating, key=lambda sid: hours.get(str(sid), 0.0))
    spread = (hours.get(str(lead), 0.0) - hours.get(str(least), 0.0)) / 3600
    due = ""
    if main.rotate_hours > 0 and spread >= main.rotate_hours:
        due = f"{spread:.0f} h more run than '{_src(main, least).name}' (limit {main.rotate_hours:g} h)"
    elif main.rotate_weekly and tick.now_s - mem["rotated_at"] >= WEEK_S:
        due = "weekly rotation"
    if not due:
        return fixed + rotating, ""
    mem["rotated_at"] = tick.now_s
    was = _src(main, lead).name
    if least == lead:
        least = rotating[1]  # weekly with the lead already the least run: the next one leads
    rotating = [least] + [sid for sid in rotating if sid != least]
    return fixed + rotating, f"lead rotated from '{was}' ({due})"


def _stage(
    tick: Tick,
    main: HeatMainSpec,
    mem: dict,
    stages: int,
    available: list[int],
    why: str,
) -> tuple[int, str]:
    flow = main.flow.value  # type: ignore[union-attr]  # checked by the caller
    low = main.flow_setpoint_c - main.stage_up_k
    high = main.flow_setpoint_c + main.stage_down_k
    mem["below_since"] = mem.get("below_since", tick.now_s) if flow < low else None
    mem["above_since"] = mem.get("above_since", tick.now_s) if flow > high else None
    if mem["below_since"] is None:
        mem.pop("below_since")
    if mem["above_since"] is None:
        mem.pop("above_since")
    if "below_since" in mem and stages < len(available):
        waited = tick.now_s - mem["below_since"]
        newest = tick.snapshot.actuators.get(_src(main, available[stages - 1]).actuator_id)
        ran = tick.now_s - newest.changed_at if newest and newest.changed_at else 0.0
        ramp = _src(main, available[stages - 1]).ramp_s
        if waited >= main.stage_up_s and (not newest or not newest.is_on or ran >= ramp):
            mem.pop("below_since")
            return stages + 1, (
                f"stage up: flow below {low:g} °C for {round(waited / 60)} min ({why})"
            )
        if waited >= main.stage_up_s:
            return (
                stages,
                f"{why}; flow low, waiting for '{_src(main, available[stages - 1]).name}' to ramp up ({round(ran / 60)} of {round(ramp / 60)} min)",
            )
    if "above_since" in mem and stages > 1:
        waited = tick.now_s - mem["above_since"]
        if waited >= main.stage_down_s:
            mem.pop("above_since")
            return stages - 1, (
                f"stage down: flow above {high:g} °C for {round(waited / 60)} min ({why})"
            )
    return stages, why


def _alarm_lost(
    tick: Tick,
    main: HeatMainSpec,
    lost: dict[int, str],
    available: list[int],
    by_id: dict[int, HeatSourceSpec],
    stages: int,
) -> None:
    for sid, why in lost.items():
        tick.alarms[f"heatmain-source:{main.id}:{sid}"] = (
            f"Heat main '{main.name}': heat source '{by_id[sid].name}' lost ({why}): "
            f"{_next(available, by_id, stages)} takes over"
        )


def _next(available: list[int], by_id: dict[int, HeatSourceSpec], stages: int) -> str:
    """The source that takes the lost one's stage: the last one running (the lead if none)."""
    if not available:
        return "no other source"
    return f"'{by_id[available[min(stages, len(available)) - 1 if stages else 0]].name}'"


def _names(tick: Tick, zone_ids: list[int]) -> str:
    listed = ", ".join(z.name if (z := tick.zones.get(zid)) else str(zid) for zid in zone_ids[:5])
    return listed + (f" and {len(zone_ids) - 5} more" if len(zone_ids) > 5 else "")


def _src(main: HeatMainSpec, sid: int) -> HeatSourceSpec:
    return next(s for s in main.sources if s.id == sid)
