"""The demo site's heat main can be seen working: a biomass lead that ramps for 30 min before a
lag is judged, and a second gas boiler staged up on the flow temperature. The demo's heat main
(mapped from the database as the live tick maps it) drives the demo's boiler-house water
(demo/plant.py) through the pure evaluator, 30 s a step on the test's clock."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from control import mapper
from control.engine.evaluator import evaluate
from control.engine.specs import BookingSpec, Reading, Snapshot
from control.models import HeatMain
from demo import layout
from demo.plant import Coils, DemoPlant
from demo.site import ensure_demo_site

TICK_S = 30
MORNING = datetime(2026, 1, 14, 7, 0, tzinfo=UTC)


@pytest.fixture
def demo(tmp_path, settings, redis_client):
    settings.BMS_DATA_DIR = tmp_path
    return ensure_demo_site(tmp_path / "demo" / "keys.json", now=MORNING)


@pytest.mark.django_db
def test_the_demo_heat_main_stages_its_biomass_lead_then_the_gas_lag(demo):
    main = HeatMain.objects.prefetch_related("sources").get(name="Site heat main")
    assert [s.name for s in main.sources.all()] == ["Biomass boiler", "Gas boiler 2"]
    site = mapper.site_settings()
    zones = list(demo.zones.values())
    spec = mapper.heat_main_spec(main, zone_ids=[z.pk for z in zones])
    booking = BookingSpec("Open day", MORNING, MORNING + timedelta(hours=8))
    valves = {z.pk: z.actuators.get() for z in zones}
    acts = {
        v.pk: replace(mapper.actuator_spec(v), is_on=True, confirmed=True) for v in valves.values()
    }
    for handle in ("biomass", "gas_boiler_2"):
        a = demo.actuators[handle]
        acts[a.pk] = replace(mapper.actuator_spec(a), is_on=False, confirmed=True)
    biomass, gas2 = demo.actuators["biomass"].pk, demo.actuators["gas_boiler_2"].pk
    plant = DemoPlant(MORNING, seed=4)
    plant.circuit.flow_c = 40.0
    memory: dict = {}
    switches = []
    now = MORNING
    while now < MORNING + timedelta(minutes=90):
        zone_specs = tuple(
            mapper.zone_spec(
                z, site, bookings=(booking,), actuator_ids=[valves[z.pk].pk],
                reading=Reading(now.timestamp() - 5, round(plant.rooms[z.slug].temperature_c, 1)),
            )
            for z in zones
        )  # fmt: skip
        flow = Reading(now.timestamp() - 5, round(plant.circuit.flow_c, 1))
        result = evaluate(
            Snapshot(now=now, time_zone=site.time_zone, zones=zone_specs, actuators=acts,
                     memory=memory, heat_mains=(replace(spec, flow=flow),))
        )  # fmt: skip
        memory = result.memory
        for aid in (biomass, gas2):
            d = result.decisions[aid]
            if d.state != acts[aid].is_on:
                switches.append((now, acts[aid].name, d.state, d.reason))
                acts[aid] = replace(acts[aid], is_on=d.state, changed_at=now.timestamp())
        now += timedelta(seconds=TICK_S)
        coils = Coils(heating_pump=True, valves={r.slug: True for r in layout.ROOMS},
                      biomass=bool(acts[biomass].is_on), gas_boiler_2=bool(acts[gas2].is_on))  # fmt: skip
        plant.step(now, TICK_S, 1.0, coils)

    (t1, name1, on1, why1), (t2, name2, on2, why2) = switches[:2]
    assert (t1, name1, on1) == (MORNING, "Biomass boiler", True)
    assert why1.startswith("Stage 1 of 1 (lead): Heat demand from ")
    # The flow stays low, but the biomass ramps for 30 min before a lag is judged.
    assert (name2, on2) == ("Gas boiler 2", True)
    assert t2 >= MORNING + timedelta(minutes=30)
    assert why2.startswith("Stage 2 of 2 (lag 1): stage up: flow below 65 °C for ")
    assert memory[f"heatmain:{main.pk}"]["stages"] == 2


@pytest.mark.django_db
def test_the_demo_store_charges_from_the_heat_main_and_serves_the_rooms(demo):
    """The demo's store, mapped from the database, on the demo's physics: cold at first, it
    charges from the biomass lead (the charge pump circulating the boiler-house water through
    it), then, once hot, serves the rooms while the sources stand by."""
    from control.models import ThermalStore

    main = HeatMain.objects.prefetch_related("sources").get(name="Site heat main")
    store = ThermalStore.objects.select_related("top_sensor", "bottom_sensor").get(heat_main=main)
    site = mapper.site_settings()
    zones = list(demo.zones.values())
    spec = mapper.heat_main_spec(main, zone_ids=[z.pk for z in zones])
    handles = ("biomass", "gas_boiler_2", "store_charge", "store_discharge")
    acts = {
        demo.actuators[h].pk: replace(mapper.actuator_spec(demo.actuators[h]), is_on=False,
                                      confirmed=True, min_on_s=0, min_off_s=0)
        for h in handles
    }  # fmt: skip
    ids = {h: demo.actuators[h].pk for h in handles}
    valves = {z.pk: z.actuators.get() for z in zones}
    for v in valves.values():
        acts[v.pk] = replace(mapper.actuator_spec(v), is_on=True, confirmed=True)
    plant = DemoPlant(MORNING, seed=5)
    plant.store.temperature_c = 45.0
    plant.circuit.flow_c = 60.0
    rooms_call_from = MORNING + timedelta(hours=3)
    booking = BookingSpec("Open day", rooms_call_from, rooms_call_from + timedelta(hours=8))
    memory: dict = {}
    switches = []
    now = MORNING
    while now < MORNING + timedelta(hours=4):
        zone_specs = tuple(
            mapper.zone_spec(
                z, site, bookings=(booking,), actuator_ids=[valves[z.pk].pk],
                reading=Reading(now.timestamp() - 5, 18.0),
            )
            for z in zones
        )  # fmt: skip
        t = now.timestamp() - 5
        result = evaluate(
            Snapshot(
                now=now, time_zone=site.time_zone, zones=zone_specs, actuators=acts,
                memory=memory,
                heat_mains=(replace(spec, flow=Reading(t, round(plant.circuit.flow_c, 1))),),
                stores=(replace(mapper.store_spec(store),
                                top=Reading(t, round(plant.store.top_c, 1)),
                                bottom=Reading(t, round(plant.store.bottom_c, 1))),),
            )
        )  # fmt: skip
        memory = result.memory
        for h, aid in ids.items():
            d = result.decisions[aid]
            if d.state != acts[aid].is_on:
                switches.append((now, h, d.state, d.reason))
                acts[aid] = replace(acts[aid], is_on=d.state, changed_at=now.timestamp())
        now += timedelta(seconds=TICK_S)
        on = {h: bool(acts[aid].is_on) for h, aid in ids.items()}
        plant.step(now, TICK_S, 1.0, Coils(valves={r.slug: False for r in layout.ROOMS}, **on))

    first = [(h, s) for _, h, s, _ in switches[:2]]
    assert sorted(first) == [("biomass", True), ("store_charge", True)]
    assert switches[0][3].startswith("Stage 1 of 1 (lead): Store 'Buffer store' charging: top 47.0")
    charged = next(s for s in switches if s[1] == "store_charge" and not s[2])
    # Once charged it serves the rooms calling (the seminar room pre-heats for its office hours).
    served = next(s for s in switches if s[1] == "store_discharge" and s[2])
    assert charged[0] <= served[0] <= rooms_call_from
    assert served[3].startswith("Store 'Buffer store' serves the main: top ")
    biomass_off = next(s for s in switches if s[1] == "biomass" and not s[2])
    assert biomass_off[0] <= served[0]  # the sources stand by while the store serves
