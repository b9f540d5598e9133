"""BACnet/IP against an independent controller: bac-py (tests/sensors/bacnet_controller.py), a
stack other than our bacpypes3, in its own process on its own loopback address. Discover it,
record its analogue input into a feed, command its binary output at priority 8 with read-back,
relinquish and see its own value return, lose it and see the alarm, get it back and see the
alarm clear."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from alarms.models import Alarm
from control.models import ActuatorCommand
from feeds.models import Feed
from feeds.store import service
from sensors.devices import bacnet_client
from sensors.devices.bacnet_client import BacnetError
from sensors.models import (
    BACNET_MAX_INTERVAL_S,
    BACNET_MAX_POINTS_PER_DEVICE,
    Actuator,
    BacnetDevice,
    Sensor,
)
from sensors.tasks import poll_bacnet_device, poll_bacnet_devices
from tests.sensors import bacnet_peer
from tests.sensors.bacnet_peer import INSTANCE, OUR_HOST, PEER_HOST, free_udp_port

controller = bacnet_peer.controller  # the fixture: the controller as a real process


def test_discovery_finds_the_controller_and_its_range_filter_excludes_it(controller, settings):
    local = f"{OUR_HOST}/32:{settings.BMS_BACNET_PORT}"
    found = bacnet_client.discover(controller.address, local=local, client_instance=4194000)
    assert [(f.instance, f.address) for f in found] == [(INSTANCE, controller.address)]
    outside = bacnet_client.discover(
        controller.address, low=1, high=INSTANCE - 1, local=local, client_instance=4194000
    )
    assert outside == []


def test_the_discover_and_browse_commands_show_what_an_engineer_needs(controller, capsys):
    call_command("bacnet", "discover", "--target", controller.address, "--wait", "1")
    assert f"device {INSTANCE} at {controller.address}" in capsys.readouterr().out
    call_command("bacnet", "browse", controller.address, str(INSTANCE))
    out = capsys.readouterr().out
    assert "Boiler house controller" in out
    assert "analog-input,1  Boiler flow temperature [degrees-celsius] — Flow sensor" in out
    assert "binary-output,1  Boiler enable — Boiler enable relay" in out


def test_a_controllers_own_words_are_shown_on_one_line_without_its_control_characters(
    settings, redis_client
):
    """A device's name is its to choose: a line break, a terminal escape or a bidi override in
    it would forge a line in the engineer's terminal or the worker's log, or print the staff
    page's line backwards (a fresh-eyes tester's controller did)."""
    our_port = free_udp_port(OUR_HOST)
    settings.BMS_BACNET_ADDRESS = f"{OUR_HOST}/32"
    settings.BMS_BACNET_PORT = our_port
    peer = bacnet_peer.Controller(free_udp_port(PEER_HOST), f"{OUR_HOST}:{our_port}",
                      name="Boiler\u202e house\n\x1b[31mFORGED LINE")  # fmt: skip
    peer.start()
    try:
        shown = io.StringIO()
        call_command("bacnet", "browse", peer.address, str(INSTANCE), stdout=shown)
        out = shown.getvalue()
        found = bacnet_client.browse(
            peer.address, INSTANCE, local=f"{OUR_HOST}/32:{free_udp_port(OUR_HOST)}",
            client_instance=4194000,
        )  # fmt: skip
    finally:
        peer.stop()
    assert found.device_name == "Boiler house [31mFORGED LINE"
    assert "Boiler house [31mFORGED LINE" in out
    assert not {"\x1b", "\u202e"} & set(out) and "\nFORGED" not in out


@pytest.mark.django_db
def test_an_analog_input_is_recorded_into_a_feed_and_loss_raises_an_alarm_that_clears(
    controller, redis_client
):
    call_command("bacnet", "add", "boiler-house", controller.address, str(INSTANCE),
                 "--point", "analog-input,1", "--interval", "10")  # fmt: skip
    device = BacnetDevice.objects.get(node__name="boiler-house")
    sensor = Sensor.objects.get(node=device.node, key="analog-input-1")
    assert (sensor.name, sensor.unit) == ("Boiler flow temperature", "°C")
    sensor.feed = Feed.objects.create(name="boiler flow", tag="boiler-house", interval=10)
    sensor.save()

    assert poll_bacnet_devices() == [device.node_id]
    assert poll_bacnet_devices() == []  # not due again within its interval
    redis_client.flushdb()  # drop the queued task; run the poll here instead
    report = poll_bacnet_device(device.node_id)
    assert report["values"] == {"analog-input-1": 61.5}
    assert service.last_value(sensor.feed_id)[1] == 61.5

    controller.stop()
    poll_bacnet_device(device.node_id)
    alarm_key = f"bacnet-device:{device.node_id}"
    assert not Alarm.objects.filter(key=alarm_key).exists()  # one miss is not yet an alarm
    poll_bacnet_device(device.node_id)
    alarm = Alarm.objects.get(key=alarm_key, cleared_at=None)
    assert alarm.message.startswith(  # the request's own timeout, not the poll's deadline
        f"BACnet controller boiler-house (device {INSTANCE} at {controller.address}) not "
        f"answering: no answer within {device.timeout_s:g} s"
    )

    controller.start()
    poll_bacnet_device(device.node_id)
    alarm.refresh_from_db()
    assert alarm.cleared_at is not None


@pytest.mark.django_db
def test_a_point_the_controller_refuses_is_alarmed_in_its_words(controller, redis_client):
    call_command("bacnet", "add", "boiler-house", controller.address, str(INSTANCE),
                 "--point", "analog-input,1")  # fmt: skip
    device = BacnetDevice.objects.get(node__name="boiler-house")
    device.points.create(key="analog-input-7", object_type="analog-input", instance=7)
    for _ in range(2):
        report = poll_bacnet_device(device.node_id)
    assert report["values"] == {"analog-input-1": 61.5}  # the good point still lands
    alarm = Alarm.objects.get(key=f"bacnet-point:{device.node_id}:analog-input-7")
    assert "the controller answered 'object: unknown-object'" in alarm.message
    assert not Alarm.objects.filter(key=f"bacnet-device:{device.node_id}").exists()


@pytest.mark.django_db
def test_the_binary_output_is_commanded_at_priority_8_read_back_and_relinquished(
    controller, capsys
):
    call_command("bacnet", "add", "boiler-house", controller.address, str(INSTANCE))
    call_command("bacnet_output", "boiler-enable", "--controller", "boiler-house",
                 "--object", "binary-output,1")  # fmt: skip
    actuator = Actuator.objects.get(name="boiler-enable")
    assert (actuator.driver, actuator.bacnet_priority) == ("bacnet", 8)

    call_command("bacnet_output", "boiler-enable", "--status")
    # The controller's own time programme holds it ON at priority 16.
    assert "is ON, held by priority 16; our priority 8 holds NULL" in capsys.readouterr().out

    call_command("bacnet_output", "boiler-enable", "--off", "--reason", "Boiler service")
    out = capsys.readouterr().out
    assert "is OFF, held by priority 8; our priority 8 holds OFF" in out
    off = ActuatorCommand.objects.get(reason="Commanded by hand: Boiler service")
    assert (off.state, off.error) == (False, "")
    assert off.sent_at is not None and off.confirmed_at is not None

    call_command("bacnet_output", "boiler-enable", "--release", "--reason", "Service done")
    assert "is ON, held by priority 16; our priority 8 holds NULL" in capsys.readouterr().out
    released = ActuatorCommand.objects.latest("pk")
    assert released.reason == "Released (NULL at priority 8): Service done"
    assert released.confirmed_at is not None


@pytest.mark.django_db
def test_a_higher_priority_holding_the_point_is_a_fault_not_a_confirmation(controller):
    call_command("bacnet", "add", "boiler-house", controller.address, str(INSTANCE))
    call_command("bacnet_output", "hand-switch", "--controller", "boiler-house",
                 "--object", "binary-output,1", "--priority", "2")  # fmt: skip
    call_command("bacnet_output", "hand-switch", "--on", "--reason", "Hand switch at 2")
    call_command(
        "bacnet_output",
        "boiler-enable",
        "--controller",
        "boiler-house",
        "--object",
        "binary-value,1",
    )  # fmt: skip  (another object: no clash)
    actuator = Actuator.objects.get(name="boiler-enable")
    actuator.bacnet_object = "binary-output,1"
    actuator.enabled = True
    Actuator.objects.filter(name="hand-switch").update(enabled=False)
    actuator.save()
    with pytest.raises(CommandError, match="priority 2 holds binary-output,1 at ON"):
        call_command("bacnet_output", "boiler-enable", "--off", "--reason", "Try at 8")
    row = ActuatorCommand.objects.latest("pk")
    assert row.confirmed_at is None and "not in force until it is released" in row.error
    call_command("bacnet_output", "hand-switch", "--release", "--reason", "Hand switch back")


@pytest.mark.django_db
def test_a_commanded_output_needs_a_reason_and_two_actuators_may_not_share_it(controller):
    call_command("bacnet", "add", "boiler-house", controller.address, str(INSTANCE))
    call_command("bacnet_output", "boiler-enable", "--controller", "boiler-house",
                 "--object", "binary-output,1")  # fmt: skip
    with pytest.raises(CommandError, match="--reason"):
        call_command("bacnet_output", "boiler-enable", "--on")
    with pytest.raises(CommandError, match="already driven by actuator 'boiler-enable'"):
        call_command("bacnet_output", "second", "--controller", "boiler-house",
                     "--object", "binary-output,1")  # fmt: skip
    with pytest.raises(CommandError, match="Only binary-output and binary-value"):
        call_command("bacnet_output", "third", "--controller", "boiler-house",
                     "--object", "analog-input,1")  # fmt: skip
    assert not ActuatorCommand.objects.exists()


def test_a_controller_that_is_not_there_times_out_within_its_deadline():
    with pytest.raises(BacnetError, match=r"^no answer within 1 s$"):
        bacnet_client.read_present_values(
            f"{PEER_HOST}:{free_udp_port(PEER_HOST)}", ["analog-input,1"],
            local=f"{OUR_HOST}/32:0", client_instance=4194000, timeout_s=5, deadline_s=1,
        )  # fmt: skip


def test_the_error_names_the_requests_own_timeout_when_that_expired_first():
    # #31: it said "no answer within 20 s" (the whole read's deadline) after 0.5 s.
    with pytest.raises(BacnetError, match=r"^no answer within 0.5 s$"):
        bacnet_client.read_present_values(
            f"{PEER_HOST}:{free_udp_port(PEER_HOST)}", ["analog-input,1"],
            local=f"{OUR_HOST}/32:0", client_instance=4194000, timeout_s=0.5, deadline_s=20,
        )  # fmt: skip
    with pytest.raises(BacnetError, match=r"^no answer within 0.5 s$"):
        bacnet_client.browse(f"{PEER_HOST}:{free_udp_port(PEER_HOST)}", 1,
                             local=f"{OUR_HOST}/32:0", client_instance=4194000, timeout_s=0.5)  # fmt: skip


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ("analog-input,4194302", None),
        ("analog-input,4194303", "out of range 0-4194302"),
        ("device,1", "is not one of"),
        ("analog-input,x", "not a number"),
    ],
)
def test_object_references_are_bounded(ref, message):
    if message is None:
        assert bacnet_client.parse_object(ref) == ("analog-input", 4194302)
    else:
        with pytest.raises(ValueError, match=message):
            bacnet_client.parse_object(ref)


@pytest.mark.parametrize(("priority", "ok"), [(0, False), (1, True), (16, True), (17, False)])
def test_priorities_are_bounded_to_the_array(priority, ok):
    if ok:
        assert bacnet_client.check_priority(priority) == priority
    else:
        with pytest.raises(ValueError, match="out of range 1-16"):
            bacnet_client.check_priority(priority)


@pytest.mark.django_db
def test_points_per_controller_and_poll_interval_are_bounded(controller):
    from sensors.devices.bacnet_devices import add_device, map_points

    with pytest.raises(ValueError, match="below the 5 s bound"):
        add_device("too-fast", controller.address, INSTANCE, interval=4)
    device = add_device("big", controller.address, INSTANCE, interval=5)
    many = [
        bacnet_client.ObjectInfo("analog-value", n) for n in range(BACNET_MAX_POINTS_PER_DEVICE)
    ]
    assert len(map_points(device, many)) == BACNET_MAX_POINTS_PER_DEVICE
    with pytest.raises(ValueError, match="at most 200"):
        map_points(device, [bacnet_client.ObjectInfo("analog-value", 9999)])


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--interval", "4"], "below the 5 s bound"),
        (["--interval", "86401"], "interval 86401 s is above the 86400 s bound"),
        (["--name", "roomnode"], "exists and is not a BACnet controller"),
        (["--instance", "4194303"], "device_instance"),
        (["--address", "192.0.2.40:70000"], "port"),
        (["--duplicate"], "already recorded"),
    ],
)
def test_bacnet_add_refuses_bad_arguments_before_asking_the_network(args, message, monkeypatch):
    """A typing slip is refused at once, not after a browse of the controller has waited out
    its timeout (#31 fresh-eyes: `bacnet add` probed the network first)."""
    from sensors.devices.bacnet_devices import add_device
    from sensors.models import Node

    def no_network(*a, **k):
        raise AssertionError("the network was asked before the arguments were checked")

    monkeypatch.setattr(bacnet_client, "browse", no_network)
    node = Node(name="roomnode")
    node.set_new_key()
    node.save()
    name, address, instance, interval = "boiler-house", "192.0.2.40", "2601", "30"
    if args == ["--duplicate"]:
        add_device("old-name", address, int(instance))
    elif args[0] == "--name":
        name = args[1]
    elif args[0] == "--instance":
        instance = args[1]
    elif args[0] == "--address":
        address = args[1]
    elif args[0] == "--interval":
        interval = args[1]
    with pytest.raises(CommandError, match=message):
        call_command("bacnet", "add", name, address, instance, "--interval", interval,
                     "--point", "analog-input,1")  # fmt: skip
    assert not BacnetDevice.objects.filter(node__name=name).exists()


@pytest.mark.django_db
def test_bacnet_add_takes_the_interval_at_its_upper_bound_and_adds_points_to_a_controller_kept(
    controller, capsys
):
    """`bacnet add` of a controller already recorded adds its points (it answered "id: Bacnet
    device with this ID already exists."), and the interval's upper bound is the API's."""
    call_command("bacnet", "add", "boiler-house", controller.address, str(INSTANCE),
                 "--point", "analog-input,1", "--interval", str(BACNET_MAX_INTERVAL_S))  # fmt: skip
    call_command("bacnet", "add", "boiler-house", controller.address, str(INSTANCE),
                 "--point", "analog-output,1", "--interval", "30")  # fmt: skip
    device = BacnetDevice.objects.get(node__name="boiler-house")
    assert sorted(device.points.values_list("key", flat=True)) == [
        "analog-input-1", "analog-output-1",
    ]  # fmt: skip
    assert device.node.interval == 30
    assert "polled every 86400 s" in capsys.readouterr().out
    # A real conflict, in plain words: the same controller under another name.
    with pytest.raises(CommandError, match=f"device {INSTANCE} at .* is already recorded as "
                                           "boiler-house"):  # fmt: skip
        call_command("bacnet", "add", "boiler-house-2", controller.address, str(INSTANCE),
                     "--point", "analog-input,1")  # fmt: skip


@pytest.mark.django_db
def test_a_shortened_poll_interval_takes_effect_at_the_next_beat(
    engineer_api, redis_client, monkeypatch
):
    """The API's PATCH of interval 3600 -> 5 waited out the old hour before the next poll
    (#31 outside tester). Time passes on the claim's own clock: its time-to-live, set here."""
    from sensors.tasks import bacnet_due_key

    queued: list[int] = []
    monkeypatch.setattr(poll_bacnet_device, "delay", queued.append)
    device = {"name": "boiler-house", "address": "192.0.2.40", "device_instance": 2601,
              "interval": 3600}  # fmt: skip
    device_id = engineer_api.post("/api/v1/bacnet-devices", device, format="json").json()["id"]
    node_id = BacnetDevice.objects.get(pk=device_id).node_id
    key = bacnet_due_key(node_id)
    claimed_ms = 3600 * 1000 - 500

    def passed(ms: int) -> None:  # the claim as it is `ms` after it was made
        redis_client.pexpire(key, claimed_ms - ms)

    assert poll_bacnet_devices() == [node_id]
    passed(60_000)
    assert poll_bacnet_devices() == []  # an hour's interval: not due after a minute
    patched = engineer_api.patch(f"/api/v1/bacnet-devices/{device_id}", {"interval": 5},
                                 format="json")  # fmt: skip
    assert patched.status_code == 200
    # 4.5 s (the new claim: just under the interval) since the last poll: due at the next beat.
    passed(4500)
    assert poll_bacnet_devices() == [node_id]
    # Then every 5 s, not sooner. (Not due is checked a second clear of the bound: the claim's
    # time-to-live runs on while the test looks.)
    claimed_ms = 4500
    passed(3500)
    assert poll_bacnet_devices() == []
    passed(4500)
    assert poll_bacnet_devices() == [node_id]
    # Lengthened: from the next claim (the 5 s one runs out first).
    engineer_api.patch(f"/api/v1/bacnet-devices/{device_id}", {"interval": 3600},
                       format="json")  # fmt: skip
    passed(4500)
    assert poll_bacnet_devices() == [node_id]
    # Shortened again 3 s into the hour: not due until 4.5 s have passed since that poll.
    claimed_ms = 3600 * 1000 - 500
    passed(3000)
    engineer_api.patch(f"/api/v1/bacnet-devices/{device_id}", {"interval": 5}, format="json")
    assert poll_bacnet_devices() == []
    claimed_ms = 4500  # the claim is cut to the 5 s one, 3 s of it gone
    assert int(redis_client.get(key)) == claimed_ms
    passed(3500)
    assert poll_bacnet_devices() == []
    passed(4500)
    assert poll_bacnet_devices() == [node_id]
    assert queued == [node_id] * 5
