"""A heat main's lead/lag sequencing (control/engine/heat_main.py) on a simulated main: the
sources' heat warms the main's water, the zones' load cools it, 30 s a tick on the test's clock.
The tests assert which relay switched when, and the reason it was given."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from control import mapper
from control.engine.evaluator import evaluate
from control.engine.heat_main import WEEK_S
from control.engine.specs import (
    HEAT_MAIN,
    BookingSpec,
    HeatMainSpec,
    HeatSourceSpec,
    Reading,
    Snapshot,
)

from .helpers import actuator_spec, valve, zone

TICK_S = 30
START = datetime(2026, 1, 14, 8, 0, tzinfo=UTC)
GAS1, GAS2, BIOMASS = 31, 32, 33  # their relays' actuator ids


def main_spec(**kw) -> HeatMainSpec:
    sources = (
        HeatSourceSpec(id=1, name="Gas 1", actuator_id=GAS1, order=1, rotate=True, ramp_s=120),
        HeatSourceSpec(id=2, name="Gas 2", actuator_id=GAS2, order=2, rotate=True, ramp_s=120),
    )
    base = dict(
        id=1, name="Heat main", zone_ids=(1,), sources=sources, flow_name="main-flow",
        flow_setpoint_c=75.0, stage_up_k=5.0, stage_up_s=600, stage_down_k=5.0,
        stage_down_s=300, rotate_weekly=True, rotate_hours=0.0, sensor_stale_after_s=900,
    )  # fmt: skip
    base.update(kw)
    return HeatMainSpec(**base)


def relay(aid: int, name: str, **kw):
    return actuator_spec(id=aid, name=name, kind="boiler", min_on_s=0, min_off_s=0,
                         is_on=False, confirmed=True, **kw)  # fmt: skip


@dataclass
class Switch:
    at: datetime
    name: str
    state: bool
    reason: str


class SimulatedMain:
    """The main's water (one mass), heated by each source confirmed on, cooled by the load."""

    def __init__(self, main: HeatMainSpec, acts: dict, load_kw: float, flow_c: float = 60.0):
        self.main, self.acts, self.load_kw, self.flow_c = main, acts, load_kw, flow_c
        self.power_kw = {GAS1: 60.0, GAS2: 60.0, BIOMASS: 80.0}
        self.capacity_kj_k = 2000 * 4.186  # 2 m³ of water
        self.memory: dict = {}
        self.switches: list[Switch] = []
        self.alarms: dict[str, str] = {}
        self.now = START
        self.refused: set[int] = set()  # relays whose board refuses (fault)

    def run(self, minutes: float) -> None:
        for _ in range(int(minutes * 60 / TICK_S)):
            self.tick()

    def tick(self) -> None:
        t = self.now.timestamp()
        hall = zone(18.0, self.now, actuator_ids=(10,), optimum_start=False,
                    bookings=(BookingSpec("Day", START, START + timedelta(days=30)),))  # fmt: skip
        snap = Snapshot(
            now=self.now,
            time_zone=mapper.site_settings().time_zone,
            zones=(hall,),
            actuators=self.acts,
            memory=self.memory,
            heat_mains=(replace(self.main, flow=Reading(t - 5, round(self.flow_c, 1))),),
        )
        result = evaluate(snap)
        self.memory = result.memory
        self.alarms = result.alarms
        for aid, d in result.decisions.items():
            a = self.acts[aid]
            fault = aid in self.refused
            if d.state != a.is_on:
                self.switches.append(Switch(self.now, a.name, d.state, d.reason))
                a = replace(a, is_on=d.state, changed_at=t)
            self.acts[aid] = replace(a, fault=fault, confirmed=not fault)
        heat = sum(self.power_kw.get(aid, 0.0) for aid, a in self.acts.items() if a.confirmed_open)
        self.flow_c += TICK_S * (heat - self.load_kw) / self.capacity_kj_k
        self.now += timedelta(seconds=TICK_S)

    def of(self, name: str) -> list[Switch]:
        return [s for s in self.switches if s.name == name]


