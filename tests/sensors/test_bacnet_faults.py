"""A controller's own diagnosis of its points, alarmed in its words (issue #31): reliability
other than no-fault-detected and out-of-service, read from the independent bac-py controller
(tests/sensors/bacnet_controller.py) by the real poll, each raised naming the controller, the
object and the value it gave, and cleared when the controller says the condition is gone."""

from __future__ import annotations

import time

import pytest
from django.core.management import call_command

from alarms.models import Alarm
from feeds.models import Feed
from feeds.store import service
from sensors.devices import bacnet_status
from sensors.models import BacnetDevice, Sensor
from sensors.tasks import check_silent_nodes, poll_bacnet_device
from tests.sensors import bacnet_peer
from tests.sensors.bacnet_peer import INSTANCE

controller = bacnet_peer.controller


@pytest.fixture
def device(controller, redis_client) -> BacnetDevice:
    # redis_client: a clean Redis. The COV tests leave their subscriptions' state there, for
    # point ids the next test reuses, and a point COV holds is not read by the poll.
    call_command("bacnet", "add", "boiler-house", controller.address, str(INSTANCE),
                 "--point", "analog-input,1", "--interval", "10")  # fmt: skip
    return BacnetDevice.objects.get(node__name="boiler-house")


def open_alarm(key: str) -> Alarm | None:
    return Alarm.objects.filter(key=key, cleared_at=None).first()


@pytest.mark.django_db
def test_a_point_in_fault_is_alarmed_with_its_reliability_and_not_recorded(controller, device):
    sensor = Sensor.objects.get(node=device.node, key="analog-input-1")
    sensor.feed = Feed.objects.create(name="boiler flow", tag="boiler-house", interval=10)
    sensor.save()
    key = f"bacnet-fault:{device.node_id}:analog-input-1"

    controller.plant("reliability analog-input,1 over-range")
    controller.plant("pv analog-input,1 150")
    before = service.last_value(sensor.feed_id)
    report = poll_bacnet_device(device.node_id)
    assert report["faults"] == ["analog-input-1"] and report["values"] == {}
    alarm = open_alarm(key)
    assert alarm is not None and alarm.message == (
        f"BACnet controller boiler-house (device {INSTANCE} at {controller.address}): "
        "analog-input,1 'Boiler flow temperature' reports a fault: reliability 'over-range' "
        "(present value 150). Its value is not recorded while it does."
    )
    assert service.last_value(sensor.feed_id) == before  # 150 °C from a broken sensor: not stored

    controller.plant("reliability analog-input,1 open-loop")  # the device changes its words
    poll_bacnet_device(device.node_id)
    assert "reliability 'open-loop'" in open_alarm(key).message

    controller.plant("reliability analog-input,1 no-fault-detected")
    controller.plant("pv analog-input,1 62")
    report = poll_bacnet_device(device.node_id)
    assert report["values"] == {"analog-input-1": 62.0} and report["faults"] == []
    assert open_alarm(key) is None
    assert service.last_value(sensor.feed_id)[1] == 62.0


@pytest.mark.django_db
def test_a_point_out_of_service_is_alarmed_and_recorded_until_back_in_service(controller, device):
    key = f"bacnet-out-of-service:{device.node_id}:analog-input-1"
    controller.plant("oos analog-input,1 true")
    controller.plant("pv analog-input,1 55")
    report = poll_bacnet_device(device.node_id)
    assert report["values"] == {"analog-input-1": 55.0}  # the hand value, recorded, alarmed
    assert open_alarm(key).message == (
        f"BACnet controller boiler-house (device {INSTANCE} at {controller.address}): "
        "analog-input,1 'Boiler flow temperature' is out of service at the controller: its "
        "present value (55) is set by hand there, not measured or commanded by its programme."
    )
    controller.plant("oos analog-input,1 false")
    poll_bacnet_device(device.node_id)
    assert open_alarm(key) is None


@pytest.mark.django_db
def test_a_point_leaving_the_map_clears_its_fault(controller, device):
    controller.plant("reliability analog-input,1 shorted-loop")
    device.points.create(key="binary-output-1", object_type="binary-output", instance=1)
    poll_bacnet_device(device.node_id)
    key = f"bacnet-fault:{device.node_id}:analog-input-1"
    assert open_alarm(key) is not None
    device.points.filter(key="analog-input-1").delete()
    poll_bacnet_device(device.node_id)
    assert open_alarm(key) is None


@pytest.mark.django_db
def test_a_controller_answering_only_with_a_faulty_point_is_never_silent(
    controller, device, redis_client
):
    # COV holds every point (as bacnet_cov_service.py writes it), so the poll reads one: the
    # faulty one, whose value is not recorded. The answer is proof of life all the same.
    device.node.interval = 10
    device.node.save()
    redis_client.hset(bacnet_status.cov_key(device.node_id), "analog-input-1", time.time() + 600)
    controller.plant("reliability analog-input,1 over-range")
    controller.plant("pv analog-input,1 150")
    silent = f"node-silent:{device.node_id}"
    heard = poll_bacnet_device(device.node_id)
    assert heard["faults"] == ["analog-input-1"] and heard["values"] == {}
    assert check_silent_nodes(now=time.time() + 25)["raised"] == []  # within 3 intervals

    # Silent on the books (no answer for 3 intervals, as when the worker was stopped)...
    assert check_silent_nodes(now=time.time() + 35)["raised"] == [device.node_id]
    assert open_alarm(silent) is not None
    # ...the next answer, a fault again, closes it at once, and no check raises it again.
    poll_bacnet_device(device.node_id)
    assert open_alarm(silent) is None
    assert open_alarm(f"bacnet-fault:{device.node_id}:analog-input-1") is not None
    assert check_silent_nodes(now=time.time() + 25)["raised"] == []
    assert Alarm.objects.filter(key=silent).count() == 1  # the one raised, not a new row each
