"""Per-sender bounds of the site's BACnet device (control/bacnet_server.py): BACnet has no
authentication, so one chatty or hostile head-end must not starve the others of COV
subscriptions or of writes. Driven by the independent bac-py client
(tests/control/bacnet_peer_client.py) from two loopback addresses, two senders; the write
window itself on a clock the test controls."""

from __future__ import annotations

import socket
import struct

import pytest
from bacpypes3.pdu import Address, RemoteStation

from control import bacnet_writes
from control.bacnet_server import (
    MALFORMED_LINES_PER_MINUTE,
    MALFORMED_WINDOW_S,
    MAX_MAC_SHOWN,
    MAX_SENDERS,
    WRITE_WINDOW_S,
    SiteDevice,
    WriteRate,
    ZonePoint,
    name_of,
    sender_of,
)
from control.models import Override
from core.log_budget import LibraryLineBudget, LineBudget
from tests.sensors.bacnet_peer import OUR_HOST, PEER_HOST, free_udp_port

from . import bacnet_raw as raw
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
    # A station behind a BACnet router: the router's host, the one the datagram came from.
    routed = Address("5:12")
    routed.addrRoute = Address("192.168.50.1:47808")
    assert sender_of(routed) == "192.168.50.1"
    # Without its route (never so from the server's stack): its network and MAC.
    assert sender_of(Address("5:12")) == "5:12"


def test_a_sender_is_named_with_its_port_always_and_where_it_really_came_from():
    # bacpypes3 leaves 47808 out of an address and shows any other port: the docs show it always.
    assert name_of(Address("192.168.50.31")) == "192.168.50.31:47808"
    assert name_of(Address("192.168.50.31:47810")) == "192.168.50.31:47810"
    routed = RemoteStation(7, b"\x00\x00")
    routed.addrRoute = Address("127.0.0.61:47808")
    assert name_of(routed) == "7:0x0000 via 127.0.0.61:47808"
    # A station's MAC is cut so that the real origin after it always fits the audit.
    long_mac = RemoteStation(7, bytes(range(40)))
    long_mac.addrRoute = Address("127.0.0.61:50000")
    assert name_of(long_mac) == "7:0x0001020304050…" + " via 127.0.0.61:50000"
    assert len("7:0x0001020304050…") == 2 + MAX_MAC_SHOWN
    # A B/IP station behind a router (a 6-octet MAC) as an address, with its port.
    bip = RemoteStation(7, bytes([10, 0, 0, 9, 0xBA, 0xC0]))
    bip.addrRoute = Address("127.0.0.61:47808")
    assert name_of(bip) == "7:10.0.0.9:47808 via 127.0.0.61:47808"


def test_malformed_datagrams_log_their_lines_a_minute_then_count_the_rest():
    budget = LineBudget(per_window=3, window_s=MALFORMED_WINDOW_S)
    assert [budget.take(t) for t in (0.0, 1.0, 2.0)] == [0, 0, 0]
    assert [budget.take(t) for t in (3.0, 59.9)] == [None, None]  # past the bound: counted
    # The window ends at exactly MALFORMED_WINDOW_S: the next line says how many were left out.
    assert budget.take(MALFORMED_WINDOW_S) == 2
    assert [budget.take(MALFORMED_WINDOW_S + t) for t in (1.0, 2.0, 3.0)] == [0, 0, None]
    assert MALFORMED_LINES_PER_MINUTE == 20


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
    for source in ("zone_points", "feed_points"):  # no database here: nothing to serve
        monkeypatch.setattr(f"control.management.commands.bacnet_server.{source}", list)
    monkeypatch.setattr("control.management.commands.bacnet_server.alarm_state", lambda: None)
    monkeypatch.setattr("control.management.commands.bacnet_server.site_location", str)
    call_command("bacnet_server", "--once")
    assert [(d.subscriptions_per_sender, d._write_rate.per_minute) for d in made] == [(7, 600)]


