"""COV subscriptions against the independent bac-py controller (tests/sensors/bacnet_controller.py):
a point is subscribed and what the controller notifies is recorded as its reading, the poll
leaving it alone; a point whose subscription the controller refuses is polled; subscriptions
are renewed before they lapse; per controller and per point rate bounds hold, excess
notifications dropped and counted where staff see them."""

from __future__ import annotations

import logging
import time

import pytest
from django.core.management import call_command

from alarms.models import Alarm
from feeds.models import Feed
from feeds.store import service as feeds
from sensors.devices import bacnet_status
from sensors.devices.bacnet_cov import CovClient, Plan
from sensors.devices.bacnet_cov_service import CovService
from sensors.models import BacnetDevice, Sensor
from sensors.tasks import poll_bacnet_device
from tests.sensors import bacnet_peer
from tests.sensors.bacnet_peer import INSTANCE, OUR_HOST, Controller, free_udp_port
from tests.wait import wait_for

pytestmark = pytest.mark.django_db
FLOW, ENABLE = "analog-input,1", "binary-output,1"


@pytest.fixture
def controller(settings, redis_client):
    """The controller, refusing COV on its boiler enable (as one without COV support would).
    Redis is flushed before and after: the subscriptions this file makes are kept there per
    device id, and another test's poll must not find them."""
    our_port = free_udp_port(OUR_HOST)
    settings.BMS_BACNET_ADDRESS = f"{OUR_HOST}/32"
    settings.BMS_BACNET_PORT = our_port
    peer = Controller(
        free_udp_port(bacnet_peer.PEER_HOST), f"{OUR_HOST}:{our_port}", refuse_cov=(ENABLE,)
    )
    peer.start()
    yield peer
    peer.stop()


@pytest.fixture
def client():
    client = CovClient(f"{OUR_HOST}/32:0", 4194000, timeout_s=2)
    client.start()
    yield client
    client.stop()


@pytest.fixture
def device(controller) -> BacnetDevice:
    call_command("bacnet", "add", "boiler-house", controller.address, str(INSTANCE),
                 "--point", FLOW, "--point", ENABLE)  # fmt: skip
    device = BacnetDevice.objects.get(node__name="boiler-house")
    sensor = Sensor.objects.get(node=device.node, key="analog-input-1")
    sensor.feed = Feed.objects.create(name="boiler flow", tag="boiler-house", interval=10)
    sensor.save()
    return device


class Clock:
    def __init__(self, start: float) -> None:
        self.t = start

    def __call__(self) -> float:
        return self.t


def settled(service: CovService, count: int) -> bool:
    """Every watch answered (subscribed or refused) and at least `count` notifications in."""
    service.step()
    states = service.plan.states.values()
    return all(s.subscribed_until or s.refused for s in states) and service.received >= count


def flow(device: BacnetDevice) -> float | None:
    sensor = Sensor.objects.get(node=device.node, key="analog-input-1")
    last = feeds.last_value(sensor.feed_id)
    return last[1] if last else None


def test_a_subscribed_point_is_recorded_on_change_and_a_refused_one_is_polled(
    controller, client, device
):
    service = CovService(client, Plan(300), max_per_device=50, min_interval_s=0.1)
    assert service.load() == 2
    wait_for(lambda: settled(service, 1), 20, "the subscriptions answered")
    states = {service.points[pid].ref: s for pid, s in service.plan.states.items()}
    assert states[FLOW].subscribed_until > 0 and states[FLOW].refused == ""
    assert states[ENABLE].refused == "services: service-request-denied"

    # The poll reads only the refused point: the subscribed one is told to us.
    report = poll_bacnet_device(device.node_id)
    assert report["values"] == {"binary-output-1": 1.0}

    controller.plant(f"pv {FLOW} 63.5")
    wait_for(lambda: service.step() is not None and flow(device) == 63.5, 20, "63.5 recorded")
    reading = bacnet_status.last_read([device])[0]
    by_key = {p.key: p for p in reading.points}
    assert by_key["analog-input-1"].read_by == "cov"
    assert by_key["binary-output-1"].read_by == "poll"
    assert by_key["binary-output-1"].cov_refused == "services: service-request-denied"

    # A fault notified is alarmed in the controller's words, as the poll does.
    controller.plant(f"reliability {FLOW} over-range")
    key = f"bacnet-fault:{device.node_id}:analog-input-1"
    wait_for(
        lambda: (
            service.step() is not None and Alarm.objects.filter(key=key, cleared_at=None).exists()
        ),
        20,
        "the fault alarmed",
    )
    assert "reliability 'over-range' (present value 63.5)" in Alarm.objects.get(key=key).message
    controller.plant(f"reliability {FLOW} no-fault-detected")
    wait_for(
        lambda: (
            service.step() is not None
            and not Alarm.objects.filter(key=key, cleared_at=None).exists()
        ),
        20,
        "the fault cleared",
    )


