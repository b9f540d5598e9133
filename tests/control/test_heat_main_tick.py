"""A heat main through the live tick: a real pymodbus relay board, real Redis, the test
database. The lead's coil is refused by its board: the next source takes over on its own coil,
an alarm says so, and each switch is audited with its reason."""

from __future__ import annotations

import pytest

from alarms.models import Alarm
from control.drivers.simulated_board import RelayBoard
from control.engine.specs import HEAT_MAIN
from control.models import ActuatorCommand, Booking, HeatMain, HeatSource
from control.runner import run_tick
from feeds.models import Feed
from feeds.store import service as feed_service
from sensors.models import Sensor

from . import factories as f

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def feeds_of_this_test(settings, tmp_path):
    settings.BMS_DATA_DIR = tmp_path


@pytest.fixture
def board():
    with RelayBoard(coils=32) as b:
        yield b


def test_a_refused_lead_hands_over_to_the_next_source_with_an_alarm(redis_client, board, viewer):
    from django.utils import timezone

    valve = f.relay("Hall valve", board, coil=3)
    zone = f.zone("Hall", valve, temp=15.0, optimum_start=False)
    now = timezone.now()
    Booking.objects.create(
        zone=zone, title="Open day", start=now, end=now + timezone.timedelta(hours=4)
    )
    flow = Sensor.objects.create(
        node=zone.temperature_sensor.node, key="main-flow", kind="temperature",
        feed=Feed.objects.create(name="Main flow", tag="test", unit="°C", interval=10),
    )  # fmt: skip
    feed_service.log_points([(flow.feed_id, int(now.timestamp()), 60.0)])
    main = HeatMain.objects.create(name="Heat main", flow_sensor=flow)
    main.zones.set([zone])
    gas1 = f.relay("Gas 1", board, coil=40, kind="boiler")  # past the board's 32 coils: refused
    gas2 = f.relay("Gas 2", board, coil=1, kind="boiler")
    HeatSource.objects.create(heat_main=main, name="Gas 1", actuator=gas1, order=1)
    HeatSource.objects.create(heat_main=main, name="Gas 2", actuator=gas2, order=2)

    run_tick()  # the valve opens; no source until it has read back open; the lead's coil,
    # written OFF, is refused by its board
    assert board.coil(3) is True and board.coil(1) is False
    [refused] = ActuatorCommand.objects.filter(actuator=gas1)
    assert refused.reason.startswith("Standby (lead): No zone calls for heat, flow 60.0 °C")
    assert "illegal data address" in refused.error
    run_tick()  # the valve read back open: heat is called for, and the lead is lost
    assert board.coil(1) is True
    [takeover] = ActuatorCommand.objects.filter(actuator=gas2, state=True)
    assert takeover.strategy == HEAT_MAIN
    assert takeover.reason.startswith(
        "Stage 1 of 1 (lag 1): Heat demand from Hall, flow 60.0 °C (set 75 °C)"
    )
    assert takeover.confirmed_at is not None
    alarm = Alarm.objects.get(key=f"heatmain-source:{main.pk}:{main.sources.get(name='Gas 1').pk}")
    assert alarm.cleared_at is None
    assert alarm.message == (
        "Heat main 'Heat main': heat source 'Gas 1' lost (relay fault): 'Gas 2' takes over"
    )

    # The status page shows the main, its sequence and why each source is where it is.
    from django.test import Client

    c = Client()
    c.force_login(viewer)
    page = c.get("/staff/control/").content.decode()
    table = page[page.index(f'id="heat-main-{main.pk}"') :]
    table = table[: table.index("</table>")]
    assert "<strong>Heat main</strong>" in table and "flow 60.0 °C" in table
    assert "1 stage called, 1 running" in table
    assert "Lost (relay fault): &#x27;Gas 2&#x27; takes over" in table
    assert "Stage 1 of 1 (lag 1): Heat demand from Hall" in table

    # Its schematic: each source with its state and reason, the flow, the zone it serves.
    schematic = c.get(f"/staff/control/heat-main/{main.pk}/")
    assert schematic.status_code == 200
    drawn = {e["key"]: e for e in schematic.context["diagram"]["elements"]}
    assert (
        drawn[f"actuator-{gas2.pk}"]["css"] == "on"
        and drawn[f"actuator-{gas2.pk}"]["name"] == "Gas 2"
    )
    assert drawn[f"actuator-{gas1.pk}"]["why"] == "Lost (relay fault): 'Gas 2' takes over"
    assert drawn["flow"]["value"] == 60.0 and drawn[f"zone-{zone.pk}"]["name"] == "Hall"
    assert Client().get(f"/staff/control/heat-main/{main.pk}/").status_code == 302  # to log in


