"""The demo's legacy BACnet boiler controller (#31): it starts in an asyncio loop as the
simulator runs it, our client reads its flow temperature and sees its boiler enable held ON at
priority 16 by its own logic (our write at 8 wins, our release hands it back); the demo's
configuration records its flow into a feed from a real poll; a taken port turns it off and the
rest of the demo runs on."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from demo.bacnet_controller import DEMO_INSTANCE, DEMO_NODE, BoilerController
from demo.bacnet_setup import FEED_NAME, ensure_demo_bacnet
from demo.ports import bacnet_port
from demo.simulator import Simulator, SimulatorConfig
from feeds.store import service
from sensors.devices import bacnet_client, bacnet_status
from sensors.devices.bacnet_cov import CovClient, Plan
from sensors.devices.bacnet_cov_service import CovService
from sensors.devices.bacnet_devices import poll_device
from sensors.models import BacnetDevice, Node, Site
from sensors.tasks import poll_bacnet_devices
from tests.sensors.bacnet_peer import OUR_HOST, PEER_HOST, PEER_PYTHON, free_udp_port
from tests.wait import wait_for

SUBSCRIBER = Path(__file__).with_name("bacpy_cov_subscriber.py")

LOCAL = f"{OUR_HOST}/32:0"


class Loop:
    """An asyncio loop on a thread of its own, as the simulator's loop is to our client."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro, timeout_s: float = 10.0):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout_s)

    def call(self, fn, *args) -> None:
        async def call() -> None:
            fn(*args)

        self.run(call())

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture
def loop() -> Iterator[Loop]:
    running = Loop()
    yield running
    running.close()


@pytest.fixture
def controller(loop) -> Iterator[BoilerController]:
    started = BoilerController(PEER_HOST, free_udp_port(PEER_HOST))
    loop.run(started.start())
    yield started
    loop.run(started.stop())


def _address(c: BoilerController) -> str:
    return f"{c.host}:{c.port}"


def test_our_client_discovers_it_reads_its_flow_and_its_own_priority_16(controller, loop):
    loop.call(controller.publish, 63.25)
    found = bacnet_client.browse(_address(controller), DEMO_INSTANCE, local=LOCAL,
                                 client_instance=4194000)  # fmt: skip
    assert found.device_name == "Old boiler house controller"
    assert [(o.ref, o.name, o.units) for o in found.objects] == [
        ("analog-input,1", "Boiler flow temperature", "degrees-celsius"),
        ("binary-output,1", "Boiler enable", ""),
    ]
    read = bacnet_client.read_present_values(
        _address(controller), ["analog-input,1"], local=LOCAL, client_instance=4194000,
        timeout_s=2, deadline_s=5,
    )  # fmt: skip
    assert read.values == {"analog-input,1": 63.25} and read.errors == {}

    own = bacnet_client.read_command_state(_address(controller), "binary-output,1", local=LOCAL,
                                           client_instance=4194000)  # fmt: skip
    assert (own.value, own.priority, own.ours) == (True, 16, None)
    ours = bacnet_client.command_binary(_address(controller), "binary-output,1", False,
                                        priority=8, local=LOCAL, client_instance=4194000)  # fmt: skip
    assert (ours.value, ours.priority, ours.ours) == (False, 8, False)
    back = bacnet_client.command_binary(_address(controller), "binary-output,1", None,
                                        priority=8, local=LOCAL, client_instance=4194000)  # fmt: skip
    assert (back.value, back.priority) == (True, 16)  # its own logic has it again


@pytest.mark.django_db
class Subscriber:
    """bac-py's SubscribeCOV from another process (tests/demo/bacpy_cov_subscriber.py), as an
    unauthenticated BMS on the plant LAN could send; its printed lines read by a thread."""

    def __init__(self, address: str, ref: str) -> None:
        self.lines: list[str] = []
        self.process = subprocess.Popen(
            [str(PEER_PYTHON), str(SUBSCRIBER), "--interface", OUR_HOST, "--to", address,
             "--object", ref],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=sys.stderr, text=True,
        )  # fmt: skip
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.append(line.strip())

    def close(self) -> None:
        self.process.stdin.close()  # its cue to stop
        self.process.wait(10)
        self.reader.join(10)


