"""Per-sender bounds of the site's BACnet device (control/bacnet_server.py): BACnet has no
authentication, so one chatty or hostile head-end must not starve the others of COV
subscriptions or of writes. Driven by the independent bac-py client
(tests/control/bacnet_peer_client.py) from two loopback addresses, two senders; the write
window itself on a clock the test controls."""

from __future__ import annotations

import pytest
from bacpypes3.pdu import Address

from control.bacnet_server import (
    MAX_SENDERS,
    WRITE_WINDOW_S,
    SiteDevice,
    WriteRate,
    ZonePoint,
    sender_of,
)
from control.models import Override
from tests.sensors.bacnet_peer import OUR_HOST, PEER_HOST, free_udp_port

from . import factories as f
from .test_bacnet_server_cov import Subscriber
from .test_bacnet_writes import peer_while_deciding, served

OTHER_HOST = "127.0.0.4"  # a second head-end, on an address of its own


def start(**bounds: int) -> SiteDevice:
    port = free_udp_port(OUR_HOST)
    site = SiteDevice(f"{OUR_HOST}/32:{port}", 4194001, "Test site", **bounds)
    site.start()
    site.address = f"{OUR_HOST}:{port}"
    return site


@pytest.fixture
def bounded():
    made: list[SiteDevice] = []

    def make(**bounds: int) -> SiteDevice:
        made.append(start(**bounds))
        return made[-1]

    yield make
    for site in made:
        site.stop()


# The write window, on the test's clock.


def test_a_sender_has_its_writes_per_minute_then_is_refused_until_the_window_moves_on():
    rate = WriteRate(per_minute=3)
    assert [rate.allow("10.0.0.5", t) for t in (0.0, 1.0, 2.0)] == [True, True, True]
    assert rate.allow("10.0.0.5", 59.9) is False  # the fourth within the minute
    assert rate.allow("10.0.0.9", 59.9) is True  # another sender is not held back by it
    # The first write (at 0) leaves the window at exactly WRITE_WINDOW_S, not before.
    assert rate.allow("10.0.0.5", WRITE_WINDOW_S - 0.001) is False
    assert rate.allow("10.0.0.5", WRITE_WINDOW_S) is True
    assert rate.allow("10.0.0.5", WRITE_WINDOW_S + 0.5) is False  # 1, 2 and 60 in the window
    # A refused write is not counted: once the window has room the sender has it again.
    assert rate.allow("10.0.0.5", 61.0) is True


def test_the_senders_tracked_are_bounded_the_least_recently_heard_dropped():
    rate = WriteRate(per_minute=1, max_senders=3)
    for t, sender in enumerate(["a", "b", "c", "a"]):
        rate.allow(sender, float(t))
    assert rate.allow("d", 4.0) is True
    assert rate.senders() == ["c", "a", "d"]  # b, heard from least recently, dropped
    # At the bound still: "a" is held to its one write, a new one drops "c".
    assert rate.allow("a", 5.0) is False
    assert rate.allow("e", 5.0) is True
    assert rate.senders() == ["d", "a", "e"]
    assert MAX_SENDERS == 256


def test_a_sender_is_its_host_whatever_its_source_port():
    assert sender_of(Address("192.168.50.31:50123")) == "192.168.50.31"
    assert sender_of(Address("192.168.50.31")) == "192.168.50.31"
    # A station behind a BACnet router: its network and MAC name it.
    assert sender_of(Address("5:12")) == "5:12"


# Through the independent client.


