"""Browsing a controller and adding it from the staff BACnet page (#31): Browse queues the
object list for a worker (one at a time, the address and instance bounded, the field named when
refused); the page lists the objects; Add records the ticked ones as `manage.py bacnet add`
does, checked first, audited in the controller's history. Viewers see no buttons and a
hand-made POST from them is refused."""

from __future__ import annotations

import json

import pytest
from django.contrib.admin.models import ADDITION, CHANGE, LogEntry
from django.test import Client

from sensors.devices import bacnet_browsing, bacnet_client
from sensors.devices.bacnet_client import BacnetError, Browse, ObjectInfo
from sensors.devices.bacnet_devices import add_device
from sensors.models import BacnetDevice, Node, Sensor

OBJECTS = [
    {"object_type": "analog-input", "instance": 1, "name": "Boiler flow temperature",
     "units": "degrees-celsius", "description": "Flow sensor after the boiler"},
    {"object_type": "binary-output", "instance": 1, "name": "Boiler enable", "units": "",
     "description": "Boiler enable relay"},
]  # fmt: skip


def _login(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _browsed(redis_client, objects=OBJECTS, address="192.0.2.40", instance=2601, **more) -> None:
    """A browse the worker has finished (its part is tested below)."""
    state = {"requested_at": 1_770_000_000, "done_at": 1_770_000_004, "address": address,
             "instance": instance, "by": "estates", "error": "", "device_name": "Boiler house",
             "vendor_name": "Trend", "model_name": "IQ4", "objects": objects, "truncated": 0,
             **more}  # fmt: skip
    redis_client.set(bacnet_browsing.KEY, json.dumps(state))


def _queued(redis_client) -> bytes:
    return b"".join(redis_client.lrange("ingest", 0, -1))  # sensors.tasks.* go to ingest


ADD = {"address": "192.0.2.40", "instance": "2601", "name": "boiler-house", "interval": "30",
       "point": ["analog-input,1"]}  # fmt: skip


def test_browse_queues_the_object_list_for_the_worker_once_at_a_time(engineer, redis_client):
    client = _login(engineer)
    answer = client.post("/staff/bacnet/browse", {"address": "192.0.2.40", "instance": "2601"},
                         follow=True)  # fmt: skip
    html = answer.content.decode()
    assert "A browse is queued for the worker" in html
    assert "device 2601 at 192.0.2.40 queued at" in html and "waiting for the worker" in html
    assert _queued(redis_client).count(b"sensors.tasks.browse_bacnet") == 1
    again = client.post("/staff/bacnet/browse", {"address": "192.0.2.41", "instance": "1"},
                        follow=True)  # fmt: skip
    assert "A browse is already under way" in again.content.decode()
    assert _queued(redis_client).count(b"sensors.tasks.browse_bacnet") == 1


def test_a_browse_the_worker_never_took_up_stops_blocking_after_its_stale_time(redis_client):
    bacnet_browsing.request("192.0.2.40", 2601, "estates", now=1000.0)
    with pytest.raises(bacnet_browsing.Busy):
        bacnet_browsing.request("192.0.2.40", 2601, "estates", now=1000.0 + 179)
    state = bacnet_browsing.request("192.0.2.41", 7, "estates", now=1000.0 + 180)
    assert (state["address"], state["instance"]) == ("192.0.2.41", 7)


@pytest.mark.parametrize(
    ("form", "message"),
    [({"address": "", "instance": "1"}, "address: give the controller&#x27;s address"),
     ({"address": "300.1.2.3", "instance": "1"},
      "address: &#x27;300.1.2.3&#x27; is not an IPv4 address"),
     ({"address": "1" * 65, "instance": "1"}, "address: at most 64 characters"),
     ({"address": "192.0.2.40", "instance": "-1"}, "instance: -1 is out of range 0-4194302"),
     ({"address": "192.0.2.40", "instance": "4194303"},
      "instance: 4194303 is out of range 0-4194302"),
     ({"address": "192.0.2.40", "instance": "two"},
      "instance: &#x27;two&#x27; is not a whole number"),
     ({"address": "192.0.2.40", "instance": "9" * 5000},
      "instance: at most 7 digits (0-4194302)"),
     ({"address": "192.0.2.40", "instance": "00000001"},
      "instance: at most 7 digits (0-4194302)")],
)  # fmt: skip
def test_a_bad_browse_is_refused_naming_the_field(engineer, redis_client, form, message):
    answer = _login(engineer).post("/staff/bacnet/browse", form)
    html = answer.content.decode()
    assert answer.status_code == 400 and message in html
    assert "9" * 21 not in html  # 5,000 digits are not echoed back, in words or in the box
    assert f'value="{form["address"]}"' in html  # what was typed stays to be corrected
    assert not redis_client.lrange("ingest", 0, -1)


@pytest.mark.parametrize(("address", "instance"), [("192.0.2.40", "0"),
                                                   ("192.0.2.40:47809", "4194302")])  # fmt: skip
def test_a_browse_at_the_bounds_is_taken(engineer, redis_client, address, instance):
    answer = _login(engineer).post("/staff/bacnet/browse", {"address": address,
                                                            "instance": instance})  # fmt: skip
    assert answer.status_code == 302
    assert bacnet_browsing.last()["instance"] == int(instance)


def test_the_workers_browse_is_kept_for_the_page(redis_client, monkeypatch):
    asked = []

    def browse(address, instance, **kwargs):
        asked.append((address, instance))
        return Browse("Boiler house", "Trend", "IQ4",
                      [ObjectInfo("analog-input", 1, "Boiler flow temperature",
                                  "degrees-celsius")], truncated=5)  # fmt: skip

    monkeypatch.setattr(bacnet_client, "browse", browse)
    bacnet_browsing.request("192.0.2.40", 2601, "estates", now=1000.0)
    state = bacnet_browsing.run("192.0.2.40", 2601, now=1004.0)
    assert asked == [("192.0.2.40", 2601)]
    assert bacnet_browsing.last() == state
    assert state["done_at"] == 1004.0 and state["by"] == "estates" and state["truncated"] == 5
    assert state["objects"] == [{"object_type": "analog-input", "instance": 1,
                                 "name": "Boiler flow temperature", "units": "degrees-celsius",
                                 "description": ""}]  # fmt: skip


def test_a_browse_that_fails_is_kept_in_the_clients_words(engineer, redis_client, monkeypatch):
    def browse(address, instance, **kwargs):
        raise BacnetError("no answer within 3 s")

    monkeypatch.setattr(bacnet_client, "browse", browse)
    bacnet_browsing.request("192.0.2.40", 2601, "estates")
    bacnet_browsing.run("192.0.2.40", 2601)
    html = _login(engineer).get("/staff/bacnet/").content.decode()
    assert "failed</span> no answer within 3 s" in html
    assert 'id="add-controller"' not in html


def test_a_finished_browse_lists_the_objects_to_tick(engineer, redis_client):
    _browsed(redis_client, truncated=7)
    html = _login(engineer).get("/staff/bacnet/").content.decode()
    assert "<strong>Boiler house</strong> (Trend) IQ4 — device 2601 at 192.0.2.40" in html
    assert "2 objects, and 7 more not read (at most 2,000)." in html
    assert 'value="analog-input,1"' in html and "Flow sensor after the boiler" in html
    assert "<td>degrees-celsius</td>" in html
    assert "data-live-keep" in html  # the live update leaves the ticks alone
    live = _login(engineer).get("/staff/bacnet/?live=1").json()
    assert "Boiler house" in live["regions"]["browse"]


def test_an_engineer_adds_the_browsed_controller_with_its_ticked_points_audited(
    engineer, redis_client
):
    _browsed(redis_client)
    answer = _login(engineer).post("/staff/bacnet/add", ADD, follow=True)
    html = answer.content.decode()
    assert "boiler-house added: 1 point recorded, polled every 30 s." in html
    device = BacnetDevice.objects.get(node__name="boiler-house")
    assert (device.address, device.device_instance, device.vendor_name) == ("192.0.2.40", 2601,
                                                                            "Trend")  # fmt: skip
    assert device.node.protocol == Node.Protocol.BACNET and device.node.interval == 30
    assert [(p.ref, p.name, p.units) for p in device.points.all()] == [
        ("analog-input,1", "Boiler flow temperature", "degrees-celsius")
    ]
    sensor = Sensor.objects.get(node=device.node)
    assert (sensor.key, sensor.name, sensor.unit) == ("analog-input-1",
                                                      "Boiler flow temperature", "°C")  # fmt: skip
    entry = LogEntry.objects.get(object_id=str(device.pk))
    assert entry.action_flag == ADDITION and entry.user == engineer
    assert entry.change_message == (
        "Added device 2601 at 192.0.2.40, polled every 30 s, with points analog-input,1 "
        "'Boiler flow temperature' (staff BACnet page)."
    )
    assert bacnet_browsing.last() is None  # the list served; the controller is listed instead
    assert f'id="controller-{device.pk}"' in html


def test_adding_to_a_recorded_controller_adds_the_new_points_as_a_change(engineer, redis_client):
    device = add_device("boiler-house", "192.0.2.40", 2601, interval=30)
    _browsed(redis_client)
    form = {**ADD, "point": ["analog-input,1", "binary-output,1"], "interval": "60"}
    assert _login(engineer).post("/staff/bacnet/add", form).status_code == 302
    _browsed(redis_client)
    form = {**ADD, "point": ["binary-output,1", "binary-output,1"], "interval": "60"}
    answer = _login(engineer).post("/staff/bacnet/add", form, follow=True)
    assert "boiler-house updated: 0 points recorded, polled every 60 s; already recorded: " \
           "binary-output,1 (as binary-output-1)." in answer.content.decode()  # fmt: skip
    _browsed(redis_client)
    form = {**ADD, "point": ["binary-output,1"], "interval": "90"}
    assert _login(engineer).post("/staff/bacnet/add", form).status_code == 302
    assert sorted(p.ref for p in device.points.all()) == ["analog-input,1", "binary-output,1"]
    messages = list(LogEntry.objects.filter(object_id=str(device.pk), action_flag=CHANGE)
                    .order_by("pk").values_list("change_message", flat=True))  # fmt: skip
    assert messages == [  # the Add that changed nothing left nothing
        "Set device 2601 at 192.0.2.40, polled every 60 s; added points analog-input,1 'Boiler "
        "flow temperature', binary-output,1 'Boiler enable' (staff BACnet page).",
        "Set device 2601 at 192.0.2.40, polled every 90 s; added points none new "
        "(staff BACnet page).",
    ]


def test_browsing_a_recorded_controller_offers_its_name_interval_and_new_objects_only(
    engineer, redis_client
):
    device = add_device("boiler-house", "192.0.2.40:47808", 2601, interval=120)
    device.points.create(key="analog-input-1", object_type="analog-input", instance=1)
    _browsed(redis_client)
    html = _login(engineer).get("/staff/bacnet/").content.decode()
    assert "Recorded as <strong>boiler-house</strong>, polled every 120 s, with 1 point" in html
    assert '<span class="muted recorded">recorded as analog-input-1</span>' in html
    assert 'value="analog-input,1"' not in html  # not tickable
    assert 'name="point" value="binary-output,1"' in html
    assert 'id="add-name" name="name" maxlength="64" placeholder="boiler-house" ' \
           'value="boiler-house"' in html  # fmt: skip
    assert 'name="interval" type="number" min="5" max="86400" value="120"' in html

    answer = _login(engineer).post("/staff/bacnet/add", {
        **ADD, "address": "192.0.2.40", "interval": "120",
        "point": ["analog-input,1", "binary-output,1"]}, follow=True)  # fmt: skip
    assert "boiler-house updated: 1 point recorded, polled every 120 s; already recorded: " \
           "analog-input,1 (as analog-input-1)." in answer.content.decode()  # fmt: skip
    device.node.refresh_from_db()
    assert device.node.interval == 120


def test_browsing_a_controller_not_recorded_offers_every_object_and_a_blank_name(
    engineer, redis_client
):
    add_device("other-house", "192.0.2.40", 2602, interval=120)  # another instance
    _browsed(redis_client)
    html = _login(engineer).get("/staff/bacnet/").content.decode()
    assert "Recorded as" not in html and "recorded as analog-input-1" not in html
    assert 'name="point" value="analog-input,1"' in html
    assert 'placeholder="boiler-house" value=""' in html
    assert 'max="86400" value="30" required' in html


@pytest.mark.parametrize(
    ("change", "message"),
    [({"name": " "}, "name: give the controller a node name"),
     ({"interval": "4"}, "interval: 4 s is outside 5-86400 s"),
     ({"interval": "86401"}, "interval: 86401 s is outside 5-86400 s"),
     ({"interval": "half"}, "interval: &#x27;half&#x27; is not a whole number of seconds"),
     ({"point": []}, "point: tick at least one object to record"),
     ({"point": ["analog-input,9"]}, "point: the controller&#x27;s list has no analog-input,9"),
     ({"point": [f"analog-value,{i}" for i in range(201)]},
      "point: at most 200 points per controller"),
     ({"address": "192.0.2.41"}, "point: browse device 2601 at 192.0.2.41 first"),
     ({"instance": "4194303"}, "instance: 4194303 is out of range"),
     ({"instance": "9" * 5000}, "instance: at most 7 digits (0-4194302)"),
     ({"interval": "9" * 5000}, f"interval: &#x27;{'9' * 20}…&#x27; is not a whole number"),
     ({"interval": ""}, "interval: give the seconds between polls, 5-86400 s"),
     ({"name": "x" * 65}, "name: Ensure this value has at most 64 characters")],
)  # fmt: skip
def test_a_bad_add_is_refused_naming_the_field_and_stores_nothing(
    engineer, redis_client, change, message
):
    _browsed(redis_client)
    answer = _login(engineer).post("/staff/bacnet/add", {**ADD, **change})
    assert answer.status_code == 400
    html = answer.content.decode()
    assert f'id="add-error">{message}' in html, html[html.find("errorlist") :][:300]
    assert not Node.objects.exists() and not LogEntry.objects.exists()
    assert bacnet_browsing.last() is not None  # the list stays to be corrected


def test_a_refused_add_keeps_what_was_typed_and_ticked(engineer, redis_client):
    _browsed(redis_client)
    answer = _login(engineer).post("/staff/bacnet/add", {**ADD, "interval": "4"})
    html = answer.content.decode()
    assert 'name="point" value="analog-input,1" id="pick-1" aria-label="Record analog-input,1" ' \
           "checked" in html  # fmt: skip
    assert 'value="boiler-house"' in html and 'value="4"' in html


def test_a_name_another_kind_of_node_has_is_refused_naming_it(engineer, redis_client):
    Node.objects.create(name="boiler-house", protocol=Node.Protocol.HTTP, key_hash="x")
    _browsed(redis_client)
    answer = _login(engineer).post("/staff/bacnet/add", ADD)
    assert answer.status_code == 400
    assert "name: node &#x27;boiler-house&#x27; exists and is not a BACnet controller" in (
        answer.content.decode()
    )


def test_the_interval_name_and_points_bounds_are_taken(engineer, redis_client):
    objects = [{"object_type": "analog-value", "instance": i, "name": f"v{i}", "units": "",
                "description": ""} for i in range(200)]  # fmt: skip
    _browsed(redis_client, objects)
    form = {**ADD, "interval": "5", "point": [f"analog-value,{i}" for i in range(200)]}
    assert _login(engineer).post("/staff/bacnet/add", form).status_code == 302
    assert BacnetDevice.objects.get().points.count() == 200
    _browsed(redis_client, address="192.0.2.50", instance=7)
    form = {**ADD, "address": "192.0.2.50", "instance": "7", "name": "c" * 64,
            "interval": "86400", "point": ["analog-input,1"]}  # fmt: skip
    assert _login(engineer).post("/staff/bacnet/add", form).status_code == 302
    assert Node.objects.get(name="c" * 64).interval == 86400


def test_a_point_past_the_bound_with_those_a_controller_has_is_refused(engineer, redis_client):
    device = add_device("boiler-house", "192.0.2.40", 2601, interval=30)
    device.points.bulk_create(
        device.points.model(
            device=device, key=f"analog-value-{i}", object_type="analog-value", instance=i
        )
        for i in range(200)  # fmt: skip
    )
    _browsed(redis_client)
    answer = _login(engineer).post("/staff/bacnet/add", ADD)
    assert answer.status_code == 400
    assert "point: 201 points: a controller is polled for at most 200" in answer.content.decode()
    assert device.points.count() == 200 and not LogEntry.objects.exists()


def test_a_viewer_sees_the_list_without_buttons_and_a_hand_made_post_is_refused(
    viewer, redis_client
):
    _browsed(redis_client)
    redis_client.set("sensors:bacnet-discovery", json.dumps({
        "requested_at": 1, "done_at": 2, "target": "", "by": "estates", "error": "",
        "found": [{"instance": 2601, "address": "192.0.2.40", "vendor_id": 5}]}))  # fmt: skip
    client = _login(viewer)
    html = client.get("/staff/bacnet/").content.decode()
    assert "Boiler flow temperature" in html  # the list is read, not acted on
    assert 'id="browse-controller"' not in html and "browse-found" not in html
    assert 'name="point"' not in html and ">Add</button>" not in html
    assert client.post("/staff/bacnet/browse", {"address": "192.0.2.40",
                                                "instance": "2601"}).status_code == 403  # fmt: skip
    assert client.post("/staff/bacnet/add", ADD).status_code == 403
    assert not Node.objects.exists() and not _queued(redis_client)


def test_an_engineer_browses_a_discovered_controller_with_one_button(engineer, redis_client):
    redis_client.set("sensors:bacnet-discovery", json.dumps({
        "requested_at": 1, "done_at": 2, "target": "", "by": "estates", "error": "",
        "found": [{"instance": 2601, "address": "192.0.2.40", "vendor_id": 5}]}))  # fmt: skip
    html = _login(engineer).get("/staff/bacnet/").content.decode()
    assert 'name="address" value="192.0.2.40"><input type="hidden" name="instance" ' \
           'value="2601"><button id="browse-2601">Browse</button>' in html  # fmt: skip
