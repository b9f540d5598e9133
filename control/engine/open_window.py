"""Open-window detection: a zone whose window is open stops heating for a while, then resumes.

Two ways to tell, as the better room thermostats do (Versatile Thermostat's "auto" and "sensor"
modes, Netatmo, tado°):
- a **temperature drop while heating**: the room falls by `drop_k` or more within
  `drop_window_s` while the zone calls for heat through a valve its board confirmed open (a
  heated room does not cool on its own; one whose valve is shut or in fault does). The
  zone's heating stops for `pause_s` and then resumes on its own; the drop is measured afresh
  from then on, so a window still open is found again. A drop is judged only once the zone has
  heated for a whole `drop_window_s` (a room keeps cooling while its radiator warms up).
- a **window contact** (a sensor reading 1 or 0 when open): heating stops while it reads open and
  resumes when it closes. A contact with no fresh reading is alarmed and ignored: a lost contact
  must not leave a room unheated.

Frost protection and the over-temperature cut-off are decided before this (zones.py), so they
win; so does an engineer's override. A zone whose sensor is lost is in its fallback and not
checked here. What is remembered between ticks (control/runtime.py keeps the memory):
`zone:<id>:window` the pause in force, `zone:<id>:window_trace` the readings of the look-back
window while heating (at most MAX_TRACE of them, newest kept), `zone:<id>:window_heating_since`
when the zone's heating last started.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from control.engine.specs import OPEN_WINDOW, VALVE_KINDS, ZoneResult, ZoneSpec
from control.engine.strategies import sensor_health
from control.engine.tick import Tick
from control.engine.timefmt import hhmm

# Readings kept for the drop: a sensor posting every 10 s over the longest look-back (60 min)
# would be 360; a bound keeps the memory small whatever a node posts. The newest are kept, so a
# faster sensor only shortens the look-back, never delays a detection.
MAX_TRACE = 240
FLAG = "window_open"


@dataclass(frozen=True)
class Outcome:
    """`result`: the zone is paused for an open window (heating off). `resumed`: a pause ended
    at this tick, for the demand's reason to say so."""

    result: ZoneResult | None = None
    resumed: str = ""


def drop(trace: list[list[float]], now_t: float, window_s: float) -> tuple[float, float, float]:
    """The largest fall to the newest reading from any reading within `window_s` before it:
    (fall in K, the earlier temperature, seconds between them). `trace` is [[t, value], ...]."""
    if not trace:
        return 0.0, 0.0, 0.0
    latest = trace[-1][1]
    best = (0.0, latest, 0.0)
    for t, value in trace:
        if now_t - t <= window_s and value - latest > best[0]:
            best = (value - latest, value, now_t - t)
    return best


def add_reading(trace: list[list[float]], t: float, value: float, window_s: float) -> list:
    """The trace with a new reading (ignored unless newer than the last), readings older than
    the look-back dropped and at most MAX_TRACE kept."""
    if trace and t <= trace[-1][0]:
        return trace
    kept = [p for p in trace if t - p[0] <= window_s]
    kept.append([t, value])
    return kept[-MAX_TRACE:]


