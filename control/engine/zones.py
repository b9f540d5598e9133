"""Zones: what each room or heating circuit wants (frost, over-temperature, override,
occupancy with optimum start / stop, setback, off), its fallback when its sensor is lost, and the
zone valves and radiators that follow it."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from control.engine import open_window
from control.engine.specs import (
    BOOKING,
    FROST,
    IDLE,
    OPTIMUM_START,
    OPTIMUM_STOP,
    OVER_TEMPERATURE,
    OVERRIDE,
    SENSOR_FALLBACK,
    SETBACK,
    VALVE_KINDS,
    Decision,
    Window,
    ZoneResult,
    ZoneSpec,
)
from control.engine.strategies import (
    bookings,
    fallback,
    frost,
    optimum_start,
    overtemp,
    schedule,
    sensor_health,
    thermostat,
)
from control.engine.strategies import override as override_rules
from control.engine.tick import Tick
from control.engine.timefmt import hhmm


def decide(tick: Tick, zone: ZoneSpec) -> ZoneResult:
    flags: list[str] = []
    if any(
        (a := tick.snapshot.actuators.get(aid)) is not None and a.fault for aid in zone.actuator_ids
    ):
        flags.append("actuator_fault")
    problem = sensor_health.problem(
        zone.reading,
        zone.has_sensor,
        tick.now_s,
        zone.sensor_stale_after_s,
        zone.sensor_name,
        tick.tz,
    )
    override = override_rules.active(zone.override, tick.now)
    if problem:
        flags.append("sensor_fault")
        tick.alarms[f"zone-sensor:{zone.id}"] = (
            f"Zone '{zone.name}': {problem}. Fallback: heating on for plant frost "
            f"protection (outside below the plant's threshold), fixed duty "
            f"{zone.fallback_duty_pct:g}% while occupied, otherwise off"
        )
        # A held setpoint needs a reading to work to: without one the fallback decides.
        if override is not None and override.setpoint is None:
            return ZoneResult(
                zone.id,
                override.state,
                OVERRIDE,
                f"{override_rules.describe(override, tick.tz)} ({problem})",
                flags=tuple(flags),
                user_id=override.user_id,
            )
        return _fallback(tick, zone, problem, tuple(flags))
    temp = zone.reading.value  # type: ignore[union-attr]  # checked by sensor_health
    key = f"zone:{zone.id}"
    if frost.active(temp, zone.frost_on, zone.frost_off, bool(tick.remembered.get(f"{key}:frost"))):
        tick.memory[f"{key}:frost"] = True
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
        bool(tick.remembered.get(f"{key}:overtemp")),
    ):
        tick.memory[f"{key}:overtemp"] = True
        return ZoneResult(
            zone.id,
            False,
            OVER_TEMPERATURE,
            f"Over-temperature cut-off: {temp:.1f} °C (off from {zone.max_temperature:g} °C "
            # cut_off releases at max − band exactly (27.9 holds, 27.0 releases): say so.
            f"until at or below {zone.max_temperature - zone.limit_band_k:g} °C)",
            temp,
            None,
            tuple(flags),
        )
    if override is not None and override.setpoint is not None:
        was_on = bool(tick.remembered.get(f"{key}:heat"))
        demand = thermostat.calls_for_heat(temp, override.setpoint, zone.hysteresis, was_on)
        tick.memory[f"{key}:heat"] = demand
        return ZoneResult(
            zone.id,
            demand,
            OVERRIDE,
            f"{override_rules.describe(override, tick.tz)} ({temp:.1f} °C — "
            + ("heating)" if demand else "satisfied)"),
            temp,
            override.setpoint,
            tuple(flags),
            user_id=override.user_id,
        )
    if override is not None:
        return ZoneResult(
            zone.id,
            override.state,
            OVERRIDE,
            f"{override_rules.describe(override, tick.tz)} ({temp:.1f} °C)",
            temp,
            None,
            tuple(flags),
            user_id=override.user_id,
        )
    # An open window stops the demand below (safety and an override above still win).
    window = open_window.check(tick, zone, temp, tuple(flags))
    if window.result is not None:
        return window.result
    result = _demand(tick, zone, temp, tuple(flags))
    if window.resumed:
        return replace(result, reason=f"{result.reason} ({window.resumed}: heating resumes)")
    return result


def _fallback(tick: Tick, zone: ZoneSpec, problem: str, flags: tuple[str, ...]) -> ZoneResult:
    """The zone's sensor is lost: see control/engine/strategies/fallback.py for the order."""
    plants = tick.zone_plants.get(zone.id, [])
    for plant in plants:
        active, outside = tick.outside_frost.get(plant.id, (False, None))
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
        cold, flow = tick.flow_frost.get(plant.id, (False, None))
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
    windows = _windows(tick, zone)
    current = [w for w in windows if w.start <= tick.now < w.end]
    if current:
        window = max(current, key=lambda w: (w.setpoint, w.source == BOOKING))
        on, left_s = fallback.duty_on(tick.now_s, zone.fallback_duty_pct, zone.fallback_period_s)
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
    outside = [tick.outside_frost.get(p.id, (False, None))[1] for p in plants]
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


