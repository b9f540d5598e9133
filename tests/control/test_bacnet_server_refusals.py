"""What the site's BACnet device (control/bacnet_server.py) logs when it refuses a request:
each line names the writer, the object and property and the real reason (a read-only object, a
property not writable, a zone's writes not enabled), and each kind of line is bounded a minute
(core/log_budget.py), so anyone on the LAN sending thousands of requests cannot fill the disk
through the log. Requests crafted byte by byte (tests/control/bacnet_raw.py) from a socket of
the test's own; the log budget's window on a clock the test controls."""

from __future__ import annotations

import pytest

from control import bacnet_writes
from control.bacnet_server import MALFORMED_LINES_PER_MINUTE, ZonePoint

from . import bacnet_raw as raw
from . import factories as f
from .test_bacnet_server_bounds import _to, bounded  # noqa: F401  (a fixture)
from .test_bacnet_writes import served

WRITER_HOST = "127.0.0.62"
PRESENT_VALUE, OBJECT_NAME, OUT_OF_SERVICE = 85, 77, 81


@pytest.fixture
def writer():
    yield from raw.sender(WRITER_HOST)


def refusals(caplog: pytest.LogCaptureFixture) -> list[str]:
    """What each refusal line says after the writer's address."""
    return [m.split(" refused: ", 1)[1] for m in caplog.messages if " refused: " in m]


def test_a_write_to_a_read_only_object_or_property_is_logged_naming_it_and_why(
    bounded,  # noqa: F811
    writer,
    caplog,
):
    device = bounded(writes_per_minute=600)
    device.update([ZonePoint(7, "Hall", 18.5, 20.0, False, False)])
    requests = [
        raw.write_property(1, raw.ANALOG_INPUT, 7, PRESENT_VALUE, 30.0),  # its temperature
        raw.write_property(2, raw.ANALOG_VALUE, 7, OBJECT_NAME, 1.0),
        raw.write_property(3, raw.BINARY_VALUE, 7, OUT_OF_SERVICE, 1.0),
        raw.write_property_multiple(4, raw.ANALOG_VALUE, 7, 22.0),
        raw.write_property(5, raw.ANALOG_VALUE, 99, PRESENT_VALUE, 22.0),  # no such zone
    ]
    answers = [raw.exchange(writer, _to(device), raw.datagram(r), lambda: None) for r in requests]
    assert answers == [raw.ERROR] * 5
    assert refusals(caplog) == [
        "analog-input,7 present-value: a read-only object",
        "analog-value,7 object-name: property not writable (only a setpoint's or an "
        "occupancy's present-value is)",
        "binary-value,7 out-of-service: property not writable (only a setpoint's or an "
        "occupancy's present-value is)",
        "not accepted here (a setpoint or an occupancy is written one WriteProperty at a time)",
        "analog-value,99 present-value: no such object",
    ]
    assert all(f"BACnet write from {WRITER_HOST}:" in m or "WritePropertyMultiple from" in m
               for m in caplog.messages)  # fmt: skip
    assert "not enabled" not in caplog.text


@pytest.mark.django_db
def test_a_write_a_zone_has_not_enabled_is_logged_saying_so(redis_client, bounded, writer, caplog):  # noqa: F811
    device = bounded()
    hall = f.zone("Hall", temp=18.5)
    served(device)
    answer = raw.exchange(
        writer, _to(device), raw.datagram(raw.write_real(1, raw.ANALOG_VALUE, hall.pk, 22.0)),
        lambda: device.handle_writes(bacnet_writes.apply, wait_s=0.05),
    )  # fmt: skip
    assert answer == raw.ERROR
    assert refusals(caplog) == [
        f"analog-value,{hall.pk} present-value (zone {hall.pk} setpoint 22): setpoint writes "
        "not enabled on zone 'Hall'"
    ]


def test_each_kind_of_refusal_line_is_bounded_a_minute_the_next_saying_how_many_were_left_out(
    bounded,  # noqa: F811
    writer,
    caplog,
):
    device = bounded(writes_per_minute=1, subscriptions_per_sender=1)
    now = [0.0]
    device.clock = lambda: now[0]
    device.update([ZonePoint(7, "Hall", 18.5, 20.0, False, False)])
    flood = MALFORMED_LINES_PER_MINUTE + 5

    def send(request: bytes) -> int:
        return raw.exchange(writer, _to(device), raw.datagram(request), lambda: None)

    # Writes to no object: the first its own line (unknown object), the rest over the rate.
    for n in range(flood + 1):
        send(raw.write_real(n, raw.ANALOG_VALUE, 99, 22.0))
    # Subscriptions past the sender's one: each a refusal of another kind.
    for n in range(flood + 1):
        send(raw.subscribe_cov(n, n, raw.ANALOG_INPUT, 7))
    lines = caplog.messages
    assert sum("no such object" in m for m in lines) == 1
    assert sum("more than 1 writes" in m for m in lines) == MALFORMED_LINES_PER_MINUTE
    assert sum("at most 1 a sender" in m for m in lines) == MALFORMED_LINES_PER_MINUTE
    # A minute on, the next line of each kind says how many of its kind were left out.
    caplog.clear()
    now[0] = 60.0
    send(raw.write_real(100, raw.ANALOG_VALUE, 99, 22.0))
    send(raw.subscribe_cov(100, 100, raw.ANALOG_INPUT, 7))
    assert [m.rsplit(" (", 1)[1] for m in caplog.messages] == [
        "5 more such lines left out before it)", "5 more such lines left out before it)",
    ]  # fmt: skip
