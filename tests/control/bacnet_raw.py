"""Raw BACnet/IP datagrams, as an outside tester crafts them with a plain UDP socket: BVLL and
NPDU headers written byte by byte, so the NPDU can claim any source network and station
(SNET/SADR) whatever address the datagram really comes from. Only the few requests the tests
of control/bacnet_server.py need; answers are decoded as far as their APDU's type."""

from __future__ import annotations

import socket
import struct
from collections.abc import Callable, Iterator

ANALOG_INPUT, ANALOG_VALUE, BINARY_VALUE, DEVICE = 0, 2, 5, 8
# The APDU types (high nibble of the first octet): requests to us, and answers.
UNCONFIRMED_REQUEST, SIMPLE_ACK, COMPLEX_ACK, ERROR = 0x1, 0x2, 0x3, 0x5


def sender(host: str) -> Iterator[socket.socket]:
    """A UDP socket of a head-end (or a forger) at `host`, any port: a fixture's body."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((host, 0))
    yield sock
    sock.close()


def object_id(object_type: int, instance: int) -> bytes:
    return struct.pack(">I", object_type << 22 | instance)


def datagram(apdu: bytes, *, snet: int | None = None, sadr: bytes = b"") -> bytes:
    """Original-Unicast-NPDU: an NPDU expecting a reply, with SNET/SADR when `snet` is given."""
    if snet is None:
        npdu = bytes([0x01, 0x04])
    else:
        npdu = bytes([0x01, 0x04 | 0x08]) + struct.pack(">HB", snet, len(sadr)) + sadr
    body = npdu + apdu
    return bytes([0x81, 0x0A]) + struct.pack(">H", 4 + len(body)) + body


def forwarded(original: tuple[str, int], apdu: bytes) -> bytes:
    """Forwarded-NPDU: a BBMD's, claiming the request came from `original`."""
    body = socket.inet_aton(original[0]) + struct.pack(">H", original[1])
    body += bytes([0x01, 0x04]) + apdu
    return bytes([0x81, 0x04]) + struct.pack(">H", 4 + len(body)) + body


def write_real(invoke_id: int, object_type: int, instance: int, value: float) -> bytes:
    """WriteProperty of present-value (85), a Real."""
    return (
        bytes([0x00, 0x05, invoke_id, 15, 0x0C]) + object_id(object_type, instance)
        + bytes([0x19, 85, 0x3E, 0x44]) + struct.pack(">f", value) + bytes([0x3F])
    )  # fmt: skip


def subscribe_cov(invoke_id: int, process_id: int, object_type: int, instance: int) -> bytes:
    """SubscribeCOV, unconfirmed notifications, a lifetime of 60 s."""
    return (
        bytes([0x00, 0x05, invoke_id, 5, 0x09, process_id, 0x1C])
        + object_id(object_type, instance) + bytes([0x29, 0x00, 0x39, 60])
    )  # fmt: skip


def apdu_type(answer: bytes) -> int:
    """The APDU type of an answer (past the BVLL header and the NPDU's addresses)."""
    control, at = answer[5], 6
    if control & 0x20:  # DNET, DLEN, DADR
        at += 3 + answer[at + 2]
    if control & 0x08:  # SNET, SLEN, SADR
        at += 3 + answer[at + 2]
    if control & 0x20:  # the hop count
        at += 1
    return answer[at] >> 4


def exchange(
    sock: socket.socket,
    to: tuple[str, int],
    packet: bytes,
    meanwhile: Callable[[], object],
    answered_on: socket.socket | None = None,
) -> int:
    """Send `packet`, call `meanwhile` (the main thread deciding writes) until the answer
    comes (on `answered_on`, default `sock`); its APDU type. A request to us on the way (a COV
    notification) is passed over. Fails after 10 s without one."""
    sock.sendto(packet, to)
    answers = answered_on or sock
    answers.settimeout(0.05)
    for _ in range(200):
        try:
            kind = apdu_type(answers.recv(1500))
        except TimeoutError:
            meanwhile()
            continue
        if kind > UNCONFIRMED_REQUEST:
            return kind
    raise AssertionError("no answer within 10 s")


def write_property(
    invoke_id: int, object_type: int, instance: int, property_id: int, value: float
) -> bytes:
    """WriteProperty of any property, a Real: the server refuses by object and property before
    it decodes a value, so a Real serves for object-name (77) or out-of-service (81) too."""
    return (
        bytes([0x00, 0x05, invoke_id, 15, 0x0C]) + object_id(object_type, instance)
        + bytes([0x19, property_id, 0x3E, 0x44]) + struct.pack(">f", value) + bytes([0x3F])
    )  # fmt: skip


def write_property_multiple(invoke_id: int, object_type: int, instance: int, value: float) -> bytes:
    """WritePropertyMultiple of one object's present-value (85), a Real."""
    return (
        bytes([0x00, 0x05, invoke_id, 16, 0x0C]) + object_id(object_type, instance)
        + bytes([0x1E, 0x09, 85, 0x2E, 0x44]) + struct.pack(">f", value) + bytes([0x2F, 0x1F])
    )  # fmt: skip