def _windows(tick: Tick, zone: ZoneSpec) -> list[Window]:
    start = tick.now - timedelta(days=1)
    end = tick.now + timedelta(minutes=zone.max_preheat_min) + timedelta(days=1)
    found = bookings.windows(zone.bookings, start, end, tick.tz, zone.comfort_setpoint)
    if zone.schedule is not None:
        found += schedule.windows(zone.schedule, start, end, tick.tz, zone.comfort_setpoint)
    return sorted(found, key=lambda w: (w.start, w.source != BOOKING))


def _demand(tick: Tick, zone: ZoneSpec, temp: float, flags: tuple[str, ...]) -> ZoneResult:
    key = f"zone:{zone.id}"
    was_on = bool(tick.remembered.get(f"{key}:heat"))
    windows = _windows(tick, zone)
    current = [w for w in windows if w.start <= tick.now < w.end]
    _learning_event(tick, zone, temp, current)
    h = zone.hysteresis

    def result(demand: bool, mode: str, reason: str, target: float | None, **kw) -> ZoneResult:
        tick.memory[f"{key}:heat"] = demand
        return ZoneResult(zone.id, demand, mode, reason, temp, target, flags, **kw)

    if current:
        # Overlapping occupancies: the warmest wins; a booking names itself first.
        window = max(current, key=lambda w: (w.setpoint, w.source == BOOKING))
        until = _occupied_until(windows, window)
        setpoint = window.setpoint
        minutes_left = (until - tick.now).total_seconds() / 60
        if zone.optimum_stop and optimum_start.may_stop_early(
            temp, setpoint, minutes_left, zone.cooling_rate_min_per_k, zone.coast_allowance_k
        ):
            return result(
                False,
                OPTIMUM_STOP,
                f"{window.label}: optimum stop, {temp:.1f} °C coasts to the end at "
                f"{hhmm(until, tick.tz)} (≥ {setpoint - zone.coast_allowance_k:.1f} °C)",
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
        if tick.now < w.start <= tick.now + timedelta(minutes=zone.max_preheat_min)
    ]
    latch = tick.remembered.get(f"{key}:preheat") or {}
    for window in upcoming:
        lead = (window.start - tick.now).total_seconds() / 60
        latched = zone.optimum_start and latch.get("occupancy") == window.start.timestamp()
        if latched:
            # The switch-on time is computed once and held until occupancy
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
            _remember_preheat(tick, zone, window, temp, preheat)
            demand = thermostat.calls_for_heat(temp, window.setpoint, h, was_on)
            rate = optimum_start.rate_c_per_h(zone.heating_rate_min_per_k)
            since = ""
            if latched:
                since = f", warming since {hhmm(_utc(latch['started']), tick.tz)} until it starts"
            return result(
                demand,
                OPTIMUM_START,
                f"{window.label}, pre-heat {round(preheat)} min at {rate:.1f} °C/h "
                f"({temp:.1f} → {window.setpoint:.1f} °C{since})"
                + ("" if demand else " — satisfied"),
                window.setpoint,
                preheat_min=preheat,
            )
    following = next((w for w in windows if w.start > tick.now), None)
    nxt = f"; next: {following.label}" if following is not None else ""
    unoccupied = "Unoccupied"
    if zone.schedule is not None:
        # Say which holiday keeps the schedule off, not just "unoccupied".
        day = schedule.holiday(zone.schedule, tick.now.astimezone(tick.tz).date())
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
    tick: Tick, zone: ZoneSpec, window: Window, temp: float, preheat: float
) -> None:
    key = f"zone:{zone.id}:preheat"
    record = tick.remembered.get(key)
    occupancy = window.start.timestamp()
    if not record or record.get("occupancy") != occupancy:
        record = {
            "occupancy": occupancy,
            "started": tick.now_s,
            "temp": temp,
            "setpoint": window.setpoint,
            "preheat_min": preheat,
            "label": window.label,
        }
    tick.memory[key] = record


