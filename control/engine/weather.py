"""Weather compensation: the heating curve, the mixing loop's PI controller, the three-point
valve's pulses and the scaling of an analogue output. Pure functions, no Django, no I/O.

Heating curve (linearised, as Siemens RVD/RVP and most weather compensators draw it):

    flow = room set point + shift + slope × (room set point − outside)
           + room influence × (room set point − room temperature)    (when the room is known)

clamped to [flow min, flow max]. With slope 1.5, shift 0 and a 20 °C room: outside 0 °C ->
50 °C, outside −10 °C -> 65 °C.

Mixing loop: a PI controller (simple-pid, proportional on error, no derivative term) from the
flow temperature to the valve position 0–100 %. Anti-windup by clamping: simple-pid keeps the
integral inside the output limits, so a valve held at 100 % for an hour recovers as soon as the
error changes sign instead of unwinding an hour of integral. Its state between ticks is the
integral alone (no derivative term), carried in the strategy memory (Redis), so it survives a
worker restart.

Three-point valve: two relays (open, close) on one board, never both on; a pulse of
|target − position| / 100 × run time, at most `max_pulse_s` a tick, nothing under `min_pulse_s`
(the deadband). The position is estimated from the pulses; when the target is an end (0 or
100 %) the valve is driven a full run time towards it, whatever the estimate says, and then the
estimate is that end (end-position resync).
"""

from __future__ import annotations

from dataclasses import dataclass

from simple_pid import PID

OPEN, CLOSE = 1, -1


def heating_curve(
    outside_c: float,
    room_setpoint_c: float,
    slope: float,
    shift_k: float,
    flow_min_c: float,
    flow_max_c: float,
    room_influence: float = 0.0,
    room_c: float | None = None,
) -> float:
    """The flow temperature set point for this outside temperature (°C)."""
    flow = room_setpoint_c + shift_k + slope * (room_setpoint_c - outside_c)
    if room_c is not None and room_influence:
        flow += room_influence * (room_setpoint_c - room_c)
    return min(flow_max_c, max(flow_min_c, flow))


@dataclass(frozen=True)
class PiStep:
    output_pct: float
    proportional: float
    integral: float


def pi_step(
    setpoint_c: float, measured_c: float, kp: float, ti_s: float, integral: float, dt_s: float
) -> PiStep:
    """One step of the mixing loop: valve position (%) from the flow temperature.

    kp in % per K, ti_s the integral time (s): Ki = kp / ti_s. `integral` is the previous
    step's integral term (0 at start); it is clamped to 0–100 % (anti-windup)."""
    pid = PID(
        kp,
        kp / ti_s,
        0.0,
        setpoint=setpoint_c,
        sample_time=None,
        output_limits=(0.0, 100.0),
        starting_output=integral,
    )
    output = pid(measured_c, dt=max(dt_s, 1e-3))
    p, i, _d = pid.components
    return PiStep(float(output), float(p), float(i))


@dataclass(frozen=True)
class ValveState:
    """What the controller remembers of a three-point valve between ticks."""

    position_pct: float = 0.0
    synced_end: float | None = None  # 0 or 100 once driven a full run time there
    toward_end_s: float = 0.0  # seconds driven towards `target end` since it became the target


@dataclass(frozen=True)
class Pulse:
    direction: int  # OPEN, CLOSE, or 0 for none
    seconds: float
    after: ValveState
    why: str


def three_point_pulse(
    target_pct: float,
    state: ValveState,
    run_time_s: float,
    max_pulse_s: float,
    min_pulse_s: float,
) -> Pulse:
    """The pulse that moves the valve towards `target_pct` this tick."""
    target = min(100.0, max(0.0, target_pct))
    pos = state.position_pct
    if target in (0.0, 100.0):
        if state.synced_end == target:
            return Pulse(0, 0.0, state, f"at {target:.0f} % (end position synchronised)")
        direction = OPEN if target == 100.0 else CLOSE
        # Drive a full run time towards the end, whatever the estimate: the valve's end switch
        # stops the motor, and afterwards the estimate is exact (resync).
        left = run_time_s - state.toward_end_s
        seconds = min(max_pulse_s, max(left, 0.0))
        moved = pos + direction * seconds / run_time_s * 100.0
        done = state.toward_end_s + seconds >= run_time_s - 1e-9
        after = ValveState(
            target if done else min(100.0, max(0.0, moved)),
            target if done else None,
            0.0 if done else state.toward_end_s + seconds,
        )
        why = (
            f"driving to {target:.0f} % ({state.toward_end_s + seconds:.0f} of {run_time_s:.0f} s)"
        )
        return Pulse(direction, seconds, after, why)
    delta = target - pos
    wanted = abs(delta) / 100.0 * run_time_s
    if wanted < min_pulse_s:
        return Pulse(0, 0.0, ValveState(pos), f"at ~{pos:.0f} %, target {target:.0f} % (deadband)")
    seconds = min(wanted, max_pulse_s)
    direction = OPEN if delta > 0 else CLOSE
    moved = min(100.0, max(0.0, pos + direction * seconds / run_time_s * 100.0))
    return Pulse(
        direction, seconds, ValveState(moved), f"~{pos:.0f} → ~{moved:.0f} %, target {target:.0f} %"
    )


def to_raw(value: float, scale_low: float, scale_high: float, raw_min: int, raw_max: int) -> int:
    """An engineering value (°C or %) as the output module's raw counts: `scale_low` is
    `raw_min` (0 V / 4 mA), `scale_high` is `raw_max` (10 V / 20 mA); clamped to the range."""
    fraction = (value - scale_low) / (scale_high - scale_low)
    fraction = min(1.0, max(0.0, fraction))
    return int(round(raw_min + fraction * (raw_max - raw_min)))
