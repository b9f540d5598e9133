"""One evaluation in progress, and the rules every actuator shares whatever drives it.

`Tick` carries what the parts of an evaluation read and write (the snapshot, the time, the
strategy memory from the last tick and the one being written, events, alarms, outputs) and the
actuator rules that come after any zone or plant has proposed a state: safety first, then the
actuator's own override, then its minimum on/off times (`finalize`); the weekly pump kick
(`kick`); and the idle state of an actuator nothing drives (`idle`).
"""

from __future__ import annotations

from dataclasses import replace
from zoneinfo import ZoneInfo

from control.engine.specs import (
    ANTI_SHORT_CYCLE,
    IDLE_STATE,
    OVERRIDE,
    PUMP_KICK,
    SAFETY_STRATEGIES,
    ActuatorSpec,
    Decision,
    KickSpec,
    OutputDecision,
    PlantSpec,
    Snapshot,
    ZoneSpec,
)
from control.engine.strategies import (
    anti_short_cycle,
    pump_kick,
)
from control.engine.strategies import override as override_rules

# Decisions from these are applied without waiting for min on/off times.
_BYPASS_TIMERS = SAFETY_STRATEGIES | {OVERRIDE, PUMP_KICK}


class Tick:
    """One evaluation of a snapshot: shared state and the actuator-level rules."""

    def __init__(self, snapshot: Snapshot, tz: ZoneInfo, memory: dict, events: list) -> None:
        self.snapshot = snapshot
        self.now = snapshot.now
        self.now_s = snapshot.now.timestamp()
        self.tz = tz
        self.remembered = snapshot.memory
        # Zones by id, built once: plants and heat mains look a zone up for each of theirs, and
        # a scan of the zone list there made the evaluation grow as zones squared.
        self.zones: dict[int, ZoneSpec] = {z.id: z for z in snapshot.zones}
        self.memory = memory
        self.events = events
        self.alarms: dict[str, str] = {}
        # plant id -> (outside frost active, outside temperature); zone id -> its plants
        self.outside_frost: dict[int, tuple[bool, float | None]] = {}
        self.zone_plants: dict[int, list[PlantSpec]] = {}
        # plant id -> (flow frost active, flow temperature)
        self.flow_frost: dict[int, tuple[bool, float | None]] = {}
        self.outputs: dict[int, OutputDecision] = {}

    def finalize(self, actuator: ActuatorSpec, proposal: Decision) -> Decision:
        """Apply, in order: safety, the actuator's own override, then min on/off times."""
        if proposal.strategy in SAFETY_STRATEGIES:
            return proposal
        override = override_rules.active(actuator.override, self.now)
        if override is not None:
            return Decision(
                actuator.id,
                override.state,
                override_rules.describe(override, self.tz),
                OVERRIDE,
                override.user_id,
            )
        if proposal.strategy in _BYPASS_TIMERS:
            return proposal
        held = anti_short_cycle.hold(
            proposal.state,
            actuator.is_on,
            actuator.changed_at,
            self.now_s,
            actuator.min_on_s,
            actuator.min_off_s,
        )
        if held:
            return Decision(
                actuator.id,
                bool(actuator.is_on),
                f"{held} (then: {proposal.reason})",
                ANTI_SHORT_CYCLE,
            )
        return proposal

    def idle(self, actuator: ActuatorSpec) -> Decision:
        """Nothing drives this actuator: its idle state, after its own override and its min
        on/off times (a boiler taken out of a plant still must not short-cycle)."""
        state = "ON" if actuator.idle_state else "OFF"
        source = actuator.owner or actuator.released_from
        if actuator.disabled_zone and not source:
            source = f"zone '{actuator.disabled_zone}'"
        why = " (zone disabled)" if actuator.disabled_zone else ""
        reason = (
            f"Released from {source}{why}: idle state {state}"
            if source
            else f"Not controlled: idle state {state}"
        )
        proposal = Decision(actuator.id, actuator.idle_state, reason, IDLE_STATE)
        return replace(self.finalize(actuator, proposal), owner="", released_from=source)

    def kick(self, act: ActuatorSpec, kick: KickSpec | None, proposal: Decision) -> Decision:
        """A pump proposed off gets its weekly kick when it has stood idle long enough."""
        key = f"kick:{act.id}"
        started = self.remembered.get(key)
        if proposal.state or proposal.strategy in SAFETY_STRATEGIES or kick is None:
            return proposal
        idle_since = act.last_off_at if act.last_off_at is not None else act.changed_at
        if pump_kick.due(kick, act.is_on, idle_since, started, self.now_s):
            self.memory[key] = started if started is not None else self.now_s
            days = round(kick.idle_s / 86400)
            return Decision(
                act.id, True, f"Pump kick {kick.run_s} s after {days} days idle", PUMP_KICK
            )
        if started is not None:
            return Decision(act.id, False, f"Pump kick done ({kick.run_s} s)", PUMP_KICK)
        return proposal