def _learning_event(tick: Tick, zone: ZoneSpec, temp: float, current: list[Window]) -> None:
    """When an occupancy that was pre-heated starts, tell the runner so it can learn."""
    key = f"zone:{zone.id}:preheat"
    record = tick.remembered.get(key)
    if not record:
        return
    if record["occupancy"] > tick.now_s:
        tick.memory[key] = record  # still coming; a tick may pass without pre-heat
        return
    if any(w.start.timestamp() == record["occupancy"] for w in current):
        tick.events.append(
            {
                "kind": "occupancy_start",
                "zone_id": zone.id,
                "temp_at_start": temp,
                "at": tick.now_s,
                **record,
            }
        )


# --- actuators -----------------------------------------------------------------------


def drive_actuators(
    tick: Tick, results: dict[int, ZoneResult], decisions: dict[int, Decision]
) -> None:
    by_actuator: dict[int, list[tuple[ZoneSpec, ZoneResult]]] = {}
    for zone in tick.snapshot.zones:
        _valves_in_fault(tick, zone, results[zone.id])
    for zone in tick.snapshot.zones:
        for aid in zone.actuator_ids:
            if aid in tick.snapshot.actuators:
                by_actuator.setdefault(aid, []).append((zone, results[zone.id]))
    for aid, entries in by_actuator.items():
        # An actuator shared by zones (a circuit pump) runs if any of them calls for heat.
        calling = [(z, r) for z, r in entries if r.demand]
        zone, res = (calling or entries)[0]
        reason = res.reason if len(entries) == 1 else f"{zone.name}: {res.reason}"
        proposal = Decision(aid, res.demand, reason, res.mode, res.user_id)
        owner = ", ".join(f"'{z.name}'" for z, _ in entries)
        owner = f"zone {owner}" if len(entries) == 1 else f"zones {owner}"
        final = tick.finalize(tick.snapshot.actuators[aid], proposal)
        decisions[aid] = replace(final, owner=owner)


def _valves_in_fault(tick: Tick, zone: ZoneSpec, result: ZoneResult) -> None:
    """A zone that calls for heat with every valve in fault cannot take it, and does not call
    its plant's boiler (heating_plant.py): each relay has its own alarm, this one says what
    it means for the room."""
    acts = (tick.snapshot.actuators.get(aid) for aid in zone.actuator_ids)
    valves = [a for a in acts if a is not None and a.kind in VALVE_KINDS]
    if not result.demand or not valves or not all(a.fault for a in valves):
        return
    names = ", ".join(f"'{a.name}'" for a in valves)
    tick.alarms[f"zone-valves:{zone.id}"] = (
        f"Zone '{zone.name}' calls for heat but every valve is in fault ({names}): it cannot "
        "take heat and does not call its heating plant's boiler"
    )


def _utc(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def _occupied_until(windows: list[Window], window: Window) -> datetime:
    """End of the occupancy, following back-to-back or overlapping windows."""
    until = window.end
    for other in windows:
        if other.start <= until and other.end > until:
            until = other.end
    return until
