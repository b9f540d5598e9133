"""A heat main's thermal store (control/engine/thermal_store.py) on a simulated plant: the
sources charge it by its top and bottom temperatures, it serves the zones while hot enough, and
charges again when its top falls; 30 s a tick on the test's clock. The tests assert which relay
switched when and why."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from control import mapper
from control.engine.evaluator import evaluate
from control.engine.specs import (
    THERMAL_STORE,
    BookingSpec,
    HeatMainSpec,
    HeatSourceSpec,
    Reading,
    Snapshot,
    ThermalStoreSpec,
)

from .helpers import actuator_spec, valve, zone

TICK_S = 30
START = datetime(2026, 1, 14, 6, 0, tzinfo=UTC)
GAS, CHARGE, DISCHARGE = 31, 41, 42


def _store(**kw) -> ThermalStoreSpec:
    base = dict(
        id=1, name="Buffer", heat_main_id=1, top_name="store-top", bottom_name="store-bottom",
        charge_start_c=55.0, charge_stop_c=70.0, discharge_min_c=60.0, charge_pump_id=CHARGE,
        discharge_pump_id=DISCHARGE, sensor_stale_after_s=900,
    )  # fmt: skip
    base.update(kw)
    return ThermalStoreSpec(**base)


MAIN = HeatMainSpec(
    id=1, name="Heat main", zone_ids=(1,), flow_name="main-flow", flow_setpoint_c=75.0,
    sources=(HeatSourceSpec(id=1, name="Gas 1", actuator_id=GAS, order=1, rotate=True,
                            ramp_s=0),),
    stage_up_k=5.0, stage_up_s=600, stage_down_k=5.0, stage_down_s=300, rotate_weekly=False,
    rotate_hours=0.0, sensor_stale_after_s=900,
)  # fmt: skip


def _relay(aid: int, name: str, kind: str):
    return actuator_spec(id=aid, name=name, kind=kind, min_on_s=0, min_off_s=0, is_on=False,
                         confirmed=True)  # fmt: skip


def run(minutes: int, store_c: float, booking_from: datetime, store: ThermalStoreSpec):
    """The store as one mass (1.5 m³) with 3 K between its top and bottom: the source heats it
    while the charge pump runs (60 kW), the zone's load (30 kW) draws on it while the discharge
    pump runs."""
    acts = {10: valve(is_on=True), GAS: _relay(GAS, "Gas 1", "boiler"),
            CHARGE: _relay(CHARGE, "Charge pump", "pump"),
            DISCHARGE: _relay(DISCHARGE, "Discharge pump", "pump")}  # fmt: skip
    booking = BookingSpec("Day", booking_from, booking_from + timedelta(hours=10))
    capacity = 1500 * 4.186  # kJ/K
    memory: dict = {}
    switches, alarms = [], {}
    now = START
    for _ in range(minutes * 60 // TICK_S):
        t = now.timestamp() - 5
        snap = Snapshot(
            now=now,
            time_zone=mapper.site_settings().time_zone,
            zones=(zone(18.0, now, actuator_ids=(10,), optimum_start=False, bookings=(booking,)),),
            actuators=acts,
            memory=memory,
            heat_mains=(replace(MAIN, flow=Reading(t, 65.0)),),
            stores=(replace(store, top=Reading(t, round(store_c + 1.5, 1)),
                            bottom=Reading(t, round(store_c - 1.5, 1))),),
        )  # fmt: skip
        result = evaluate(snap)
        memory, alarms = result.memory, result.alarms
        for aid in (GAS, CHARGE, DISCHARGE):
            d = result.decisions[aid]
            if d.state != acts[aid].is_on:
                switches.append((now, acts[aid].name, d.state, d.strategy, d.reason))
                acts[aid] = replace(acts[aid], is_on=d.state, changed_at=now.timestamp())
        heat = 60.0 if acts[GAS].is_on and acts[CHARGE].is_on else 0.0
        load = 30.0 if acts[DISCHARGE].is_on else 0.0
        store_c += TICK_S * (heat - load) / capacity
        now += timedelta(seconds=TICK_S)
    return switches, alarms


def test_the_store_charges_then_serves_the_zones_until_its_top_is_too_cool():
    serve_from = START + timedelta(hours=1)
    switches, _ = run(150, 52.0, serve_from, _store())
    seq = [(name, state) for _, name, state, _, _ in switches]
    assert seq == [
        ("Gas 1", True), ("Charge pump", True),  # top 53.5 °C: below 55 °C
        ("Gas 1", False), ("Charge pump", False),  # bottom at 70 °C: charged
        ("Discharge pump", True),  # the zone calls from 07:00: the store serves it
        ("Gas 1", True), ("Discharge pump", False),  # top below 60 °C: the source serves
    ]  # fmt: skip
    on, charge, charged, _, serving, source, _ = switches
    assert on[0] == START and on[3] == "heat_main"
    assert on[4].startswith(
        "Stage 1 of 1 (lead): Store 'Buffer' charging: top 53.5 °C (starts below 55 °C), until "
        "the bottom reaches 70 °C (now 50.5 °C)"
    )
    assert charge[3] == THERMAL_STORE and charge[4].startswith("Store 'Buffer' charging")
    # 1.5 m³ × 20 K at 60 kW: about 35 min.
    assert START + timedelta(minutes=33) <= charged[0] <= START + timedelta(minutes=37)
    assert charged[4].startswith("Standby (lead): No zone calls for heat")
    assert serving[0] == serve_from and serving[3] == THERMAL_STORE
    assert serving[4].startswith("Store 'Buffer' serves the main: top 7")
    # 30 kW draws the top from 73 to 60 °C in about 45 min; then the gas serves the zone.
    assert serve_from + timedelta(minutes=43) <= source[0] <= serve_from + timedelta(minutes=48)
    assert source[4].startswith("Stage 1 of 1 (lead): Heat demand from Hall, flow 65.0 °C")


def test_a_cool_store_charges_while_the_zones_call():
    switches, _ = run(3, 52.0, START, _store())
    assert [(n, s) for _, n, s, _, _ in switches] == [("Gas 1", True), ("Charge pump", True)]
    assert switches[0][4].startswith(
        "Stage 1 of 1 (lead): Heat demand from Hall; Store 'Buffer' charging: top 53.5 °C"
    )


def test_a_lost_store_sensor_alarms_and_the_sources_serve_the_main_directly():
    switches, alarms = run(5, 52.0, START, _store(bottom_name=""))  # no bottom sensor
    seq = [(name, state) for _, name, state, _, _ in switches]
    assert seq == [("Gas 1", True)]  # the zone's demand, not a charge; no pump
    assert switches[0][4].startswith("Stage 1 of 1 (lead): Heat demand from Hall")
    assert alarms["store-sensor:1"].startswith("Thermal store 'Buffer': No temperature sensor")


def test_the_charge_pump_waits_while_the_lead_rests_and_starts_with_it():
    """The store calls for a charge while its only source rests after its minimum off time
    (stopped 5 of its 30 min ago): the charge pump would only stir the main's cooler water
    through the store, so it waits, saying why, and starts with the source (#27 replay)."""
    rested = START.timestamp() - 300
    acts = {
        10: valve(is_on=True),
        GAS: replace(_relay(GAS, "Gas 1", "boiler"), min_off_s=1800, changed_at=rested,
                     last_off_at=rested),
        CHARGE: _relay(CHARGE, "Charge pump", "pump"),
        DISCHARGE: _relay(DISCHARGE, "Discharge pump", "pump"),
    }  # fmt: skip
    memory: dict = {}
    seen = []
    now = START
    for _ in range(2 * 30 * 60 // TICK_S):
        t = now.timestamp() - 5
        result = evaluate(
            Snapshot(now=now, time_zone=mapper.site_settings().time_zone,
                     zones=(zone(22.0, now, actuator_ids=(10,), optimum_start=False),),
                     actuators=acts, memory=memory,
                     heat_mains=(replace(MAIN, flow=Reading(t, 45.0)),),
                     stores=(replace(_store(), top=Reading(t, 50.0), bottom=Reading(t, 47.0)),))
        )  # fmt: skip
        memory = result.memory
        gas, charge = result.decisions[GAS], result.decisions[CHARGE]
        seen.append((now, gas.state, charge.state, charge.reason))
        for aid, d in ((GAS, gas), (CHARGE, charge)):
            if d.state != acts[aid].is_on:
                acts[aid] = replace(acts[aid], is_on=d.state, changed_at=now.timestamp())
        now += timedelta(seconds=TICK_S)
    assert all(g == c for _, g, c, _ in seen)  # never the pump without its source
    waiting = [s for s in seen if not s[2]]
    assert waiting and waiting[0][3].endswith("; pump waits: no source running")
    started = next(s for s in seen if s[2])
    assert started[0] == START + timedelta(minutes=25)  # the source's rest ends
    assert started[3].endswith("; heat from 'Gas 1' starting")
