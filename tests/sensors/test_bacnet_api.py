"""BACnet controllers and points on the REST API (#31): engineers configure, viewers read, bad
input a 400 naming the field, the bounds of `manage.py bacnet`, and "what did we last read from
this controller" from a real poll of the independent bac-py controller."""

from __future__ import annotations

import pytest

from sensors.models import BACNET_MAX_POINTS_PER_DEVICE, BacnetDevice, BacnetPoint, Node, Sensor
from sensors.tasks import poll_bacnet_device
from tests.sensors import bacnet_peer
from tests.sensors.bacnet_peer import INSTANCE

controller = bacnet_peer.controller

DEVICE = {"name": "boiler-house", "address": "192.168.50.40", "device_instance": 2601}


@pytest.mark.django_db
def test_an_engineer_adds_a_controller_and_a_point_and_the_point_has_an_input(engineer_api):
    answer = engineer_api.post("/api/v1/bacnet-devices", {**DEVICE, "interval": 60}, format="json")
    assert answer.status_code == 201, answer.content
    device = BacnetDevice.objects.get(pk=answer.json()["id"])
    assert device.node.protocol == Node.Protocol.BACNET and device.node.interval == 60
    assert answer.json()["name"] == "boiler-house" and answer.json()["node"] == device.node_id

    point = engineer_api.post(
        "/api/v1/bacnet-points",
        {"device": device.pk, "object_type": "analog-input", "instance": 1,
         "name": "Boiler flow temperature", "units": "degrees-celsius"},
        format="json",
    )  # fmt: skip
    assert point.status_code == 201, point.content
    sensor = Sensor.objects.get(node=device.node, key="analog-input-1")
    assert (sensor.name, sensor.unit) == ("Boiler flow temperature", "°C")
    assert point.json()["key"] == "analog-input-1" and point.json()["sensor"] == sensor.pk

    renamed = engineer_api.patch(
        f"/api/v1/bacnet-devices/{device.pk}", {"name": "plant-room", "interval": 15}, format="json"
    )
    assert renamed.status_code == 200, renamed.content
    device.node.refresh_from_db()
    assert (device.node.name, device.node.interval) == ("plant-room", 15)


@pytest.mark.django_db
def test_a_viewer_reads_controllers_and_may_not_change_them(engineer_api, viewer_api):
    device_id = engineer_api.post("/api/v1/bacnet-devices", DEVICE, format="json").json()["id"]
    assert viewer_api.get("/api/v1/bacnet-devices").json()["results"][0]["name"] == "boiler-house"
    assert viewer_api.get(f"/api/v1/bacnet-devices/{device_id}/last-read").status_code == 200
    refused = viewer_api.patch(f"/api/v1/bacnet-devices/{device_id}", {"interval": 5})
    assert refused.status_code == 403
    assert viewer_api.post("/api/v1/bacnet-points", {"device": device_id}).status_code == 403
    assert BacnetDevice.objects.get(pk=device_id).node.interval == 30


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"address": "not an address:99999"}, "address"),
        ({"address": "0.0.0.0"}, "address"),
        ({"address": "255.255.255.255"}, "address"),
        ({"address": "224.0.0.1"}, "address"),
        ({"address": "239.255.255.255:47808"}, "address"),
        ({"address": "fe80::1"}, "address"),
        ({"device_instance": 4194303}, "device_instance"),  # the wildcard, past the 22 bits
        ({"interval": 4}, "interval"),  # below the command's 5 s
        ({"interval": 86401}, "interval"),
        ({"timeout_s": 0.4}, "timeout_s"),
        ({"timeout_s": 31}, "timeout_s"),
        ({"name": "boiler/house"}, "name"),
        ({"name": "x" * 65}, "name"),
    ],
)
@pytest.mark.django_db
def test_a_bad_controller_is_a_400_naming_the_field_and_nothing_is_stored(
    engineer_api, change, field
):
    answer = engineer_api.post("/api/v1/bacnet-devices", {**DEVICE, **change}, format="json")
    assert answer.status_code == 400
    assert field in answer.json()["fields"], answer.json()
    assert not BacnetDevice.objects.exists() and not Node.objects.exists()