def test_a_store_charges_from_the_main_then_serves_its_zone(redis_client, board, viewer):
    from django.test import Client
    from django.utils import timezone

    from control.models import ThermalStore

    valve = f.relay("Hall valve", board, coil=3)
    zone = f.zone("Hall", valve, temp=22.0, optimum_start=False)  # warm: no demand yet
    node = zone.temperature_sensor.node

    def sensor(key: str) -> Sensor:
        feed = Feed.objects.create(name=key, tag="test", unit="°C", interval=10)
        return Sensor.objects.create(node=node, key=key, kind="temperature", feed=feed)

    flow, top, bottom = sensor("main-flow"), sensor("store-top"), sensor("store-bottom")

    main = HeatMain.objects.create(name="Heat main", flow_sensor=flow)
    main.zones.set([zone])
    gas = f.relay("Gas 1", board, coil=1, kind="boiler")
    HeatSource.objects.create(heat_main=main, name="Gas 1", actuator=gas, order=1)
    charge = f.relay("Charge pump", board, coil=5, kind="pump")
    discharge = f.relay("Discharge pump", board, coil=6, kind="pump")
    ThermalStore.objects.create(
        heat_main=main, name="Buffer", top_sensor=top, bottom_sensor=bottom,
        charge_pump=charge, discharge_pump=discharge,
    )  # fmt: skip

    feed_service.log_points(
        [(s.feed_id, int(timezone.now().timestamp()), v) for s, v in
         ((flow, 65.0), (top, 50.0), (bottom, 45.0))]
    )  # fmt: skip
    run_tick()  # top 50 °C, below 55 °C: charge from the main's source
    assert board.coils_state(1, 1) == [True] and board.coils_state(5, 2) == [True, False]
    [fired] = ActuatorCommand.objects.filter(actuator=gas, state=True)
    assert fired.reason.startswith(
        "Stage 1 of 1 (lead): Store 'Buffer' charging: top 50.0 °C (starts below 55 °C), until "
        "the bottom reaches 70 °C (now 45.0 °C)"
    )
    c = Client()
    c.force_login(viewer)
    page = c.get("/staff/control/").content.decode()
    assert "<strong>Buffer</strong> (store)" in page and "charging</span>" in page

    # Charged (the bottom at 70 °C), and the room now calls: the store serves it.
    f.set_temperature(zone, 15.0)
    Booking.objects.create(
        zone=zone, title="Open day", start=timezone.now(),
        end=timezone.now() + timezone.timedelta(hours=4),
    )  # fmt: skip
    feed_service.log_points(
        [(s.feed_id, int(timezone.now().timestamp()), v) for s, v in
         ((flow, 65.0), (top, 74.0), (bottom, 70.0))]
    )  # fmt: skip
    run_tick()  # the valve opens; the charge ends
    run_tick()  # the valve read back open: the zone calls, the store serves it
    assert board.coils_state(1, 1) == [False] and board.coils_state(5, 2) == [False, True]
    [serves] = ActuatorCommand.objects.filter(actuator=discharge, state=True)
    assert serves.reason == "Store 'Buffer' serves the main: top 74.0 °C ≥ 60 °C"
    # The source went off when the charge ended; why it stays off is its status now.
    from control.status import actuator_status

    [standby] = actuator_status([gas])
    assert standby["why"].startswith(
        "Standby (lead): Store 'Buffer' serves the main: top 74.0 °C ≥ 60 °C; heat demand from Hall"
    )
    # The store on the main's schematic, at its top temperature.
    drawn = {
        e["key"]: e
        for e in c.get(f"/staff/control/heat-main/{main.pk}/").context["diagram"]["elements"]
    }
    assert drawn["store"]["kind"] == "tank" and drawn["store"]["value"] == 74.0
    assert drawn[f"actuator-{gas.pk}"]["css"] == "off"


def test_the_sun_charging_the_store_holds_the_sources_charge_on_a_real_board(redis_client, board):
    """A solar circuit whose tank sensor is the store's bottom: once its pump reads back running
    on the board, the charge the gas began ends, audited with the reason; the configuration
    cached for a database outage carries the link."""
    from django.utils import timezone

    from control.engine.specs import THERMAL_STORE
    from control.models import SolarCircuit, ThermalStore

    valve = f.relay("Hall valve", board, coil=3)
    zone = f.zone("Hall", valve, temp=22.0, optimum_start=False)  # warm: no demand
    flow, top, bottom, collector = (
        f.temperature_sensor(n) for n in ("main-flow", "store-top", "store-bottom", "collector")
    )
    main = HeatMain.objects.create(name="Heat main", flow_sensor=flow)
    main.zones.set([zone])
    gas = f.relay("Gas 1", board, coil=1, kind="boiler")
    HeatSource.objects.create(heat_main=main, name="Gas 1", actuator=gas, order=1)
    charge = f.relay("Charge pump", board, coil=5, kind="pump")
    ThermalStore.objects.create(
        heat_main=main, name="Buffer", top_sensor=top, bottom_sensor=bottom, charge_pump=charge
    )
    solar_pump = f.relay("Solar pump", board, coil=7, kind="pump")
    roof = SolarCircuit.objects.create(
        name="Roof", collector_sensor=collector, tank_sensor=bottom, pump=solar_pump
    )

    def readings() -> None:
        feed_service.log_points(
            [(s.feed_id, int(timezone.now().timestamp()), v) for s, v in
             ((flow, 65.0), (top, 50.0), (bottom, 45.0), (collector, 80.0))]
        )  # fmt: skip

    readings()
    run_tick()  # the solar pump starts; it has not read back yet, so the gas charges
    assert board.coils_state(1, 1) == [True] and board.coil(5) and board.coil(7)
    readings()
    run_tick()  # the solar pump read back running: the sources leave the charge to the sun
    assert board.coil(1) is False and board.coil(5) is False and board.coil(7) is True
    [stopped] = ActuatorCommand.objects.filter(actuator=gas, state=False)
    assert stopped.strategy == HEAT_MAIN
    assert stopped.reason.startswith(
        "Standby (lead): No zone calls for heat; Store 'Buffer': solar circuit 'Roof' is "
        "charging it (collector 80.0 °C), top 50.0 °C: the sources do not charge it"
    )
    [held] = ActuatorCommand.objects.filter(actuator=charge, state=False)
    assert held.strategy == THERMAL_STORE
    assert held.reason.startswith("Store 'Buffer': solar circuit 'Roof' is charging it")
    from control import config_cache

    cached = config_cache.rebuild(config_cache.load(), timezone.now()).snapshot
    assert [t.solar_ids for t in cached.stores] == [(roof.pk,)]