def check(tick: Tick, zone: ZoneSpec, temp: float, flags: tuple[str, ...]) -> Outcome:
    spec = zone.window
    if spec is None:
        return Outcome()
    key = f"zone:{zone.id}:window"
    paused = tick.remembered.get(key)
    opened = _contact_open(tick, zone)
    if opened:
        since = paused["since"] if paused and paused.get("cause") == "contact" else tick.now_s
        tick.memory[key] = {"cause": "contact", "since": since}
        at = hhmm(_utc(since), tick.tz)
        return _paused(
            tick,
            zone,
            temp,
            flags,
            f"Window open: contact '{spec.contact_name}' open since {at} — heating off "
            f"while it is open ({temp:.1f} °C)",
        )
    if paused and paused.get("cause") == "drop" and tick.now_s < paused["until"]:
        tick.memory[key] = paused
        return _paused(
            tick,
            zone,
            temp,
            flags,
            f"Window open: {paused['detail']} while heating — heating off until "
            f"{hhmm(_utc(paused['until']), tick.tz)} ({round(spec.pause_s / 60)} min), then "
            f"resumes ({temp:.1f} °C)",
        )
    resumed = ""
    if paused:
        resumed = (
            "window contact closed"
            if paused.get("cause") == "contact"
            else f"open-window pause ended {hhmm(_utc(paused['until']), tick.tz)}"
        )
    if not spec.detect_drop or zone.reading is None:
        return Outcome(resumed=resumed)
    trace_key = f"zone:{zone.id}:window_trace"
    heating = bool(tick.remembered.get(f"zone:{zone.id}:heat")) and _heat_flowing(tick, zone)
    since_key = f"zone:{zone.id}:window_heating_since"
    if not heating or resumed:
        # Only a room being heated tells a window by cooling; after a pause, measure afresh.
        tick.memory[trace_key] = [[zone.reading.t, temp]]
        tick.memory[since_key] = zone.reading.t
        return Outcome(resumed=resumed)
    since = tick.remembered.get(since_key)
    since = zone.reading.t if since is None else since
    tick.memory[since_key] = since
    trace = add_reading(
        list(tick.remembered.get(trace_key) or []), zone.reading.t, temp, spec.drop_window_s
    )
    fall, before, over_s = drop(trace, zone.reading.t, spec.drop_window_s)
    # A room keeps cooling for a while after its heating starts (the radiator warms first):
    # judged only once it has heated for a whole look-back, or a cold room would be "a window"
    # at every start and after every pause, and never heat.
    settled = zone.reading.t - since >= spec.drop_window_s
    if settled and fall >= spec.drop_k - 1e-9:
        detail = (
            f"temperature fell {fall:.1f} K in {max(1, round(over_s / 60))} min "
            f"({before:.1f} → {temp:.1f} °C, limit {spec.drop_k:g} K in "
            f"{round(spec.drop_window_s / 60)} min)"
        )
        until = tick.now_s + spec.pause_s
        tick.memory[key] = {"cause": "drop", "since": tick.now_s, "until": until, "detail": detail}
        return _paused(
            tick,
            zone,
            temp,
            flags,
            f"Window open: {detail} while heating — heating off until "
            f"{hhmm(_utc(until), tick.tz)} ({round(spec.pause_s / 60)} min), then resumes",
        )
    tick.memory[trace_key] = trace
    return Outcome()


def _heat_flowing(tick: Tick, zone: ZoneSpec) -> bool:
    """The zone takes heat: a valve its board confirmed open (or it has no valve). A room
    whose valve is shut or in fault cools without any window, and is alarmed for that
    (zones.py), not paused."""
    acts = (tick.snapshot.actuators.get(aid) for aid in zone.actuator_ids)
    valves = [a for a in acts if a is not None and a.kind in VALVE_KINDS]
    return not valves or any(a.confirmed_open for a in valves)


def _contact_open(tick: Tick, zone: ZoneSpec) -> bool:
    spec = zone.window
    if spec is None or not spec.contact_name:
        return False
    problem = sensor_health.problem(
        zone.window_contact,
        True,
        tick.now_s,
        zone.sensor_stale_after_s,
        spec.contact_name,
        tick.tz,
    )
    if problem:
        tick.alarms[f"zone-window-contact:{zone.id}"] = (
            f"Zone '{zone.name}': window contact: "
            + problem.replace("Temperature sensor", "sensor").replace(
                "temperature sensor", "sensor"
            )
            + ". Open-window detection by contact is off until it reports again"
        )
        return False
    return round(zone.window_contact.value) == spec.contact_open  # type: ignore[union-attr]


def _paused(
    tick: Tick, zone: ZoneSpec, temp: float, flags: tuple[str, ...], reason: str
) -> Outcome:
    # The zone's own memory the demand would have written: a latched pre-heat is held over a
    # pause (its occupancy has not moved); the thermostat starts afresh after it.
    preheat = tick.remembered.get(f"zone:{zone.id}:preheat")
    if preheat:
        tick.memory[f"zone:{zone.id}:preheat"] = preheat
    tick.memory[f"zone:{zone.id}:heat"] = False
    return Outcome(
        ZoneResult(zone.id, False, OPEN_WINDOW, reason, temp, None, (*flags, FLAG)),
    )


def _utc(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)