def _plant(main: HeatMainSpec, **relays) -> dict:
    acts = {10: valve(is_on=True, confirmed=True)}
    acts[GAS1] = relay(GAS1, "Gas 1")
    acts[GAS2] = relay(GAS2, "Gas 2")
    acts[BIOMASS] = relay(BIOMASS, "Biomass")
    for aid, changes in relays.items():
        acts[int(aid)] = replace(acts[int(aid)], **changes)
    return acts


def test_the_lead_starts_and_the_lag_stages_up_on_a_low_flow_then_down_on_a_high_one():
    main = main_spec()
    sim = SimulatedMain(main, _plant(main), load_kw=90.0)  # more than one source gives
    sim.run(60)
    gas1, gas2 = sim.of("Gas 1"), sim.of("Gas 2")
    assert gas1[0].at == START and gas1[0].state is True
    assert gas1[0].reason.startswith("Stage 1 of 1 (lead): Heat demand from Hall, flow 60.0 °C")
    # The flow stays below 70 °C: 10 min later the lag starts.
    assert gas2[0].at == START + timedelta(minutes=10)
    assert gas2[0].reason.startswith(
        "Stage 2 of 2 (lag 1): stage up: flow below 70 °C for 10 min (Heat demand from Hall)"
    )
    # Both run, the flow climbs past 80 °C, and 5 min later the last stage stops.
    sim.load_kw = 20.0
    sim.run(60)
    down = sim.of("Gas 2")[1]
    assert down.state is False
    assert down.reason.startswith("Standby (lag 1): stage down: flow above 80 °C for 5 min")
    assert sim.of("Gas 1")[1:] == []  # the lead runs on


def test_a_lost_lead_hands_over_to_the_next_at_once_with_an_alarm():
    main = main_spec()
    sim = SimulatedMain(main, _plant(main), load_kw=50.0, flow_c=74.0)
    sim.run(2)
    assert sim.acts[GAS1].is_on and not sim.acts[GAS2].is_on
    sim.refused.add(GAS1)  # its board refuses: the relay faults
    sim.tick()  # the fault shows in the runtime state
    sim.tick()
    takeover = sim.of("Gas 2")[0]
    assert takeover.state is True and takeover.reason.startswith("Stage 1 of 1 (lag 1): ")
    assert sim.of("Gas 1")[-1].reason == "Lost (relay fault): 'Gas 2' takes over"
    assert sim.alarms["heatmain-source:1:1"] == (
        "Heat main 'Heat main': heat source 'Gas 1' lost (relay fault): 'Gas 2' takes over"
    )


def test_a_source_commanded_on_and_not_read_back_is_lost_too():
    main = main_spec()
    acts = _plant(main, **{str(GAS1): {"is_on": True, "confirmed": False, "changed_at": 0.0}})
    result = evaluate(
        Snapshot(
            now=START,
            time_zone="Europe/London",
            zones=(zone(18.0, START, actuator_ids=(10,), optimum_start=False,
                        bookings=(BookingSpec("Day", START, START + timedelta(hours=1)),)),),
            actuators=acts,
            heat_mains=(replace(main, flow=Reading(START.timestamp() - 5, 60.0)),),
        )
    )  # fmt: skip
    assert result.decisions[GAS1].state is False
    assert result.decisions[GAS2].state is True
    assert "not confirmed on" in result.alarms["heatmain-source:1:1"]


def test_the_lead_rotates_on_a_run_hour_difference():
    main = main_spec(rotate_hours=2.0, rotate_weekly=False)
    sim = SimulatedMain(main, _plant(main), load_kw=60.0, flow_c=75.0)
    sim.memory = {"heatmain:1": {"hours": {"1": 0.0, "2": 3600.0}, "order": [1, 2],
                                 "rotated_at": START.timestamp(), "at": START.timestamp()}}  # fmt: skip
    sim.run(3 * 60 + 5)  # Gas 1 (0 h) leads until it has run 2 h more than Gas 2 (1 h): 3 h
    [gas2_on] = [s for s in sim.of("Gas 2") if s.state]
    assert gas2_on.reason.startswith("Stage 1 of 1 (lead): ")
    assert gas2_on.reason.endswith(
        "; lead rotated from 'Gas 1' (2 h more run than 'Gas 2' (limit 2 h))"
    )
    assert timedelta(hours=2, minutes=59) <= gas2_on.at - START <= timedelta(hours=3, minutes=1)
    assert sim.of("Gas 1")[-1].state is False