def test_a_subscription_is_renewed_before_it_lapses(controller, client, device):
    service = CovService(client, Plan(5), max_per_device=50, min_interval_s=0.1)
    service.load()
    flow_id = next(pid for pid, p in service.points.items() if p.ref == FLOW)
    # Two renewals: past the first subscription's 5 s lifetime, still held.
    wait_for(
        lambda: service.step() is not None and service.plan.states[flow_id].renewals >= 2,
        30,
        "two renewals",
    )
    controller.plant(f"pv {FLOW} 70")
    wait_for(lambda: service.step() is not None and flow(device) == 70.0, 20, "70 recorded")


def test_subscriptions_per_controller_are_bounded_the_rest_polled(controller, client, device):
    service = CovService(client, Plan(300), max_per_device=1, min_interval_s=0.1)
    assert service.load() == 1  # the first point only
    assert [p.ref for p in service.points.values()] == [FLOW]
    with pytest.raises(ValueError, match="out of range 0-200"):
        CovService(client, Plan(300), max_per_device=201, min_interval_s=1)
    assert CovService(client, Plan(300), max_per_device=200, min_interval_s=1)
    with pytest.raises(ValueError, match="out of range 5-3600"):
        Plan(4)
    assert Plan(3600).lifetime_s == 3600


def test_notifications_faster_than_the_bound_are_dropped_counted_and_the_latest_kept(
    controller, client, device, redis_client
):
    clock = Clock(time.time())
    service = CovService(client, Plan(300), max_per_device=50, min_interval_s=10, now=clock)
    service.load()
    wait_for(lambda: settled(service, 1), 20, "subscribed, first value in")
    assert flow(device) == 61.5  # the value notified on subscribing
    for value in (62, 63, 64, 65):
        controller.plant(f"pv {FLOW} {value}")
    wait_for(lambda: settled(service, 5), 20, "four more notifications")
    assert flow(device) == 61.5  # within 10 s of the last recorded: none recorded yet
    dropped = redis_client.hget(f"sensors:bacnet-cov-dropped:{device.node_id}", "analog-input-1")
    assert int(dropped) == 3  # 62, 63, 64 replaced; 65 waits
    clock.t += 10
    service.step()
    assert flow(device) == 65.0
    points = {p.key: p for p in bacnet_status.last_read([device])[0].points}
    assert points["analog-input-1"].cov_dropped == 3


def test_on_stop_it_cancels_its_subscriptions_and_the_poll_reads_its_points_again(
    controller, client, device, caplog
):
    # #31: a stopped process left its covered entries for the subscriptions' lifetime, and
    # the poll skipped those points meanwhile.
    service = CovService(client, Plan(300), max_per_device=50, min_interval_s=0.1)
    service.load()
    wait_for(lambda: settled(service, 1), 20, "the subscriptions answered")
    assert bacnet_status.covered_keys(device.node_id, time.time()) == {"analog-input-1"}
    assert poll_bacnet_device(device.node_id)["values"] == {"binary-output-1": 1.0}

    assert service.close() == 1  # the flow's subscription; the refused enable had none
    assert "BACnet COV stopped: 1 of 1 subscriptions cancelled" in caplog.text
    assert bacnet_status.covered_keys(device.node_id, time.time()) == set()
    assert bacnet_status.last_read([device])[0].points[0].read_by == "poll"
    controller.plant(f"pv {FLOW} 64.0")
    report = poll_bacnet_device(device.node_id)
    assert report["values"] == {"analog-input-1": 64.0, "binary-output-1": 1.0}


def test_the_command_runs_subscribes_and_stops_by_itself(controller, device, capsys, settings):
    settings.BMS_BACNET_COV_MIN_INTERVAL_S = 0.1
    call_command("bacnet_cov", "--for", "2")
    assert f"BACnet COV client on {OUR_HOST}/32:0" in capsys.readouterr().out


def test_the_command_logs_the_points_watched_at_start_and_on_change_only(
    controller, device, settings, monkeypatch, caplog
):
    # A line at every reload (30 s) was 2,880 a day saying the same; here a reload each pass.
    settings.BMS_BACNET_COV_MIN_INTERVAL_S = 0.1
    monkeypatch.setattr("sensors.management.commands.bacnet_cov.RELOAD_S", 0.0)
    caplog.set_level(logging.INFO)
    call_command("bacnet_cov", "--for", "1")
    watched = [m for m in caplog.messages if "points watched" in m]
    assert watched == ["BACnet COV: 2 points watched"]  # once, though reloaded each pass