@pytest.mark.django_db
def test_writes_past_a_senders_rate_are_refused_busy_and_other_senders_still_write(
    redis_client, bounded, caplog
):
    device = bounded(writes_per_minute=3)
    hall = f.zone("Hall", temp=18.5, bacnet_setpoint_writable=True)
    served(device)
    ref = f"analog-value,{hall.pk}"
    # Two client processes: two source ports, one sender.
    first = peer_while_deciding(device, "--write", f"{ref}=21", "--write", f"{ref}=21.5")
    second = peer_while_deciding(device, "--write", f"{ref}=22", "--write", f"{ref}=22.5")
    assert [a.get("error") for a in first + second] == [None, None, None, "device: device_busy"]
    # The bound does not starve another head-end.
    other = peer_while_deciding(device, "--interface", OTHER_HOST, "--write", f"{ref}=19")
    assert other == [{"write": ref, "ok": True}]
    # Each accepted write is still audited with its writer's address; the refused one is not.
    reasons = list(Override.objects.order_by("pk").values_list("reason", flat=True))
    assert [r.split(":")[0] for r in reasons] == [f"BACnet write from {PEER_HOST}"] * 3 + [
        f"BACnet write from {OTHER_HOST}"
    ]
    assert [r.rsplit(": ", 1)[1] for r in reasons] == [
        "setpoint 21 °C", "setpoint 21.5 °C", "setpoint 22 °C", "setpoint 19 °C",
    ]  # fmt: skip
    refused = [r.getMessage() for r in caplog.records if "more than 3 writes" in r.getMessage()]
    assert len(refused) == 1 and f"from {PEER_HOST}" in refused[0]


def test_a_senders_share_of_the_subscriptions_is_bounded_and_another_sender_still_subscribes(
    bounded, caplog
):
    device = bounded(max_subscriptions=4, subscriptions_per_sender=2)
    device.update([ZonePoint(7, "Hall", 18.5, 20.0, False, False)])
    refs = ["analog-input,7", "binary-value,7", "analog-value,7"]
    greedy = Subscriber(device.address, *[a for r in refs for a in ("--subscribe", r)])
    try:
        assert greedy.take(3) == [
            {"subscribe": "analog-input,7", "ok": True},
            {"subscribe": "binary-value,7", "ok": True},  # the sender's share: the bound
            {"subscribe": "analog-value,7", "error": "resources: no_space_to_add_list_element"},
        ]
    finally:
        greedy.close()
    other = Subscriber(
        device.address, "--interface", OTHER_HOST,
        *[a for r in refs for a in ("--subscribe", r)],
    )  # fmt: skip
    try:
        assert [a.get("ok") for a in other.take(3)] == [True, True, None]  # its own two
    finally:
        other.close()
    refused = [r.getMessage() for r in caplog.records if "at most 2 a sender" in r.getMessage()]
    assert len(refused) == 2
    assert f"held by {PEER_HOST}" in refused[0] and f"held by {OTHER_HOST}" in refused[1]


def test_the_total_still_bounds_subscriptions_below_each_senders_share(bounded):
    device = bounded(max_subscriptions=3, subscriptions_per_sender=2)
    device.update([ZonePoint(7, "Hall", 18.5, 20.0, False, False)])
    one = Subscriber(device.address, "--subscribe", "analog-input,7", "--subscribe",
                     "binary-value,7")  # fmt: skip
    try:
        assert [a.get("ok") for a in one.take(2)] == [True, True]
    finally:
        one.close()
    two = Subscriber(device.address, "--interface", OTHER_HOST, "--subscribe", "analog-input,7",
                     "--subscribe", "binary-value,7")  # fmt: skip
    try:
        assert two.take(2) == [
            {"subscribe": "analog-input,7", "ok": True},  # the third: the total's bound
            {"subscribe": "binary-value,7", "error": "resources: no_space_to_add_list_element"},
        ]
    finally:
        two.close()


def test_the_command_takes_the_per_sender_bounds_from_the_settings(settings, monkeypatch):
    from django.core.management import call_command

    settings.BMS_BACNET_SERVER_ENABLED = True
    settings.BMS_BACNET_ADDRESS = f"{OUR_HOST}/32"
    settings.BMS_BACNET_SERVER_PORT = free_udp_port(OUR_HOST)
    settings.BMS_BACNET_SERVER_SUBSCRIPTIONS_PER_SENDER = 7
    settings.BMS_BACNET_SERVER_WRITES_PER_MINUTE = 600
    made: list[SiteDevice] = []
    original = SiteDevice.__init__

    def remember(self, *args, **kwargs) -> None:
        original(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(SiteDevice, "__init__", remember)
    monkeypatch.setattr("control.management.commands.bacnet_server.zone_points", list)
    call_command("bacnet_server", "--once")
    assert [(d.subscriptions_per_sender, d._write_rate.per_minute) for d in made] == [(7, 600)]