def test_a_cov_subscription_is_notified_and_the_controller_lives_on(controller, loop, caplog):
    # #31: the first change after a SubscribeCOV raised TypeError (no covIncrement) out of
    # `publish`, which stopped the simulator and with it the demo site.
    subscriber = Subscriber(_address(controller), "analog-input,1")
    try:
        wait_for(lambda: "subscribed" in subscriber.lines, 20, "subscribed",
                 state=lambda: subscriber.lines)  # fmt: skip
        loop.call(controller.publish, 30.0)
        wait_for(lambda: "pv 30.0" in subscriber.lines, 20, "notified of 30.0",
                 state=lambda: subscriber.lines)  # fmt: skip
        loop.call(controller.publish, 30.05)  # within the increment: no notification
        loop.call(controller.publish, 31.5)
        wait_for(lambda: "pv 31.5" in subscriber.lines, 20, "notified of 31.5",
                 state=lambda: subscriber.lines)  # fmt: skip
        assert "pv 30.05" not in subscriber.lines
    finally:
        subscriber.close()

    # A fault while telling subscribers is logged, not raised into the simulator's loop: a
    # property monitor (bacpypes3 calls them from inside the assignment) that fails.
    def broken(old: object, new: object) -> None:
        raise TypeError("a monitor's fault")

    controller.flow._property_monitors["presentValue"].append(broken)
    loop.call(controller.publish, 40.0)
    assert "publishing the flow failed" in caplog.text
    read = bacnet_client.read_present_values(
        _address(controller), ["analog-input,1"], local=LOCAL, client_instance=4194000,
        timeout_s=2, deadline_s=5,
    )  # fmt: skip
    assert read.errors == {}  # it still answers


@pytest.mark.django_db
def test_the_demo_configuration_records_its_flow_into_a_feed(
    controller, loop, settings, redis_client, tmp_path
):
    settings.BMS_FEED_DIR = str(tmp_path)
    settings.BMS_BACNET_ADDRESS = f"{OUR_HOST}/32"
    site = Site.objects.create(name="Demo", slug="demo")
    device = ensure_demo_bacnet(site, controller.host, controller.port)
    assert ensure_demo_bacnet(site, controller.host, controller.port).pk == device.pk  # again
    sensor = device.node.sensors.get(key="analog-input-1")
    assert (sensor.feed.name, sensor.unit, device.node.site_id) == (FEED_NAME, "°C", site.pk)
    assert device.points.count() == 1

    loop.call(controller.publish, 58.5)
    report = poll_device(device)
    assert report["values"] == {"analog-input-1": 58.5}
    assert service.last_value(sensor.feed_id)[1] == 58.5


@pytest.mark.django_db
def test_when_off_its_node_is_disabled_so_it_is_neither_polled_nor_alarmed(
    controller, redis_client
):
    site = Site.objects.create(name="Demo", slug="demo")
    ensure_demo_bacnet(site, controller.host, controller.port, running=False)
    assert Node.objects.get(name=DEMO_NODE).enabled is False
    assert poll_bacnet_devices() == []  # a disabled node is never due
    device = ensure_demo_bacnet(site, controller.host, controller.port)  # on again
    assert device.node.enabled is True and BacnetDevice.objects.count() == 1


def test_a_taken_port_turns_it_off_and_the_demo_runs_on(loop):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        assert bacnet_port(8000 + port - 47820) == 0
        simulator = Simulator(SimulatorConfig(base_url="http://127.0.0.1:1", keys={},
                                              bacnet_port=port))  # fmt: skip
        loop.run(simulator._start_bacnet())  # logs, and does not raise
        assert simulator.bacnet is None


def test_its_port_follows_the_web_port():
    port = free_udp_port("127.0.0.1")
    assert bacnet_port(8000 + port - 47820) == port
    assert bacnet_port(8000 - 47820 + 1023) == 0  # below 1024: not a port for the demo
    assert bacnet_port(8000 + 65536 - 47820) == 0  # past 65535


def test_simulate_site_refuses_a_bacnet_port_out_of_range():
    with pytest.raises(CommandError, match="--bacnet-port must be a port 0–65535"):
        call_command("simulate_site", "--bacnet-port", "70000", "--setup-only")


@pytest.mark.django_db
def test_its_flow_is_recorded_by_cov_as_scripts_run_site_runs_bacnet_cov(
    controller, loop, settings, redis_client, tmp_path
):
    """run-site.sh starts `manage.py bacnet_cov` beside the demo: the controller's flow is
    subscribed and each change it notifies recorded, the poll leaving the point alone."""
    settings.BMS_FEED_DIR = str(tmp_path)
    site = Site.objects.create(name="Demo", slug="demo")
    device = ensure_demo_bacnet(site, controller.host, controller.port)
    sensor = device.node.sensors.get(key="analog-input-1")
    client = CovClient(LOCAL, 4194000, timeout_s=2)
    client.start()
    try:
        cov = CovService(client, Plan(300), max_per_device=50, min_interval_s=0.1)
        assert cov.load() == 1

        def subscribed() -> bool:
            cov.step()
            return all(s.subscribed_until for s in cov.plan.states.values())

        wait_for(subscribed, 20, "the demo controller to take the subscription")
        loop.call(controller.publish, 61.75)

        def recorded() -> bool:
            cov.step()
            last = service.last_value(sensor.feed_id)
            return last is not None and last[1] == 61.75

        wait_for(recorded, 20, "61.75 notified and recorded")
        point = bacnet_status.last_read([device])[0].points[0]
        assert (point.read_by, point.value) == ("cov", 61.75)
    finally:
        for watch in cov.plan.watches.values():
            client.cancel(watch).result(3)
        client.stop()