# Raw datagrams: the NPDU claims a source network and station, the datagram comes from one host.

FORGER_HOST = "127.0.0.61"


@pytest.fixture
def forger():
    yield from raw.sender(FORGER_HOST)


def _to(device: SiteDevice) -> tuple[str, int]:
    host, port = device.address.split(":")
    return host, int(port)


@pytest.mark.django_db
def test_made_up_routed_stations_from_one_host_are_one_sender_audited_with_its_address(
    redis_client, bounded, forger, caplog
):
    device = bounded(writes_per_minute=3)
    hall = f.zone("Hall", temp=18.5, bacnet_setpoint_writable=True)
    served(device)
    origin = f"{FORGER_HOST}:{forger.getsockname()[1]}"

    def decide() -> None:
        device.handle_writes(bacnet_writes.apply, wait_s=0.05)

    answers = [
        raw.exchange(
            forger, _to(device),
            raw.datagram(raw.write_real(n, raw.ANALOG_VALUE, hall.pk, 20.0 + n), snet=7,
                         sadr=struct.pack(">H", n)),
            decide,
        )
        for n in range(5)
    ]  # fmt: skip
    # Five "stations" of network 7, one host: its three writes a minute, then device-busy.
    assert answers == [raw.SIMPLE_ACK] * 3 + [raw.ERROR] * 2
    reasons = list(Override.objects.order_by("pk").values_list("reason", flat=True))
    assert reasons == [
        f"BACnet write from 7:0x000{n} via {origin}: setpoint {20 + n} °C" for n in range(3)
    ]
    refused = [r.getMessage() for r in caplog.records if "more than 3 writes" in r.getMessage()]
    assert refused == [
        f"BACnet write from 7:0x000{n} via {origin} refused: more than 3 writes from "
        f"{FORGER_HOST} in 60 s"
        for n in (3, 4)
    ]


def test_made_up_routed_stations_from_one_host_hold_one_senders_share_of_subscriptions(
    bounded, forger, caplog
):
    device = bounded(max_subscriptions=10, subscriptions_per_sender=2)
    device.update([ZonePoint(7, "Hall", 18.5, 20.0, False, False)])
    answers = [
        raw.exchange(
            forger, _to(device),
            raw.datagram(raw.subscribe_cov(n, n, raw.ANALOG_INPUT, 7), snet=9, sadr=bytes([n])),
            lambda: None,
        )
        for n in range(1, 5)
    ]  # fmt: skip
    assert answers == [raw.SIMPLE_ACK] * 2 + [raw.ERROR] * 2
    refused = [r.getMessage() for r in caplog.records if "at most 2 a sender" in r.getMessage()]
    origin = f"{FORGER_HOST}:{forger.getsockname()[1]}"
    assert [m.split(" refused")[0] for m in refused] == [
        f"BACnet SubscribeCOV from 9:3 via {origin}",
        f"BACnet SubscribeCOV from 9:4 via {origin}",
    ]
    assert all(f"held by {FORGER_HOST} " in m for m in refused)


@pytest.mark.django_db
def test_a_forwarded_npdu_is_audited_with_the_host_that_sent_it_not_only_the_one_it_claims(
    redis_client, bounded, forger
):
    device = bounded(writes_per_minute=1)
    hall = f.zone("Hall", temp=18.5, bacnet_setpoint_writable=True)
    served(device)
    origin = f"{FORGER_HOST}:{forger.getsockname()[1]}"
    # A Forwarded-NPDU names the "original" sender in its BVLL header: a BBMD's to make, or a
    # forger's. The answer goes to the address claimed, here a socket of the test's own.
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as claimed:
        claimed.bind((OTHER_HOST, 0))
        answers = [
            raw.exchange(
                forger, _to(device),
                raw.forwarded(claimed.getsockname(), raw.write_real(n, raw.ANALOG_VALUE, hall.pk,
                                                                    21.0 + n)),
                lambda: device.handle_writes(bacnet_writes.apply, wait_s=0.05),
                answered_on=claimed,
            )
            for n in range(2)
        ]  # fmt: skip
        claimed_name = f"{OTHER_HOST}:{claimed.getsockname()[1]}"
    # Counted against the host that sent it: its one write a minute.
    assert answers == [raw.SIMPLE_ACK, raw.ERROR]
    assert Override.objects.get().reason == (
        f"BACnet write from {claimed_name} via {origin}: setpoint 21 °C"
    )


