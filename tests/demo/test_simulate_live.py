"""End to end: the simulator against a live server, a real Celery worker and real Redis.

The simulator runs as the real command in a subprocess sharing the test database. Its HTTP
nodes post to /input/bulk, the worker ingests into the feed store, the poll task reads the
simulated meter over Modbus TCP, and coils written on the simulated relay board by a Modbus
client (as the control driver does) heat exactly the room whose valve was opened.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings
from pymodbus.client import ModbusTcpClient

from demo import layout
from demo.bacnet_controller import DEMO_NODE
from demo.bacnet_setup import FEED_NAME as BACNET_FEED
from feeds.models import Feed
from sensors.models import Node
from tests.conftest import ROOT, test_database_url
from tests.processes import stop_process
from tests.sensors.bacnet_peer import free_udp_port
from tests.wait import wait_for

pytestmark = [pytest.mark.integration]
SPEED = 600  # ten simulated minutes per real second: a heated room warms within one post


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Simulation:
    def __init__(
        self, proc: subprocess.Popen, log_path: Path, relay_port: int, env: dict[str, str]
    ) -> None:
        self.env = env
        self.proc = proc
        self.log_path = log_path
        self.relay_port = relay_port

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


@pytest.fixture
def simulation(
    live_server, celery_worker, transactional_db, redis_client, tmp_path
) -> Iterator[Simulation]:
    relay_port, meter_port = _free_port(), _free_port()
    env = dict(
        os.environ,
        DATABASE_URL=test_database_url(),
        DJANGO_SETTINGS_MODULE="bms.settings_test",
        BMS_DATA_DIR=str(settings.BMS_DATA_DIR),
    )
    argv = [sys.executable, str(ROOT / "manage.py"), "simulate_site", "--base-url", live_server.url,
            "--speed", str(SPEED), "--relay-port", str(relay_port), "--meter-port", str(meter_port),
            "--seed", "7", "--duration", "120", "--bacnet-port", str(free_udp_port("127.0.0.1")),
            "--history-days", "0"]  # every value in the feeds below was posted live  # fmt: skip
    log_path = tmp_path / "simulator.log"
    with open(log_path, "wb") as out:
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    sim = Simulation(proc, log_path, relay_port, env)
    try:
        wait_for(
            lambda: "Simulating at" in sim.log() or proc.poll() is not None, 60, "the simulator"
        )
        assert proc.poll() is None, sim.log()
        yield sim
    finally:
        stop_process(proc, timeout_s=20)


def _feed(node: str, name: str) -> Feed:
    return Feed.objects.get(tag=node, name=name)


def _last(feed: Feed) -> tuple[int, float] | None:
    from feeds.store.service import last_value

    return last_value(feed.pk)


def test_simulated_nodes_reach_the_feeds_and_relays_heat_the_rooms(simulation):
    pv = _feed("emontx-pv", "PV power")
    flow = _feed("emontx-hydro", "River flow")
    tank = _feed("emontx-solarthermal", "Tank temperature")
    rooms = {r.slug: _feed(f"emonth-{r.slug}", f"{r.name} temperature") for r in layout.ROOMS}

    # HTTP nodes -> /input/bulk -> Celery ingest -> feed store (last values in Redis).
    for feed in (pv, flow, tank, *rooms.values()):
        wait_for(lambda f=feed: _last(f), 40, f"a value in feed {feed}")
    t, river = _last(flow)
    assert abs(t - time.time()) < 60  # posted at wall-clock time, not simulated time
    assert 5 < river < 1000
    assert _last(pv)[1] >= 0.0

    # The meter: the real poll task reads the simulated SDM630 over Modbus TCP.
    from sensors.tasks import poll_modbus_meter

    meter = Node.objects.get(name=layout.METER_NODE.name)
    voltage = _feed(meter.name, "Voltage L1")

    def polled() -> tuple[int, float] | None:
        poll_modbus_meter.delay(meter.pk)
        return _last(voltage)

    _, volts = wait_for(polled, 40, "the meter's voltage")
    assert 225 < volts < 255

    # The legacy BACnet controller: the real poll task reads its flow over BACnet/IP.
    from sensors.tasks import poll_bacnet_device

    controller = Node.objects.get(name=DEMO_NODE)
    assert controller.enabled, simulation.log()
    bacnet_flow = _feed(DEMO_NODE, BACNET_FEED)

    def bacnet_polled() -> tuple[int, float] | None:
        poll_bacnet_device.delay(controller.pk)
        return _last(bacnet_flow)

    _, flow_c = wait_for(bacnet_polled, 40, "the BACnet controller's flow temperature")
    assert 0 < flow_c < 100

    # Radio nodes: JeeLib lines -> the bms_gateway subprocess -> /api/v1/readings -> feeds.
    outside = _feed("boilerhouse", "Outside temperature")
    wind = _feed("anemometer", "Wind speed")
    _, outside_c = wait_for(lambda: _last(outside), 40, "the JeeLib outside temperature")
    assert -10 < outside_c < 30  # hundredths scaled back by the gateway config
    _, wind_m_s = wait_for(lambda: _last(wind), 40, "a wind speed from the pulse counter")
    assert 0 <= wind_m_s < 40

    # The relay board: open one room's valve, run boiler and pump, as the control driver would.
    heated, unheated = layout.ROOMS[0], layout.ROOMS[1]
    before = {slug: _last(feed)[1] for slug, feed in rooms.items()}
    client = ModbusTcpClient("127.0.0.1", port=simulation.relay_port, timeout=2)
    assert client.connect()
    try:
        for coil in (layout.COIL_BOILER, layout.COIL_HEATING_PUMP, heated.coil):
            assert not client.write_coil(coil, True, device_id=layout.RELAY_DEVICE_ID).isError()
    finally:
        client.close()

    def warmed() -> bool:
        now = _last(rooms[heated.slug])[1]
        return now > before[heated.slug] + 2.0

    wait_for(warmed, 40, f"{heated.name} to warm")
    assert _last(rooms[unheated.slug])[1] <= before[unheated.slug] + 0.5
    assert "Relay board now: boiler, heating pump, valve" in simulation.log()

    # SIGTERM: a clean stop that closes the Modbus servers.
    simulation.proc.send_signal(signal.SIGTERM)
    assert simulation.proc.wait(timeout=20) == 0
    log = simulation.log()
    assert "Received SIGTERM" in log and "Simulator stopped" in log
    assert "JeeLib gateway stopped (exit code 0)" in log
    with socket.socket() as s:
        s.bind(("127.0.0.1", simulation.relay_port))  # the port is free again

    # docs/DEMO.md: the recorded JeeLib lines replay through the gateway with its config.
    demo_dir = Path(settings.BMS_DATA_DIR) / "demo"
    replay = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "bms_gateway",
         "--config", str(demo_dir / "gateway.json"), "--file", str(demo_dir / "jeelib.log")],
        cwd=ROOT, env=simulation.env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert replay.returncode == 0, replay.stderr
    assert " 0 unparseable, 0 from unknown radio nodes, 0 rows not delivered" in replay.stdout


def test_the_control_loop_heats_the_room_booked_next(simulation):
    """The first demo booking (as soon as its room can be pre-heated): the real control tick
    pre-heats that room through the relay board at once, and the simulated room's posted
    temperature rises; an unbooked room stays cold."""
    from control.models import Zone
    from control.tasks import control_tick

    booked, unbooked = "straw-bale-room", "workshop"  # Yoga first; no booking today
    # The workshop's "Evening classes" (Tue and Thu 18:00) pre-heat it from mid-afternoon on
    # those days: without its schedule it is unbooked whatever the day and hour the test runs.
    workshop = Zone.objects.get(slug=unbooked)
    workshop.schedule = None
    workshop.save()
    rooms = {
        slug: _feed(f"emonth-{slug}", f"{name} temperature")
        for slug, name in (("straw-bale-room", "Straw bale room"), ("workshop", "Workshop"))
    }
    for feed in rooms.values():
        wait_for(lambda f=feed: _last(f), 40, f"a value in feed {feed}")
    # The mixing valve's loop steers on the heating flow (radio node 10): a tick before its
    # first reading holds the valve where it was, as a real controller with a lost sensor does.
    heating = _feed("boilerhouse", "Heating flow temperature")
    wait_for(lambda: _last(heating), 40, "the heating flow after the mixing valve")
    before = {slug: _last(feed)[1] for slug, feed in rooms.items()}

    control_tick.delay()
    wait_for(lambda: f"valve {booked}" in simulation.log(), 40, "the tick to open the booked valve")
    # The boiler fires at the next tick, once the board confirmed the valve open.
    control_tick.delay()
    wait_for(
        lambda: any(
            f"valve {booked}" in x and "boiler" in x and "heating pump" in x
            for x in simulation.log().splitlines()
        ),
        40,
        "the next tick to fire the boiler and run its pump",
    )
    wait_for(
        lambda: _last(rooms[booked])[1] > before[booked] + 2.0,
        40,
        f"{booked} to warm",
        state=lambda: simulation.log()[-4000:],
    )
    # The boiler house's heating curve steered the board's mixing valve: written and read back,
    # so no plant-output alarm (docs/DEMO.md "Heating plant").
    from alarms.models import Alarm
    from control.models import AnalogueCommand, HeatingPlant

    plant = HeatingPlant.objects.get(name="Boiler house")
    wait_for(
        lambda: AnalogueCommand.objects.filter(plant=plant, confirmed_at__isnull=False).exists(),
        40,
        "a confirmed write of the mixing valve",
    )
    assert not Alarm.objects.filter(key=f"plant-output:{plant.pk}", cleared_at__isnull=True)
    assert "mixing valve" in simulation.log()
    assert _last(rooms[unbooked])[1] <= before[unbooked] + 0.5
    assert f"valve {unbooked}" not in simulation.log()