@pytest.mark.django_db
def test_addresses_are_refused_in_words_and_a_directed_broadcast_or_the_last_unicast_taken(
    engineer_api,
):
    said = {}
    for address in ("0.0.0.0", "255.255.255.255", "224.0.0.0", "fe80::1", "[::1]:47808"):
        answer = engineer_api.post("/api/v1/bacnet-devices", {**DEVICE, "address": address},
                                   format="json")  # fmt: skip
        assert answer.status_code == 400 and answer.json()["success"] is False
        said[address] = answer.json()["fields"]["address"][0]
    assert said["0.0.0.0"].startswith("0.0.0.0 is no one's address")
    assert said["255.255.255.255"].startswith("255.255.255.255 is the broadcast to every host")
    assert said["224.0.0.0"].startswith("224.0.0.0 is a multicast address")
    assert said["fe80::1"] == said["[::1]:47808"] == "IPv6 is not supported: give an IPv4 address"
    # The bounds either side: the last address below multicast, and a /24's .255 (a host on a
    # wider subnet, or a directed broadcast: not ours to judge without the prefix).
    for name, address in (("below", "223.255.255.255"), ("dot255", "10.1.2.255")):
        answer = engineer_api.post("/api/v1/bacnet-devices",
                                   {**DEVICE, "name": name, "address": address},
                                   format="json")  # fmt: skip
        assert answer.status_code == 201, answer.json()


@pytest.mark.django_db
def test_a_second_controller_at_the_same_address_and_instance_is_a_400_on_address(engineer_api):
    assert engineer_api.post("/api/v1/bacnet-devices", DEVICE, format="json").status_code == 201
    port = DEVICE["address"] if ":" in DEVICE["address"] else f"{DEVICE['address']}:47808"
    twin = {**DEVICE, "name": "twin", "address": port}  # the same, with the default port said
    answer = engineer_api.post("/api/v1/bacnet-devices", twin, format="json")
    assert answer.status_code == 400
    assert "is already recorded as" in answer.json()["fields"]["address"][0]
    other = {**DEVICE, "name": "other", "device_instance": DEVICE["device_instance"] + 1}
    assert engineer_api.post("/api/v1/bacnet-devices", other, format="json").status_code == 201
    assert BacnetDevice.objects.count() == 2


@pytest.mark.django_db
def test_a_node_name_taken_is_a_400_on_name(engineer_api):
    Node.objects.create(name="boiler-house", key_prefix="x", key_hash="x")
    answer = engineer_api.post("/api/v1/bacnet-devices", DEVICE, format="json")
    assert answer.status_code == 400
    assert answer.json()["fields"]["name"] == ["A node named 'boiler-house' exists already."]


@pytest.mark.parametrize(
    ("point", "field"),
    [
        ({"object_type": "device", "instance": 1}, "object_type"),
        ({"object_type": "analog-input", "instance": 4194303}, "instance"),
        ({"object_type": "analog-input", "instance": -1}, "instance"),
        ({"object_type": "analog-input", "instance": 1, "name": "n" * 101}, "name"),
        ({"object_type": "analog-input", "instance": 1, "device": 999999}, "device"),
    ],
)
@pytest.mark.django_db
def test_a_bad_point_is_a_400_naming_the_field(engineer_api, point, field):
    device_id = engineer_api.post("/api/v1/bacnet-devices", DEVICE, format="json").json()["id"]
    answer = engineer_api.post(
        "/api/v1/bacnet-points", {"device": device_id, **point}, format="json"
    )
    assert answer.status_code == 400
    assert field in answer.json()["fields"], answer.json()
    assert not BacnetPoint.objects.exists()


@pytest.mark.django_db
def test_an_object_is_mapped_once_and_fixed_once_mapped(engineer_api):
    device_id = engineer_api.post("/api/v1/bacnet-devices", DEVICE, format="json").json()["id"]
    body = {"device": device_id, "object_type": "analog-input", "instance": 1}
    point_id = engineer_api.post("/api/v1/bacnet-points", body, format="json").json()["id"]
    again = engineer_api.post("/api/v1/bacnet-points", body, format="json")
    assert again.status_code == 400
    assert again.json()["fields"]["instance"] == [
        "analog-input,1 is mapped on this controller already."
    ]
    moved = engineer_api.patch(f"/api/v1/bacnet-points/{point_id}", {"instance": 2}, format="json")
    assert moved.status_code == 400 and "instance" in moved.json()["fields"]
    renamed = engineer_api.patch(f"/api/v1/bacnet-points/{point_id}", {"name": "Flow"})
    assert renamed.status_code == 200 and renamed.json()["name"] == "Flow"


