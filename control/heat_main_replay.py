"""Replay a heat main — its sources' sequencing and its thermal store — over recorded history,
switching nothing.

The main's zones (their recorded temperatures, bookings and schedules), its recorded flow, its
store's top and bottom and the collector of each solar circuit feeding the store drive the same
pure evaluator the live tick uses, its memory carried from step to step (stages, lead order, run
hours, the store's charge latch). Relays are simulated: they do what they are told, their
minimum on/off times apply. The report says which stages would have run, when the lead rotated,
when the store charged and served and when the sun charged it, with the reasons the live tick
would have audited.

It is open loop, as the zone replay (control/replay.py): the flow and store temperatures are
what the plant of the time did, so a stage this replay adds does not warm the recorded flow.
Run hours, and the weekly rotation's week, are counted from the replay's start.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from control import mapper
from control.engine.evaluator import evaluate
from control.engine.specs import SENSOR_FALLBACK, Snapshot
from control.models import HeatMain, SolarCircuit, ThermalStore
from control.replay import (
    DEFAULT_SHORT_CYCLE_S,
    MAX_STEPS,
    ShortCycle,
    Switch,
    auto_step,
    history_end,
    history_zone_spec,
    read_history,
    simulated_actuators,
    switched,
)
from core.dates import when_text
from sensors.models import Actuator

# Every step evaluates each zone of the main: the work is zones × steps, bounded like the zone
# replay's steps (a 500-zone main replays a day at 3-minute steps, a week at 20 minutes).
MAX_ZONE_STEPS = 250_000
ROTATED = "lead rotated from "


@dataclass
class SourceRun:
    """One heat source over the replay: hours it would have run, how often it started."""

    name: str
    hours: float = 0.0
    starts: int = 0


@dataclass
class Rotation:
    at: datetime
    reason: str


@dataclass
class Raised:
    """An alarm the replay would have raised (its first step)."""

    at: datetime
    key: str
    text: str


@dataclass
class Assumed:
    """A zone whose room reading was lost: its demand came from the sensor fallback (a fixed
    duty, or off), not from its room."""

    zone: str
    first: datetime
    steps: int = 0
    example: str = ""  # the first step's reason


@dataclass
class StoreRun:
    name: str
    charges: int = 0
    charging_hours: float = 0.0
    serving_hours: float = 0.0
    solar_hours: float = 0.0


@dataclass
class HeatMainReplayReport:
    heat_main: str
    start: datetime
    end: datetime
    step_s: int
    zones: int = 0
    samples: int = 0
    # Steps whose window had no reading, per sensor (flow, store top/bottom, collectors, and
    # each zone's room, which makes the demand).
    missing: dict[str, int] = field(default_factory=dict)
    assumed: list[Assumed] = field(default_factory=list)
    sources: list[SourceRun] = field(default_factory=list)
    rotations: list[Rotation] = field(default_factory=list)
    store: StoreRun | None = None
    switches: list[Switch] = field(default_factory=list)
    short_cycles: list[ShortCycle] = field(default_factory=list)
    alarms: list[Raised] = field(default_factory=list)

    def as_text(self, tz: ZoneInfo) -> str:
        def t(d: datetime) -> str:
            return when_text(d, tz)

        missing = ", ".join(f"{name} {n}" for name, n in self.missing.items()) or "none"
        lines = [
            f"Replay of heat main '{self.heat_main}' {t(self.start)} – {t(self.end)}, step "
            f"{self.step_s} s (no relay touched)",
            f"Zones: {self.zones}; samples: {self.samples} (without a reading: {missing})",
        ]
        lines += [
            f"  {a.zone}: demand assumed for {a.steps} step{'s' * (a.steps != 1)} from "
            f"{t(a.first)} (room reading lost: {a.example})"
            for a in self.assumed
        ]
        lines += [
            "Sources (run hours and the lead's week counted from the replay's start):",
        ]
        lines += [
            f"  {s.name}: {s.hours:.2f} h, {s.starts} start{'s' * (s.starts != 1)}"
            for s in self.sources
        ]
        lines.append(f"Lead rotations: {len(self.rotations)}")
        lines += [f"  {t(r.at)}  {r.reason}" for r in self.rotations]
        if self.store is not None:
            st = self.store
            lines.append(
                f"Store '{st.name}': {st.charges} charge{'s' * (st.charges != 1)} called from "
                f"the sources, {st.charging_hours:.2f} h charging (its charge pump on, with a "
                f"source running); served the main "
                f"{st.serving_hours:.2f} h; charged by the sun {st.solar_hours:.2f} h"
            )
        lines.append(f"Switching: {len(self.switches)}")
        lines += [
            f"  {t(s.at)}  {s.actuator}: {'ON ' if s.state else 'OFF'}  {s.reason}"
            for s in self.switches
        ]
        lines.append(
            f"Short cycles (< {DEFAULT_SHORT_CYCLE_S // 60} min on): {len(self.short_cycles)}"
        )
        lines += [
            f"  {s.actuator}: {t(s.on_at)} for {s.minutes:.0f} min" for s in self.short_cycles
        ]
        lines.append(f"Alarms: {len(self.alarms)}")
        lines += [f"  {t(a.at)}  {a.text}" for a in self.alarms]
        return "\n".join(lines)


def replay_heat_main(
    main: HeatMain,
    start: datetime,
    end: datetime,
    step_s: int | None = None,
    short_cycle_s: int = DEFAULT_SHORT_CYCLE_S,
    now: datetime | None = None,
) -> HeatMainReplayReport:
    end = history_end(start, end, now)
    zones = list(main.zones.filter(enabled=True).select_related("temperature_sensor__feed"))
    store = ThermalStore.objects.filter(heat_main=main).first()
    solars = (
        list(SolarCircuit.objects.filter(enabled=True, tank_sensor_id=store.bottom_sensor_id))
        if store is not None
        else []
    )
    flow_feed = main.flow_sensor.feed if main.flow_sensor_id else None
    step = step_s or auto_step(start, end, flow_feed.interval if flow_feed else 60)
    steps = (end - start).total_seconds() / step
    if steps > MAX_STEPS or steps * max(1, len(zones)) > MAX_ZONE_STEPS:
        least = auto_step(start, end, 60)
        while (end - start).total_seconds() / least * max(1, len(zones)) > MAX_ZONE_STEPS:
            least *= 2
        raise ValueError(
            f"Too many steps for {len(zones)} zone(s): use a step of at least {least} s."
        )

    # The recorded feeds, each read once in windows of the step.
    sensors: dict[str, int | None] = {"flow": flow_feed.pk if flow_feed else None}
    if store is not None:
        sensors |= {
            "store top": store.top_sensor.feed_id,
            "store bottom": store.bottom_sensor.feed_id,
        }
    for s in solars:
        sensors[f"collector '{s.name}'"] = s.collector_sensor.feed_id
    history = {name: read_history(feed, start, end, step) for name, feed in sensors.items()}
    rooms = {
        z.pk: read_history(
            z.temperature_sensor.feed_id if z.temperature_sensor_id else None, start, end, step
        )
        for z in zones
    }
    site = mapper.site_settings()
    members = {z.pk: list(z.actuators.filter(enabled=True)) for z in zones}
    zone_specs = {
        z.pk: history_zone_spec(
            z, site, start, end, [a.pk for a in members[z.pk]], rooms[z.pk].window_s(step)
        )
        for z in zones
    }
    sources = list(main.sources.all())
    main_spec = mapper.heat_main_spec(main, zone_ids=list(zone_specs))
    window = history["flow"].window_s(step)
    main_spec = replace(main_spec, sensor_stale_after_s=max(main_spec.sensor_stale_after_s, window))
    store_spec = None
    if store is not None:
        store_spec = mapper.store_spec(store, solars=solars)
        window = max(history["store top"].window_s(step), history["store bottom"].window_s(step))
        store_spec = replace(
            store_spec, sensor_stale_after_s=max(store_spec.sensor_stale_after_s, window)
        )
    solar_specs = {}
    for s in solars:
        spec = mapper.solar_spec(s)
        window = history[f"collector '{s.name}'"].window_s(step)
        solar_specs[s.pk] = replace(
            spec, sensor_stale_after_s=max(spec.sensor_stale_after_s, window)
        )

    # The relays it drives (sources, store and solar pumps) are reported; the zones' valves are
    # simulated too (a zone calls only through a valve that reads back open) but not listed.
    reported = {s.actuator_id: s.name for s in sources}
    if store is not None:
        for pump in (store.charge_pump_id, store.discharge_pump_id):
            if pump:
                reported[pump] = ""
    reported |= {s.pump_id: "" for s in solars}
    relays = {a.pk: a for a in Actuator.objects.filter(pk__in=reported)}
    for acts in members.values():
        relays |= {a.pk: a for a in acts}
    sim = simulated_actuators(relays.values(), start)
    names = {aid: name or sim[aid].name for aid, name in reported.items() if aid in sim}

    report = HeatMainReplayReport(main.name, start, end, step, zones=len(zones))
    runs = {s.actuator_id: SourceRun(s.name) for s in sources if s.actuator_id in sim}
    report.sources = list(runs.values())
    report.missing = dict.fromkeys(history, 0)
    room_names = {z.pk: f"room '{z.name}'" for z in zones}
    report.missing |= dict.fromkeys(room_names.values(), 0)
    assumed: dict[int, Assumed] = {}
    if store is not None:
        report.store = StoreRun(store.name)
    raised: set[str] = set()
    memory: dict = {}
    on_since: dict[int, datetime] = {}
    was_charging = False
    moment = start
    while moment < end:
        t = int(moment.timestamp())
        report.samples += 1
        now_of = {}
        for name, sampler in history.items():
            found = sampler.at(t)
            if found is None or t - found.t >= sampler.window_s(step):
                report.missing[name] += 1
            now_of[name] = found
        for zid, sampler in rooms.items():
            found = sampler.at(t)
            if found is None or t - found.t >= sampler.window_s(step):
                report.missing[room_names[zid]] += 1
        collectors = {s.pk: now_of[f"collector '{s.name}'"] for s in solars}
        bottom = now_of.get("store bottom")
        snap = Snapshot(
            now=moment,
            time_zone=site.time_zone,
            zones=tuple(replace(z, reading=rooms[zid].at(t)) for zid, z in zone_specs.items()),
            actuators=sim,
            memory=memory,
            heat_mains=(replace(main_spec, flow=now_of["flow"]),),
            stores=(
                (replace(store_spec, top=now_of["store top"], bottom=bottom),)
                if store_spec is not None
                else ()
            ),
            solars=tuple(
                replace(spec, collector=collectors[pk], tank=bottom)
                for pk, spec in solar_specs.items()
            ),
        )
        result = evaluate(snap)
        memory = result.memory
        for zid, zone_result in result.zones.items():
            if zid in room_names and zone_result.mode == SENSOR_FALLBACK:
                if zid not in assumed:
                    assumed[zid] = Assumed(room_names[zid][5:].strip("'"), moment,
                                           example=zone_result.reason)  # fmt: skip
                    report.assumed.append(assumed[zid])
                assumed[zid].steps += 1
        for key, text in result.alarms.items():
            if key not in raised:
                raised.add(key)
                report.alarms.append(Raised(moment, key, text))
        for aid, decision in result.decisions.items():
            before = sim[aid]
            if aid in names and ROTATED in decision.reason:
                report.rotations.append(
                    Rotation(moment, decision.reason[decision.reason.index(ROTATED) :])
                )
            if decision.state == before.is_on:
                continue
            sim[aid] = switched(before, decision.state, t)
            if aid not in names:
                continue
            report.switches.append(Switch(moment, names[aid], decision.state, decision.reason))
            if decision.state:
                on_since[aid] = moment
                if aid in runs:
                    runs[aid].starts += 1
            elif aid in on_since:
                began = on_since.pop(aid)
                if (moment - began).total_seconds() < short_cycle_s:
                    report.short_cycles.append(ShortCycle(names[aid], began, moment))
        for aid, run in runs.items():
            if sim[aid].is_on:
                run.hours += step / 3600
        if store is not None and report.store is not None:
            charging = bool(memory.get(f"store:{store.pk}:charging"))
            report.store.charges += charging and not was_charging
            was_charging = charging
            _count_store(report.store, store, charging, solars, sim, result.decisions, step)
        moment += timedelta(seconds=step)
    return report


def _count_store(
    run: StoreRun,
    store: ThermalStore,
    charging: bool,
    solars: list[SolarCircuit],
    sim: dict,
    decisions: dict,
    step: int,
) -> None:
    """The store's hours this step: charging (its charge pump, else its latch), serving (its discharge pump, else the
    sources standing by for it), charged by the sun (a feeding solar pump on)."""
    hours = step / 3600
    if store.charge_pump_id and store.charge_pump_id in sim:
        charging = bool(sim[store.charge_pump_id].is_on)  # the latch waits for a source
    run.charging_hours += hours * charging
    if store.discharge_pump_id and store.discharge_pump_id in sim:
        serving = bool(sim[store.discharge_pump_id].is_on)
    else:
        serving = any("serves the main" in d.reason for d in decisions.values())
    run.serving_hours += hours * serving
    run.solar_hours += hours * any(s.pump_id in sim and sim[s.pump_id].is_on for s in solars)


def find_heat_main(name: str) -> HeatMain | None:
    """A heat main by name (or id)."""
    found = HeatMain.objects.filter(name=name).first()
    if found is None and name.isdigit():
        found = HeatMain.objects.filter(pk=int(name)).first()
    return found
