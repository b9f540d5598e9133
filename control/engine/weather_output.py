"""A weather-compensated plant's output each tick: the heating curve, then the mixing valve's
PI loop (or a modulating boiler's flow set point), with the limits and an operator's hold, as a
holding-register value or a three-point valve pulse. The arithmetic is in weather.py."""

from __future__ import annotations

from control.engine.specs import (
    FROST,
    OVER_TEMPERATURE,
    OVERRIDE,
    WEATHER,
    Decision,
    OutputDecision,
    PlantSpec,
    ZoneResult,
)
from control.engine.strategies import (
    overtemp,
)
from control.engine.tick import Tick
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


def _index_zone(plant: PlantSpec) -> int | None:
    if plant.index_zone_id in plant.zone_ids:
        return plant.index_zone_id
    return plant.zone_ids[0] if plant.zone_ids else None


def decide(tick: Tick, plant: PlantSpec, results: dict[int, ZoneResult], decisions: dict) -> None:
    """The heating curve and the mixing loop of a plant (control/engine/weather.py). Limits win:
    flow over-temperature closes the valve (boiler: set point at flow min); frost (outside
    or flow) opens it (boiler: the curve's set point even without demand). The PI integral
    is held while a limit drives the output, reset when there is no demand."""
    w = plant.weather
    assert w is not None
    key = f"plant:{plant.id}:weather"
    mem = dict(tick.remembered.get(key) or {})
    frosty, outside = tick.outside_frost.get(plant.id, (False, None))
    cold, flow = tick.flow_frost.get(plant.id, (False, None))
    calling = [results[z] for z in plant.zone_ids if z in results and results[z].demand]
    index = _index_zone(plant)
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
    demand = bool(calling) or bool((d := decisions.get(plant.boiler_id)) is not None and d.state)
    mixing = w.mode == "mixing_valve"
    hot = False
    if mixing and flow is not None:
        hot = overtemp.cut_off(flow, w.flow_limit_c, plant.limit_band_k, bool(mem.get("overtemp")))
    mem["overtemp"] = hot
    integral = float(mem.get("integral", 0.0))
    held = plant.output_override
    if held is not None and held.expires <= tick.snapshot.now:
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
            f"{hhmm(held.expires, tick.tz)}: "
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
        dt = tick.now_s - last if last is not None else 30.0
        dt = min(max(dt, 1.0), 600.0)  # a long gap (restart, outage) is not all integral
        step = pi_step(curve, flow, w.kp, w.ti_s, integral, dt)
        value, integral = step.output_pct, step.integral
        why = (
            f"{why_curve[0].upper() + why_curve[1:]}; flow {flow:.1f} °C, PI "
            f"(P {step.proportional:+.1f}, I {step.integral:.1f}) → valve {value:.0f} %"
        )
    mem.update(integral=integral, output=value, t=tick.now_s)
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
            if aid in tick.snapshot.actuators:
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
    elif w.output == "register":
        raw = to_raw(value, w.scale_low, w.scale_high, w.raw_min, w.raw_max)
    # A BACnet output carries `value` itself, in its unit (control/outputs.py writes it).
    tick.memory[key] = mem
    owner = {
        OVER_TEMPERATURE: "over-temperature limit",
        FROST: "plant frost protection",
        OVERRIDE: f"manual override by {held.user_name or 'an operator'}" if held else "",
    }.get(strategy, "weather compensation")
    tick.outputs[plant.id] = OutputDecision(
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
