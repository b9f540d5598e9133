"""Solar thermal feeding a heat main's thermal store (control/engine/thermal_store.py) on a
simulated plant: while the solar pump reads back running the sources do not charge the store;
when the sun goes, they charge it; the zones' own demand is still served. 30 s a tick on the
test's clock; the tests assert which relay switched when and why."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from control import mapper
from control.engine.evaluator import evaluate
from control.engine.specs import HEAT_MAIN, THERMAL_STORE, BookingSpec, Reading, Snapshot

from .helpers import solar_spec, valve, zone
from .test_thermal_store import MAIN, _store
from .test_thermal_store import _relay as _base_relay

TICK_S = 30
START = datetime(2026, 4, 14, 10, 0, tzinfo=UTC)
GAS, CHARGE, DISCHARGE, SOLAR_PUMP = 31, 41, 42, 51
RELAYS = (GAS, CHARGE, DISCHARGE, SOLAR_PUMP)
CAPACITY = 1500 * 4.186  # kJ/K: a 1.5 m³ store as one mass

STORE = _store(solar_ids=(7,))


def _relay(aid: int, name: str, kind: str, **kw):
    return replace(_base_relay(aid, name, kind), **kw)


def run(minutes: int, store_c: float, sun_until: datetime, *, calling: bool = False, **pump):
    """The sun holds the collector at 80 °C until `sun_until`, then 20 °C; the solar pump puts
    20 kW into the store while it runs, the gas 60 kW while it and the charge pump run. The
    solar pump starts the test running (the sun is up) unless `pump` says otherwise. Returns
    the switches (time, relay, state, strategy, reason) and the first tick's decisions."""
    acts = {
        10: valve(is_on=True),
        GAS: _relay(GAS, "Gas 1", "boiler"),
        CHARGE: _relay(CHARGE, "Charge pump", "pump"),
        DISCHARGE: _relay(DISCHARGE, "Discharge pump", "pump"),
        SOLAR_PUMP: _relay(SOLAR_PUMP, "Solar pump", "pump", **{"is_on": True, **pump}),
    }
    day = START if calling else START + timedelta(days=1)
    booking = BookingSpec("Day", day, day + timedelta(hours=10))
    memory: dict = {}
    switches, first = [], None
    now = START
    for _ in range(minutes * 60 // TICK_S):
        t = now.timestamp() - 5
        collector = 80.0 if now < sun_until else 20.0
        bottom = round(store_c - 1.5, 1)
        snap = Snapshot(
            now=now,
            time_zone=mapper.site_settings().time_zone,
            zones=(zone(18.0, now, actuator_ids=(10,), optimum_start=False, bookings=(booking,)),),
            actuators=acts,
            memory=memory,
            heat_mains=(replace(MAIN, flow=Reading(t, 65.0)),),
            stores=(replace(STORE, top=Reading(t, round(store_c + 1.5, 1)),
                            bottom=Reading(t, bottom)),),
            solars=(solar_spec(id=7, name="Roof", pump_id=SOLAR_PUMP,
                               collector=Reading(t, collector), tank=Reading(t, bottom)),),
        )  # fmt: skip
        result = evaluate(snap)
        memory = result.memory
        first = first or result.decisions
        for aid in RELAYS:
            d = result.decisions[aid]
            if d.state != acts[aid].is_on:
                switches.append((now, acts[aid].name, d.state, d.strategy, d.reason))
                acts[aid] = replace(acts[aid], is_on=d.state, changed_at=now.timestamp())
        pumped = acts[SOLAR_PUMP].is_on and acts[SOLAR_PUMP].confirmed
        heat = (60.0 if acts[GAS].is_on and acts[CHARGE].is_on else 0.0) + (20.0 if pumped else 0)
        store_c += TICK_S * heat / CAPACITY
        now += timedelta(seconds=TICK_S)
    return switches, first


def test_the_sources_leave_the_charge_to_the_sun_and_charge_when_it_goes():
    # Top 46.5 °C: below 55 °C, a charge is due; the sun is charging the store.
    sun_until = START + timedelta(minutes=30)
    switches, first = run(45, 45.0, sun_until)
    assert not first[GAS].state and not first[CHARGE].state
    assert first[CHARGE].strategy == THERMAL_STORE
    assert first[CHARGE].reason == (
        "Store 'Buffer': solar circuit 'Roof' is charging it (collector 80.0 °C), top 46.5 °C: "
        "the sources do not charge it"
    )
    assert first[GAS].reason.startswith(
        "Standby (lead): No zone calls for heat; Store 'Buffer': solar circuit 'Roof' is "
        "charging it (collector 80.0 °C), top 46.5 °C: the sources do not charge it"
    )
    # Nothing switches while the sun shines; when it goes the solar pump stops, and once it
    # reads back stopped the gas and the charge pump charge the store (still below 55 °C).
    seq = [(at - START, name, state) for at, name, state, _, _ in switches]
    assert seq == [
        (timedelta(minutes=30), "Solar pump", False),
        (timedelta(minutes=30, seconds=30), "Gas 1", True),
        (timedelta(minutes=30, seconds=30), "Charge pump", True),
    ]
    gas = switches[1]
    assert gas[3] == HEAT_MAIN
    # 30 min of 20 kW from the sun: 45.0 → 50.7 °C (top 52.2 °C).
    assert gas[4].startswith(
        "Stage 1 of 1 (lead): Store 'Buffer' charging: top 52.2 °C (starts below 55 °C)"
    )


def test_a_store_the_sun_lifted_past_the_start_is_not_charged_by_the_sources():
    # Top 52.5 °C at the start; an hour of sun adds 11.5 K: no charge when it goes.
    switches, _ = run(75, 51.0, START + timedelta(hours=1))
    assert [(n, s) for _, n, s, _, _ in switches] == [("Solar pump", False)]


def test_a_charge_begun_by_the_sources_ends_when_the_sun_takes_over():
    """The solar pump starts (ΔT on) on the first tick and reads back running on the next:
    the charge the gas had begun ends then; the boiler's minimum run (0 here) still applies."""
    switches, first = run(3, 45.0, START + timedelta(hours=1), is_on=False)
    assert first[GAS].state and first[CHARGE].state  # the pump had not been seen running
    seq = [(at - START, name, state) for at, name, state, _, _ in switches]
    assert seq == [
        (timedelta(0), "Gas 1", True),
        (timedelta(0), "Charge pump", True),
        (timedelta(0), "Solar pump", True),
        (timedelta(seconds=30), "Gas 1", False),
        (timedelta(seconds=30), "Charge pump", False),
    ]
    assert switches[4][4].startswith("Store 'Buffer': solar circuit 'Roof' is charging it")


def test_a_solar_pump_that_never_read_back_running_does_not_stop_the_charge():
    """Commanded on, not confirmed (a refused coil, a dead board): the sun may be heating
    nothing, so the sources charge."""
    switches, first = run(3, 45.0, START + timedelta(hours=1), confirmed=False)
    assert first[GAS].state and first[CHARGE].state
    assert first[GAS].reason.startswith("Stage 1 of 1 (lead): Store 'Buffer' charging")
    assert [(n, s) for _, n, s, _, _ in switches] == [("Gas 1", True), ("Charge pump", True)]


def test_the_zones_are_served_by_the_sources_while_the_sun_charges_a_cool_store():
    """No room waits for the sun: the store is too cool to serve (top below 60 °C), so the
    gas serves the zone directly, and the charge pump stays off."""
    switches, first = run(3, 45.0, START + timedelta(hours=1), calling=True)
    assert first[GAS].state and not first[CHARGE].state and not first[DISCHARGE].state
    assert first[GAS].reason.startswith(
        "Stage 1 of 1 (lead): Heat demand from Hall; Store 'Buffer': solar circuit 'Roof' is "
        "charging it"
    )
    assert [(n, s) for _, n, s, _, _ in switches] == [("Gas 1", True)]


@pytest.mark.django_db
def test_a_solar_circuit_feeds_the_store_whose_bottom_sensor_is_its_tank():
    from control.models import HeatMain, SolarCircuit, ThermalStore
    from sensors.models import Actuator

    from . import factories as f

    top, bottom, other = (f.temperature_sensor(n) for n in ("top", "bottom", "dhw"))
    collector = f.temperature_sensor("collector")
    store = ThermalStore.objects.create(
        heat_main=HeatMain.objects.create(name="Heat main"), name="Buffer", top_sensor=top,
        bottom_sensor=bottom,
    )  # fmt: skip
    feeding, elsewhere = (
        SolarCircuit.objects.create(
            name=name,
            collector_sensor=collector,
            tank_sensor=tank,
            pump=Actuator.objects.create(name=f"{name} pump", kind="pump", coil=coil),
        )  # fmt: skip
        for name, tank, coil in (("Roof", bottom, 1), ("DHW roof", other, 2))
    )
    spec = mapper.store_spec(store, solars=SolarCircuit.objects.all())
    assert spec.solar_ids == (feeding.pk,)
    assert elsewhere.pk not in spec.solar_ids