@pytest.mark.django_db
def test_a_controller_takes_at_most_its_bound_of_points(engineer_api):
    device_id = engineer_api.post("/api/v1/bacnet-devices", DEVICE, format="json").json()["id"]
    BacnetPoint.objects.bulk_create(
        BacnetPoint(device_id=device_id, key=f"analog-value-{i}", object_type="analog-value",
                    instance=i)
        for i in range(BACNET_MAX_POINTS_PER_DEVICE - 1)
    )  # fmt: skip
    last = {"device": device_id, "object_type": "analog-input", "instance": 1}
    assert engineer_api.post("/api/v1/bacnet-points", last, format="json").status_code == 201
    past = engineer_api.post("/api/v1/bacnet-points", {**last, "instance": 2}, format="json")
    assert past.status_code == 400
    assert past.json()["fields"]["device"] == [
        f"A controller is polled for at most {BACNET_MAX_POINTS_PER_DEVICE} points."
    ]
    assert BacnetPoint.objects.count() == BACNET_MAX_POINTS_PER_DEVICE


@pytest.mark.django_db
def test_last_read_shows_each_points_value_and_the_controllers_answer_then_its_fault(
    controller, engineer_api, redis_client
):
    device_id = engineer_api.post(
        "/api/v1/bacnet-devices",
        {"name": "boiler-house", "address": controller.address, "device_instance": INSTANCE,
         "timeout_s": 0.5},
        format="json",
    ).json()["id"]  # fmt: skip
    engineer_api.post("/api/v1/bacnet-points",
                      {"device": device_id, "object_type": "analog-input", "instance": 1},
                      format="json")  # fmt: skip
    node_id = BacnetDevice.objects.get(pk=device_id).node_id
    never = engineer_api.get(f"/api/v1/bacnet-devices/{device_id}/last-read").json()
    assert never["answering"] is False and never["answered_at"] is None
    assert never["points"][0]["value"] is None and never["points"][0]["time"] is None

    poll_bacnet_device(node_id)
    read = engineer_api.get(f"/api/v1/bacnet-devices/{device_id}/last-read").json()
    assert read["answering"] is True and read["error"] == "" and read["failing_since"] is None
    (point,) = read["points"]
    assert (point["key"], point["ref"], point["value"]) == (
        "analog-input-1",
        "analog-input,1",
        61.5,
    )
    assert point["time"] >= read["answered_at"] - 1

    controller.stop()
    poll_bacnet_device(node_id)
    lost = engineer_api.get(f"/api/v1/bacnet-devices/{device_id}/last-read").json()
    assert lost["answering"] is False and lost["answered_at"] == read["answered_at"]
    assert lost["failing_since"] >= read["answered_at"]
    assert lost["error"].startswith("no answer within")
    assert lost["points"][0]["value"] == 61.5  # the last reading is kept, with its time


@pytest.mark.django_db
def test_deleting_a_controller_keeps_its_node_and_inputs_so_nothing_recorded_is_lost(
    engineer_api, viewer_api
):
    device_id = engineer_api.post("/api/v1/bacnet-devices", DEVICE, format="json").json()["id"]
    engineer_api.post("/api/v1/bacnet-points",
                      {"device": device_id, "object_type": "analog-input", "instance": 1},
                      format="json")  # fmt: skip
    assert viewer_api.delete(f"/api/v1/bacnet-devices/{device_id}").status_code == 403
    assert engineer_api.delete(f"/api/v1/bacnet-devices/{device_id}").status_code == 204
    assert not BacnetDevice.objects.exists() and not BacnetPoint.objects.exists()
    assert Sensor.objects.filter(node__name="boiler-house", key="analog-input-1").exists()


@pytest.mark.django_db
def test_a_page_of_points_costs_the_same_queries_whatever_its_length(
    engineer_api, django_assert_max_num_queries
):
    device_id = engineer_api.post("/api/v1/bacnet-devices", DEVICE, format="json").json()["id"]
    for i in range(1, 31):
        engineer_api.post("/api/v1/bacnet-points",
                          {"device": device_id, "object_type": "analog-value", "instance": i},
                          format="json")  # fmt: skip
    with django_assert_max_num_queries(8):  # session, user, groups, count, page: not per point
        page = engineer_api.get("/api/v1/bacnet-points").json()["results"]
    assert len(page) == 30 and all(p["sensor"] is not None for p in page)
    sensor = Sensor.objects.get(key="analog-value-7")
    assert next(p for p in page if p["key"] == "analog-value-7")["sensor"] == sensor.pk
