"""What the room did when heat was really applied: the optimum-start rate measured from history.

Replay is open loop: the recorded temperatures are what happened under the controller that was
running. Learning the rate from when *the replay* would have started pre-heat measured the old
controller's timing (a late start looked like a slow room: 20 → 36.7 min/K over 3½ days).
Here the rate comes from the room itself: each run of heat actually applied to the zone (a
confirmed ON of one of its actuators in the relay log, until the next OFF) and the temperature
rise recorded during it, up to the setpoint (pre-heat is the time to *reach* setpoint, so a
room's lag counts, and holding at setpoint afterwards does not).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from datetime import datetime

from control.engine.strategies.optimum_start import MAX_RATE, MIN_RATE
from control.models import ActuatorCommand

# A rise smaller than this is sensor noise or a thermostat top-up, not a measurement.
MIN_RUN_RISE_K = 0.5
# Bound on the relay log read for one replay (a year of a chattering valve is well under this).
MAX_COMMANDS = 50_000


@dataclass(frozen=True)
class HeatRun:
    """One measured run: heat on at `start`, rose `rise_k` in `minutes`."""

    start: float
    end: float
    rise_k: float
    minutes: float

    @property
    def rate_min_per_k(self) -> float:
        return min(MAX_RATE, max(MIN_RATE, self.minutes / self.rise_k))


def heat_intervals(actuator_ids: list[int], start: datetime, end: datetime) -> list[tuple]:
    """(on, off) unix-second intervals when any of the actuators was confirmed on.

    Only a confirmed ON is heat applied (a refused coil heated nothing); any OFF ends it.
    """
    rows = (
        ActuatorCommand.objects.filter(
            actuator_id__in=actuator_ids, requested_at__lt=end, requested_at__gte=start
        )
        .order_by("requested_at", "pk")
        .values_list("actuator_id", "state", "requested_at", "confirmed_at")[:MAX_COMMANDS]
    )
    on: dict[int, float] = {}
    spans: list[tuple[float, float]] = []
    for aid, state, requested, confirmed in rows:
        if state and confirmed is not None and aid not in on:
            on[aid] = confirmed.timestamp()
        elif not state and aid in on:
            spans.append((on.pop(aid), requested.timestamp()))
    spans += [(began, end.timestamp()) for began in on.values()]
    # Merge overlaps: two valves of one zone heating together are one run of heat.
    merged: list[list[float]] = []
    for a, b in sorted(spans):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return [(a, b) for a, b in merged]


def measure_runs(
    intervals: list[tuple], times: list[float], values: list[float], setpoint: float
) -> list[HeatRun]:
    """The rise in each heat interval from its first reading to the setpoint (or the run's end)."""
    runs = []
    for on, off in intervals:
        first = None
        last = None
        for t, v in zip(times, values, strict=True):
            if t < on:
                continue
            if t > off:
                break
            if first is None:
                first = (t, v)
                if v >= setpoint:
                    break  # already warm: holding, not heating up
                continue
            last = (t, v)
            if v >= setpoint:
                break
        if first is None or last is None:
            continue
        rise = last[1] - first[1]
        if rise >= MIN_RUN_RISE_K:
            runs.append(HeatRun(on, last[0], rise, (last[0] - on) / 60))
    return runs


def rate_until(runs: list[HeatRun], t: float, fallback: float) -> float:
    """The rate measured from the runs finished by `t` (their median: one odd day, a door left
    open, does not swing it), else the fallback."""
    done = [r.rate_min_per_k for r in runs if r.end <= t]
    return round(statistics.median(done), 2) if done else fallback
