"""The evaluator: a pure function of a Snapshot returning per-actuator decisions with reasons.

Priority, highest first: safety (frost protection, over-temperature, solar emergency stop /
antifreeze / tank max) > manual override > demand (booking, schedule, setback, plant logic) > off.
Minimum on/off times (anti-short-cycle) hold back demand decisions only: safety and an
engineer's override switch at once.

No database, Redis or network here: snapshots come from control/snapshot.py (live) or
control/replay.py (recorded history), and tests build them by hand.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from control.engine.specs import (
    ANTI_SHORT_CYCLE,
    BOOKING,
    FROST,
    HEATING_PLANT,
    IDLE,
    IDLE_STATE,
    NO_BYPASS,
    OPTIMUM_START,
    OPTIMUM_STOP,
    OVER_TEMPERATURE,
    OVERRIDE,
    PUMP_KICK,
    PUMP_OVERRUN,
    SAFETY_STRATEGIES,
    SENSOR_FALLBACK,
    SETBACK,
    WEATHER,
    ActuatorSpec,
    Decision,
    Evaluation,
    KickSpec,
    OutputDecision,
    PlantSpec,
    Reading,
    Snapshot,
    SolarSpec,
    Window,
    ZoneResult,
    ZoneSpec,
)
from control.engine.strategies import (
    anti_short_cycle,
    bookings,
    fallback,
    frost,
    optimum_start,
    overtemp,
    pump,
    pump_kick,
    schedule,
    sensor_health,
    solar,
    thermostat,
)
from control.engine.strategies import override as override_rules
from control.engine.timefmt import hhmm
from control.engine.weather import (
    CLOSE,
    OPEN,
    ValveState,
    heating_curve,
    pi_step,
    three_point_pulse,
    to_raw,
)

# A solar circuit without its readings stops its pump. Why that is the safe state: a pump run
# blind could carry steam from a stagnating collector into the pump and vessel, or keep loading
# a tank already at its maximum (scalding, relief valve); a collector standing still is what the
# system is built for (glycol against frost, the expansion vessel sized for stagnation). RESOL
# DeltaSol controllers do the same on a sensor fault.
SOLAR_FALLBACK = (
    ": safe state, pump off (a blind pump could pump steam from a stagnating collector or "
    "overheat the tank; the collector is built to stagnate)"
)

# Actuators that open a zone's circuit (what a pump without a bypass needs).
VALVE_KINDS = frozenset({"valve", "radiator"})

# Decisions from these are applied without waiting for min on/off times.
_BYPASS_TIMERS = SAFETY_STRATEGIES | {OVERRIDE, PUMP_KICK}


def evaluate(snapshot: Snapshot) -> Evaluation:
    tz = ZoneInfo(snapshot.time_zone)
    memory: dict[str, Any] = {}
    events: list[dict[str, Any]] = []
    ctx = _Context(snapshot, tz, memory, events)
    ctx.outside_frost = {p.id: ctx.plant_frost(p) for p in snapshot.plants}
    ctx.flow_frost = {p.id: ctx.flow_frost_of(p) for p in snapshot.plants}
    for plant in snapshot.plants:
        for zid in plant.zone_ids:
            ctx.zone_plants.setdefault(zid, []).append(plant)
    zone_results = {z.id: ctx.zone(z) for z in snapshot.zones}
    decisions: dict[int, Decision] = {}
    ctx.zone_actuators(zone_results, decisions)
    for plant in snapshot.plants:
        ctx.plant(plant, zone_results, decisions)
        if plant.weather is not None:
            ctx.weather(plant, zone_results, decisions)
    for circuit in snapshot.solars:
        ctx.solar(circuit, decisions)
    # Issue #15.5: an actuator nothing drives (removed from its zone, its zone disabled, never
    # assigned) is held at its idle state, not left where the last owner put it.
    for actuator in snapshot.actuators.values():
        if actuator.id not in decisions:
            decisions[actuator.id] = ctx.idle(actuator)
    return Evaluation(decisions, zone_results, memory, events, ctx.alarms, ctx.outputs)


class _Context:
    def __init__(self, snapshot: Snapshot, tz: ZoneInfo, memory: dict, events: list) -> None:
        self.snapshot = snapshot
        self.now = snapshot.now
        self.now_s = snapshot.now.timestamp()
        self.tz = tz
        self.remembered = snapshot.memory
        self.memory = memory
        self.events = events
        self.alarms: dict[str, str] = {}
        # plant id -> (outside frost active, outside temperature); zone id -> its plants
        self.outside_frost: dict[int, tuple[bool, float | None]] = {}
        self.zone_plants: dict[int, list[PlantSpec]] = {}
        # plant id -> (flow frost active, flow temperature)
        self.flow_frost: dict[int, tuple[bool, float | None]] = {}
        self.outputs: dict[int, OutputDecision] = {}

    # --- zones ---------------------------------------------------------------------------

    def zone(self, zone: ZoneSpec) -> ZoneResult:
        flags: list[str] = []
        if any(
            (a := self.snapshot.actuators.get(aid)) is not None and a.fault
            for aid in zone.actuator_ids
        ):
            flags.append("actuator_fault")
        problem = sensor_health.problem(
            zone.reading,
            zone.has_sensor,
            self.now_s,
            zone.sensor_stale_after_s,
            zone.sensor_name,
            self.tz,
        )
        override = override_rules.active(zone.override, self.now)
        if problem:
            flags.append("sensor_fault")
            self.alarms[f"zone-sensor:{zone.id}"] = (
                f"Zone '{zone.name}': {problem}. Fallback: heating on for plant frost "
                f"protection (outside below the plant's threshold), fixed duty "
                f"{zone.fallback_duty_pct:g}% while occupied, otherwise off"
            )
            if override is not None:
                return ZoneResult(
                    zone.id,
                    override.state,
                    OVERRIDE,
                    f"{override_rules.describe(override, self.tz)} ({problem})",
                    flags=tuple(flags),
                    user_id=override.user_id,
                )
            return self._fallback(zone, problem, tuple(flags))
        temp = zone.reading.value  # type: ignore[union-attr]  # checked by sensor_health
        key = f"zone:{zone.id}"
        if frost.active(
            temp, zone.frost_on, zone.frost_off, bool(self.remembered.get(f"{key}:frost"))
        ):
            self.memory[f"{key}:frost"] = True
            return ZoneResult(
                zone.id,
                True,
                FROST,
                f"Frost protection: {temp:.1f} °C (on below {zone.frost_on:g} °C, "
                f"heating until {zone.frost_off:g} °C)",
                temp,
                zone.frost_off,
                tuple(flags),
            )
        if overtemp.cut_off(
            temp,
            zone.max_temperature,
            zone.limit_band_k,
            bool(self.remembered.get(f"{key}:overtemp")),
        ):
            self.memory[f"{key}:overtemp"] = True
            return ZoneResult(
                zone.id,
                False,
                OVER_TEMPERATURE,
                f"Over-temperature cut-off: {temp:.1f} °C (off from {zone.max_temperature:g} °C "
                f"until below {zone.max_temperature - zone.limit_band_k:g} °C)",
                temp,
                None,
                tuple(flags),
            )
        if override is not None:
            return ZoneResult(
                zone.id,
                override.state,
                OVERRIDE,
                f"{override_rules.describe(override, self.tz)} ({temp:.1f} °C)",
                temp,
                None,
                tuple(flags),
                user_id=override.user_id,
            )
        return self._demand(zone, temp, tuple(flags))

    def _fallback(self, zone: ZoneSpec, problem: str, flags: tuple[str, ...]) -> ZoneResult:
        """The zone's sensor is lost: see control/engine/strategies/fallback.py for the order."""
        plants = self.zone_plants.get(zone.id, [])
        for plant in plants:
            active, outside = self.outside_frost.get(plant.id, (False, None))
            if active:
                return ZoneResult(
                    zone.id,
                    True,
                    FROST,
                    f"{problem}; fallback: plant frost protection, outside {outside:.1f} °C "
                    f"below {plant.frost_outside_c:g} °C ('{plant.name}') — heating on",
                    None,
                    None,
                    flags,
                )
            cold, flow = self.flow_frost.get(plant.id, (False, None))
            if cold:
                return ZoneResult(
                    zone.id,
                    True,
                    FROST,
                    f"{problem}; fallback: plant frost protection, flow {flow:.1f} °C below "
                    f"{plant.flow_frost_c:g} °C ('{plant.name}') — heating on",
                    None,
                    None,
                    flags,
                )
        windows = self._windows(zone)
        current = [w for w in windows if w.start <= self.now < w.end]
        if current:
            window = max(current, key=lambda w: (w.setpoint, w.source == BOOKING))
            on, left_s = fallback.duty_on(
                self.now_s, zone.fallback_duty_pct, zone.fallback_period_s
            )
            return ZoneResult(
                zone.id,
                on,
                SENSOR_FALLBACK,
                f"{problem}; fallback: fixed duty {zone.fallback_duty_pct:g}% of "
                f"{round(zone.fallback_period_s / 60)} min for {window.label} — "
                + ("on" if on else "off")
                + f" ({round(left_s / 60)} min left of this part)",
                None,
                None,
                flags,
            )
        outside = [self.outside_frost.get(p.id, (False, None))[1] for p in plants]
        known = [t for t in outside if t is not None]
        if known:
            frost_risk = f"outside {min(known):.1f} °C, no plant frost risk"
        elif plants:
            frost_risk = "no fresh outside reading: plant frost protection cannot be checked"
        else:
            frost_risk = "no heating plant with an outside sensor: frost cannot be checked"
        return ZoneResult(
            zone.id,
            False,
            SENSOR_FALLBACK,
            f"{problem}; fallback: unoccupied, {frost_risk} — heating off",
            None,
            None,
            flags,
        )

    def plant_frost(self, plant: PlantSpec) -> tuple[bool, float | None]:
        """Plant frost protection from the outside temperature (with a band, held across
        ticks). A configured outside sensor that is lost raises its own alarm."""
        return self._frost_from(
            plant, "outside", plant.outside, plant.outside_name, plant.frost_outside_c,
            "plant frost protection cannot work",
        )  # fmt: skip

    def flow_frost_of(self, plant: PlantSpec) -> tuple[bool, float | None]:
        """Plant frost protection from the flow temperature (Siemens RVD/Synco: flow below
        5 °C -> pump and heat), with a band, held across ticks. The flow sensor sees the
        water itself: it works when every room sensor is lost and the outside one too."""
        return self._frost_from(
            plant, "flow", plant.flow, plant.flow_name, plant.flow_frost_c,
            "flow frost protection and the mixing loop cannot work",
        )  # fmt: skip

    def _frost_from(
        self,
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
            reading, True, self.now_s, plant.sensor_stale_after_s, name, self.tz
        )
        if problem:
            self.alarms[f"plant-{what}:{plant.id}"] = (
                f"Heating plant '{plant.name}': {what} {problem[0].lower()}{problem[1:]}: {lost}"
            )
            return False, None
        temp = reading.value  # type: ignore[union-attr]  # checked by sensor_health above
        key = f"plant:{plant.id}:{what}_frost"
        active = frost.active(
            temp, threshold_c, threshold_c + plant.limit_band_k, bool(self.remembered.get(key))
        )
        if active:
            self.memory[key] = True
        return active, temp

    def _windows(self, zone: ZoneSpec) -> list[Window]:
        start = self.now - timedelta(days=1)
        end = self.now + timedelta(minutes=zone.max_preheat_min) + timedelta(days=1)
        found = bookings.windows(zone.bookings, start, end, self.tz, zone.comfort_setpoint)
        if zone.schedule is not None:
            found += schedule.windows(zone.schedule, start, end, self.tz, zone.comfort_setpoint)
        return sorted(found, key=lambda w: (w.start, w.source != BOOKING))

    def _demand(self, zone: ZoneSpec, temp: float, flags: tuple[str, ...]) -> ZoneResult:
        key = f"zone:{zone.id}"
        was_on = bool(self.remembered.get(f"{key}:heat"))
        windows = self._windows(zone)
        current = [w for w in windows if w.start <= self.now < w.end]
        self._learning_event(zone, temp, current)
        h = zone.hysteresis

        def result(demand: bool, mode: str, reason: str, target: float | None, **kw) -> ZoneResult:
            self.memory[f"{key}:heat"] = demand
            return ZoneResult(zone.id, demand, mode, reason, temp, target, flags, **kw)

        if current:
            # Overlapping occupancies: the warmest wins; a booking names itself first.
            window = max(current, key=lambda w: (w.setpoint, w.source == BOOKING))
            until = _occupied_until(windows, window)
            setpoint = window.setpoint
            minutes_left = (until - self.now).total_seconds() / 60
            if zone.optimum_stop and optimum_start.may_stop_early(
                temp, setpoint, minutes_left, zone.cooling_rate_min_per_k, zone.coast_allowance_k
            ):
                return result(
                    False,
                    OPTIMUM_STOP,
                    f"{window.label}: optimum stop, {temp:.1f} °C coasts to the end at "
                    f"{hhmm(until, self.tz)} (≥ {setpoint - zone.coast_allowance_k:.1f} °C)",
                    setpoint,
                )
            demand = thermostat.calls_for_heat(temp, setpoint, h, was_on)
            return result(
                demand,
                window.source,
                f"{window.label}: {temp:.1f} °C, setpoint {setpoint:.1f} °C — "
                + ("heating" if demand else "satisfied"),
                setpoint,
            )

        upcoming = [
            w
            for w in windows
            if self.now < w.start <= self.now + timedelta(minutes=zone.max_preheat_min)
        ]
        latch = self.remembered.get(f"{key}:preheat") or {}
        for window in upcoming:
            lead = (window.start - self.now).total_seconds() / 60
            latched = zone.optimum_start and latch.get("occupancy") == window.start.timestamp()
            if latched:
                # Issue #15.3: the switch-on time is computed once and held until occupancy
                # (Siemens SSTO, JCI OST). Recomputing it from a room that warms faster than
                # predicted dropped out of pre-heat and back in, switching the relay each time.
                preheat = float(latch["preheat_min"])
            elif zone.optimum_start:
                preheat = optimum_start.preheat_minutes(
                    temp, window.setpoint, zone.heating_rate_min_per_k, zone.max_preheat_min
                )
            else:
                preheat = 0.0
            if latched or (preheat > 0 and lead <= preheat):
                self._remember_preheat(zone, window, temp, preheat)
                demand = thermostat.calls_for_heat(temp, window.setpoint, h, was_on)
                rate = optimum_start.rate_c_per_h(zone.heating_rate_min_per_k)
                since = ""
                if latched:
                    since = f", started {hhmm(_utc(latch['started']), self.tz)}, held until then"
                return result(
                    demand,
                    OPTIMUM_START,
                    f"{window.label}, pre-heat {round(preheat)} min at {rate:.1f} °C/h "
                    f"({temp:.1f} → {window.setpoint:.1f} °C{since})"
                    + ("" if demand else " — satisfied"),
                    window.setpoint,
                    preheat_min=preheat,
                )
        following = next((w for w in windows if w.start > self.now), None)
        nxt = f"; next: {following.label}" if following is not None else ""
        unoccupied = "Unoccupied"
        if zone.schedule is not None:
            # Issue #15.8: say which holiday keeps the schedule off, not just "unoccupied".
            day = schedule.holiday(zone.schedule, self.now.astimezone(self.tz).date())
            if day is not None:
                unoccupied = (
                    f"Unoccupied, holiday '{day.description or 'holiday'}' "
                    f"(schedule '{zone.schedule.name}')"
                )
        if zone.setback_setpoint is not None:
            demand = thermostat.calls_for_heat(temp, zone.setback_setpoint, h, was_on)
            return result(
                demand,
                SETBACK,
                f"{unoccupied}: {temp:.1f} °C, setback {zone.setback_setpoint:.1f} °C — "
                + ("heating" if demand else "satisfied")
                + nxt,
                zone.setback_setpoint,
            )
        return result(False, IDLE, f"{unoccupied}: heating off ({temp:.1f} °C){nxt}", None)

    def _remember_preheat(
        self, zone: ZoneSpec, window: Window, temp: float, preheat: float
    ) -> None:
        key = f"zone:{zone.id}:preheat"
        record = self.remembered.get(key)
        occupancy = window.start.timestamp()
        if not record or record.get("occupancy") != occupancy:
            record = {
                "occupancy": occupancy,
                "started": self.now_s,
                "temp": temp,
                "setpoint": window.setpoint,
                "preheat_min": preheat,
                "label": window.label,
            }
        self.memory[key] = record

    def _learning_event(self, zone: ZoneSpec, temp: float, current: list[Window]) -> None:
        """When an occupancy that was pre-heated starts, tell the runner so it can learn."""
        key = f"zone:{zone.id}:preheat"
        record = self.remembered.get(key)
        if not record:
            return
        if record["occupancy"] > self.now_s:
            self.memory[key] = record  # still coming; a tick may pass without pre-heat
            return
        if any(w.start.timestamp() == record["occupancy"] for w in current):
            self.events.append(
                {
                    "kind": "occupancy_start",
                    "zone_id": zone.id,
                    "temp_at_start": temp,
                    "at": self.now_s,
                    **record,
                }
            )

    # --- actuators -----------------------------------------------------------------------

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

    def zone_actuators(
        self, results: dict[int, ZoneResult], decisions: dict[int, Decision]
    ) -> None:
        by_actuator: dict[int, list[tuple[ZoneSpec, ZoneResult]]] = {}
        for zone in self.snapshot.zones:
            for aid in zone.actuator_ids:
                if aid in self.snapshot.actuators:
                    by_actuator.setdefault(aid, []).append((zone, results[zone.id]))
        for aid, entries in by_actuator.items():
            # An actuator shared by zones (a circuit pump) runs if any of them calls for heat.
            calling = [(z, r) for z, r in entries if r.demand]
            zone, res = (calling or entries)[0]
            reason = res.reason if len(entries) == 1 else f"{zone.name}: {res.reason}"
            proposal = Decision(aid, res.demand, reason, res.mode, res.user_id)
            owner = ", ".join(f"'{z.name}'" for z, _ in entries)
            owner = f"zone {owner}" if len(entries) == 1 else f"zones {owner}"
            final = self.finalize(self.snapshot.actuators[aid], proposal)
            decisions[aid] = replace(final, owner=owner)

    def plant(self, plant: PlantSpec, results: dict[int, ZoneResult], decisions: dict) -> None:
        boiler = self.snapshot.actuators.get(plant.boiler_id)
        if boiler is None:
            return
        calling = [
            (zid, results[zid]) for zid in plant.zone_ids if zid in results and results[zid].demand
        ]
        names = {z.id: z.name for z in self.snapshot.zones}
        if calling:
            listed = ", ".join(names[zid] for zid, _ in calling[:5])
            more = f" and {len(calling) - 5} more" if len(calling) > 5 else ""
            strategy = FROST if any(r.mode == FROST for _, r in calling) else HEATING_PLANT
            proposal = Decision(boiler.id, True, f"Heat demand from {listed}{more}", strategy)
        else:
            proposal = Decision(boiler.id, False, "No zone calls for heat", HEATING_PLANT)
        owner = f"heating plant '{plant.name}'"
        boiler_decision = replace(self.finalize(boiler, proposal), owner=owner)
        decisions[boiler.id] = boiler_decision

        pump_act = self.snapshot.actuators.get(plant.pump_id) if plant.pump_id else None
        if pump_act is None:
            return
        frosty, outside = self.outside_frost.get(plant.id, (False, None))
        cold, flow = self.flow_frost.get(plant.id, (False, None))
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
            stopped_at = self.now_s if boiler.is_on else boiler.last_off_at
            left = pump.overrun_left_s(False, stopped_at, self.now_s, plant.pump_overrun_s)
            if left > 0:
                proposal = Decision(
                    pump_act.id, True, pump.overrun_reason(left, plant.pump_overrun_s), PUMP_OVERRUN
                )
            else:
                proposal = Decision(pump_act.id, False, "Boiler off, overrun done", HEATING_PLANT)
        pump_decision = self.finalize(pump_act, self._kick(pump_act, plant.kick, proposal))
        decisions[pump_act.id] = replace(pump_decision, owner=owner)
        if not plant.has_bypass and (boiler_decision.state or pump_decision.state):
            running = pump_decision if pump_decision.state else boiler_decision
            self._keep_a_circuit_open(plant, decisions, running.reason)

    def _keep_a_circuit_open(self, plant: PlantSpec, decisions: dict, why: str) -> None:
        """Issue #15.8: a plant without a bypass must not run its pump (overrun, minimum burner
        run, kick, frost circulation) against closed zone valves. If no valve of its zones is
        open, the ones open at the last tick stay open; if none was, those of its first zone
        (the index circuit). A valve a safety limit or an engineer's override closed stays
        closed."""
        zones = {z.id: z for z in self.snapshot.zones}
        valves: list[ActuatorSpec] = []
        zone_of: dict[int, int] = {}
        for zid in plant.zone_ids:
            for aid in zones[zid].actuator_ids if zid in zones else ():
                act = self.snapshot.actuators.get(aid)
                if act is not None and act.kind in VALVE_KINDS and aid in decisions:
                    valves.append(act)
                    zone_of.setdefault(aid, zid)
        if not valves or any(decisions[v.id].state for v in valves):
            return
        free = [
            v
            for v in valves
            if decisions[v.id].strategy not in SAFETY_STRATEGIES | {OVERRIDE}
            and override_rules.active(v.override, self.now) is None
        ]
        held = [v for v in free if v.is_on]
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

    # --- weather compensation ---------------------------------------------------------------

    def _index_zone(self, plant: PlantSpec) -> int | None:
        if plant.index_zone_id in plant.zone_ids:
            return plant.index_zone_id
        return plant.zone_ids[0] if plant.zone_ids else None

    def weather(self, plant: PlantSpec, results: dict[int, ZoneResult], decisions: dict) -> None:
        """The heating curve and the mixing loop of a plant (control/engine/weather.py). Limits win:
        flow over-temperature closes the valve (boiler: set point at flow min); frost (outside
        or flow) opens it (boiler: the curve's set point even without demand). The PI integral
        is held while a limit drives the output, reset when there is no demand."""
        w = plant.weather
        assert w is not None
        key = f"plant:{plant.id}:weather"
        mem = dict(self.remembered.get(key) or {})
        frosty, outside = self.outside_frost.get(plant.id, (False, None))
        cold, flow = self.flow_frost.get(plant.id, (False, None))
        calling = [results[z] for z in plant.zone_ids if z in results and results[z].demand]
        index = self._index_zone(plant)
        targets = [r.target for r in calling if r.target is not None]
        if not targets and index in results and results[index].target is not None:
            targets = [results[index].target]  # type: ignore[list-item]
        room_sp = max(targets) if targets else 20.0
        room_c = results[index].temperature if index in results else None
        assumed = ""
        if outside is None:
            # Siemens controllers run on 0 °C when the outside sensor is lost: warm enough
            # for comfort, never cold; the plant-outside alarm says so.
            assumed = " (outside sensor lost: 0 °C assumed)"
        curve = heating_curve(
            0.0 if outside is None else outside,
            room_sp,
            w.slope,
            w.shift_k,
            w.flow_min_c,
            w.flow_max_c,
            w.room_influence,
            room_c,
        )
        why_curve = (
            f"heating curve: outside {0.0 if outside is None else outside:.1f} °C{assumed}, "
            f"room {room_sp:.1f} °C → flow {curve:.1f} °C (slope {w.slope:g}, shift "
            f"{w.shift_k:+g} K)"
        )
        demand = bool(calling) or bool(
            (d := decisions.get(plant.boiler_id)) is not None and d.state
        )
        mixing = w.mode == "mixing_valve"
        hot = False
        if mixing and flow is not None:
            hot = overtemp.cut_off(
                flow, w.flow_limit_c, plant.limit_band_k, bool(mem.get("overtemp"))
            )
        mem["overtemp"] = hot
        integral = float(mem.get("integral", 0.0))
        held = plant.output_override
        if held is not None and held.expires <= self.snapshot.now:
            held = None  # ends by itself, also on a cached configuration (database away)
        strategy = WEATHER
        if hot:
            value = 0.0 if mixing else w.flow_min_c
            strategy = OVER_TEMPERATURE
            why = (
                f"Flow over-temperature: {flow:.1f} °C (closed from {w.flow_limit_c:g} °C until "
                f"below {w.flow_limit_c - plant.limit_band_k:g} °C)"
            )
        elif frosty or cold:
            value = 100.0 if mixing else curve
            strategy = FROST
            what = (
                f"outside {outside:.1f} °C below {plant.frost_outside_c:g} °C"
                if frosty
                else f"flow {flow:.1f} °C below {plant.flow_frost_c:g} °C"
            )
            why = f"Plant frost protection: {what} — " + (
                "valve open" if mixing else f"flow set point {curve:.1f} °C"
            )
            if held is not None:
                why += f" (beats the manual override by {held.user_name or 'an operator'})"
        elif held is not None:
            # The operator's value, inside the limits that still win above. The integral
            # takes the held position, so the loop resumes from it without a bump.
            value = min(100.0, max(0.0, held.value)) if mixing else held.value
            if mixing:
                integral = value
            strategy = OVERRIDE
            why = (
                f"Manual override by {held.user_name or 'an operator'} until "
                f"{hhmm(held.expires, self.tz)}: "
                + (f"valve held at {value:.0f} %" if mixing else f"flow set point {value:.1f} °C")
                + f" — {held.reason}"
            )
        elif not demand:
            value, integral = (0.0 if mixing else w.flow_min_c), 0.0
            why = "No heat demand: " + (
                "valve closed" if mixing else f"flow set point at minimum {w.flow_min_c:g} °C"
            )
        elif not mixing:
            value = curve
            why = why_curve[0].upper() + why_curve[1:]
        elif flow is None:
            value = float(mem.get("output", 0.0))
            why = f"Flow sensor lost: valve held at {value:.0f} % ({why_curve})"
        else:
            last = mem.get("t")
            dt = self.now_s - last if last is not None else 30.0
            dt = min(max(dt, 1.0), 600.0)  # a long gap (restart, outage) is not all integral
            step = pi_step(curve, flow, w.kp, w.ti_s, integral, dt)
            value, integral = step.output_pct, step.integral
            why = (
                f"{why_curve[0].upper() + why_curve[1:]}; flow {flow:.1f} °C, PI "
                f"(P {step.proportional:+.1f}, I {step.integral:.1f}) → valve {value:.0f} %"
            )
        mem.update(integral=integral, output=value, t=self.now_s)
        unit = "%" if mixing else "°C"
        raw = None
        pulse_id, pulse_s = None, 0.0
        if w.output == "three_point":
            state = ValveState(**mem["valve"]) if mem.get("valve") else ValveState()
            pulse = three_point_pulse(value, state, w.run_time_s, w.max_pulse_s, w.min_pulse_s)
            mem["valve"] = vars(pulse.after)
            if pulse.direction:
                pulse_id = w.open_id if pulse.direction == OPEN else w.close_id
                pulse_s = pulse.seconds
            moving = {OPEN: f"open {pulse.seconds:.1f} s", CLOSE: f"close {pulse.seconds:.1f} s"}
            why += f"; three-point: {moving.get(pulse.direction, 'no pulse')}, {pulse.why}"
            for aid, label in ((w.open_id, "open"), (w.close_id, "close")):
                if aid in self.snapshot.actuators:
                    # Between pulses both relays are off; the pulse itself is the runner's
                    # (control/drivers/three_point.py: the other relay off first, never both).
                    decisions[aid] = Decision(
                        aid,
                        False,
                        f"Three-point valve of '{plant.name}' ({label} relay): at rest between "
                        f"pulses. {why}",
                        strategy,
                        owner=f"heating plant '{plant.name}'",
                    )
        else:
            raw = to_raw(value, w.scale_low, w.scale_high, w.raw_min, w.raw_max)
        self.memory[key] = mem
        owner = {
            OVER_TEMPERATURE: "over-temperature limit",
            FROST: "plant frost protection",
            OVERRIDE: f"manual override by {held.user_name or 'an operator'}" if held else "",
        }.get(strategy, "weather compensation")
        self.outputs[plant.id] = OutputDecision(
            plant.id,
            curve,
            value,
            unit,
            why,
            strategy,
            raw,
            pulse_id,
            pulse_s,
            outside_c=outside,
            flow_c=flow,
            position_pct=mem["valve"]["position_pct"] if w.output == "three_point" else None,
            owner=owner,
            user_id=held.user_id if strategy == OVERRIDE and held is not None else None,
        )

    def _kick(self, act: ActuatorSpec, kick: KickSpec | None, proposal: Decision) -> Decision:
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

    def solar(self, circuit: SolarSpec, decisions: dict[int, Decision]) -> None:
        act = self.snapshot.actuators.get(circuit.pump_id)
        if act is None:
            return
        key = f"solar:{circuit.id}"
        problems = [
            f"{label}: {p}"
            for label, reading in (("Collector", circuit.collector), ("Tank", circuit.tank))
            if (
                p := sensor_health.problem(
                    reading, True, self.now_s, circuit.sensor_stale_after_s, tz=self.tz
                )
            )
        ]
        if problems:
            self.alarms[f"solar-sensor:{circuit.id}"] = (
                f"Solar circuit '{circuit.name}': " + "; ".join(problems) + ": pump held off"
            )
            # Limits in force stay in force until a reading says otherwise.
            for flag in ("emergency", "antifreeze", "tank_full"):
                if self.remembered.get(f"{key}:{flag}"):
                    self.memory[f"{key}:{flag}"] = True
            proposal = Decision(
                act.id, False, "; ".join(problems) + SOLAR_FALLBACK, SENSOR_FALLBACK
            )
        else:
            verdict = solar.decide(
                circuit,
                circuit.collector.value,  # type: ignore[union-attr]
                circuit.tank.value,  # type: ignore[union-attr]
                bool(act.is_on),
                bool(self.remembered.get(f"{key}:emergency")),
                bool(self.remembered.get(f"{key}:antifreeze")),
                bool(self.remembered.get(f"{key}:tank_full")),
            )
            for flag in ("emergency", "antifreeze", "tank_full"):
                if getattr(verdict, flag):
                    self.memory[f"{key}:{flag}"] = True
            proposal = Decision(act.id, verdict.pump_on, verdict.reason, verdict.strategy)
        final = self.finalize(act, self._kick(act, circuit.kick, proposal))
        decisions[act.id] = replace(final, owner=f"solar circuit '{circuit.name}'")


def _utc(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def _occupied_until(windows: list[Window], window: Window) -> datetime:
    """End of the occupancy, following back-to-back or overlapping windows."""
    until = window.end
    for other in windows:
        if other.start <= until and other.end > until:
            until = other.end
    return until