def test_the_lead_rotates_weekly():
    main = main_spec()
    sim = SimulatedMain(main, _plant(main), load_kw=60.0, flow_c=75.0)
    sim.memory = {"heatmain:1": {"order": [1, 2], "rotated_at": START.timestamp() - WEEK_S + 60,
                                 "at": START.timestamp()}}  # fmt: skip
    sim.run(3)
    lead_change = [s for s in sim.of("Gas 2") if s.state][0]
    assert lead_change.at == START + timedelta(minutes=1)
    assert lead_change.reason.endswith("; lead rotated from 'Gas 1' (weekly rotation)")


def test_a_biomass_lead_ramps_before_a_lag_is_started_and_holds_its_minimum_run():
    sources = (
        HeatSourceSpec(id=3, name="Biomass", actuator_id=BIOMASS, order=0, rotate=False,
                       ramp_s=45 * 60),
        HeatSourceSpec(id=1, name="Gas 1", actuator_id=GAS1, order=1, rotate=True, ramp_s=120),
    )  # fmt: skip
    main = main_spec(sources=sources)
    acts = _plant(main, **{str(BIOMASS): {"min_on_s": 4 * 3600}})
    sim = SimulatedMain(main, acts, load_kw=100.0, flow_c=50.0)
    sim.power_kw[BIOMASS] = 10.0  # still ramping: little heat yet
    sim.run(20)
    assert [s.state for s in sim.of("Biomass")] == [True]
    assert sim.of("Gas 1") == []  # flow low for 20 min, but the biomass ramps for 45
    assert sim.memory["heatmain:1"]["stages"] == 1
    sim.run(26)
    [gas] = sim.of("Gas 1")
    assert gas.at == START + timedelta(minutes=45)
    assert gas.reason.startswith("Stage 2 of 2 (lag 1): stage up: flow below 70 °C")
    # Demand ends after an hour: the gas stops, the biomass runs out its 4 h minimum.
    sim.acts[10] = replace(sim.acts[10], is_on=False)
    sim.run(5)
    assert sim.of("Gas 1")[-1].state is False
    assert sim.acts[BIOMASS].is_on is True
    result = evaluate(
        Snapshot(now=sim.now, time_zone="Europe/London", actuators=sim.acts, memory=sim.memory,
                 heat_mains=(replace(main, flow=Reading(sim.now.timestamp(), 70.0)),))
    )  # fmt: skip
    assert result.decisions[BIOMASS].state is True
    assert result.decisions[BIOMASS].reason.startswith("Minimum run")
    assert result.decisions[BIOMASS].strategy != HEAT_MAIN


def test_a_lost_flow_sensor_holds_the_stages_and_alarms():
    main = main_spec()
    sim = SimulatedMain(main, _plant(main), load_kw=90.0)
    sim.run(11)
    assert sim.memory["heatmain:1"]["stages"] == 2
    result = evaluate(
        Snapshot(now=sim.now, time_zone="Europe/London", actuators=sim.acts, memory=sim.memory,
                 zones=(zone(18.0, sim.now, actuator_ids=(10,), optimum_start=False,
                             bookings=(BookingSpec("Day", START, START + timedelta(days=1)),)),),
                 heat_mains=(replace(main, flow=Reading(sim.now.timestamp() - 3600, 50.0)),))
    )  # fmt: skip
    assert result.decisions[GAS1].state and result.decisions[GAS2].state
    assert result.alarms["heatmain-flow:1"].startswith("Heat main 'Heat main': Temperature sensor")