def test_junk_datagrams_are_one_line_each_up_to_the_bound_a_minute_no_traceback(
    bounded, forger, caplog
):
    device = bounded()
    now = [1000.0]
    device.clock = lambda: now[0]  # the budget's minute on the test's clock
    device.update([ZonePoint(7, "Hall", 18.5, 20.0, False, False)])
    junk = [b"\x81\x0a\x00\x06\x01\x00", b"\x00\x01\x02\x03\x04\x05"]  # the tester's six bytes
    read = raw.datagram(bytes([0x00, 0x05, 1, 12, 0x0C]) + raw.object_id(raw.ANALOG_INPUT, 7)
                        + bytes([0x19, 85]))  # fmt: skip

    def flood(count: int) -> None:
        for n in range(count):
            forger.sendto(junk[n % 2], _to(device))
        # One socket, one loop: once a read sent after them is answered, all were taken.
        assert raw.exchange(forger, _to(device), read, lambda: None) == raw.COMPLEX_ACK

    flood(MALFORMED_LINES_PER_MINUTE + 5)
    lines = [r for r in caplog.records if "dropped: malformed" in r.getMessage()]
    assert len(lines) == MALFORMED_LINES_PER_MINUTE
    assert all(r.exc_info is None for r in caplog.records)  # no traceback, from anyone
    origin = f"{FORGER_HOST}:{forger.getsockname()[1]}"
    assert lines[0].getMessage() == (
        f"BACnet datagram from {origin} dropped: malformed "
        "(DecodingError: no more packet data), 6 bytes"
    )
    assert lines[1].getMessage().endswith("(not a BACnet/IP message), 6 bytes")
    caplog.clear()
    now[0] += MALFORMED_WINDOW_S  # the next minute: its lines, the first counting the 5 left out
    flood(1)
    assert [r.getMessage().rsplit("; ", 1)[1] for r in caplog.records] == [
        "5 more dropped unlogged before it"
    ]


def test_the_console_log_handler_bounds_the_chatty_libraries_and_only_them():
    """bacpypes3 logs a warning for some packets a peer chooses to send (none of the 45 kinds of
    well-formed request tried on our server did; a later version may): whatever it logs,
    the console handler lets 20 of its lines a minute through (core/log_budget.py)."""
    import logging

    budgets = [f for h in logging.getLogger().handlers for f in h.filters
               if isinstance(f, LibraryLineBudget)]  # fmt: skip
    assert budgets, "bms/settings.py LOGGING: the console handler has no LibraryLineBudget"
    now = [0.0]
    budget = LibraryLineBudget(per_minute=2, clock=lambda: now[0])

    def record(name: str) -> logging.LogRecord:
        return logging.LogRecord(name, logging.WARNING, __file__, 1, "line %s", ("x",), None)

    assert [budget.filter(record("bacpypes3.service.object")) for _ in range(3)] == [
        True, True, False,
    ]  # fmt: skip
    assert budget.filter(record("bacpypes3")) is False  # the tree's root shares the budget
    assert all(budget.filter(record(n)) for n in ("control.bacnet_server", "bacpypes3x", "root"))
    now[0] = 60.0  # the next minute: its first line says how many were left out
    line = record("bacpypes3.netservice")
    assert budget.filter(line) and line.getMessage() == (
        "line x (2 more bacpypes3 lines left out before it)"
    )
