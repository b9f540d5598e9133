"""JeeLib RF12demo / RFM69Pi serial lines: `OK 10 0 1 2 3 (-65)`.

`OK`, the header byte (node id in the low 5 bits; the top bits are CTL/DST/ACK flags),
then the packet's data bytes in decimal, then the RSSI in brackets (RFM69 only). The data
bytes are the node's struct in little-endian order: by default consecutive int16 values
(an emonTx posts `int power1, power2, ...`).
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

NODE_ID_MASK = 0x1F
_RSSI = re.compile(r"^\((-?\d+)\)$")
# struct codes a node config may use per value, emonhub-style: int16 by default.
DATACODES = {"h": 2, "H": 2, "i": 4, "I": 4, "l": 4, "L": 4, "f": 4, "b": 1, "B": 1}


class JeeLibParseError(ValueError):
    pass


@dataclass(frozen=True)
class JeePacket:
    node_id: int
    data: bytes
    rssi: int | None


def parse_line(line: str) -> JeePacket | None:
    """A packet from one serial line; None for lines that are not packets (banners, `> ...`
    echoes, blank lines). Raises JeeLibParseError for a line that starts `OK` but is bad."""
    parts = line.strip().split()
    if not parts or parts[0] != "OK":
        return None
    rssi = None
    match = _RSSI.match(parts[-1]) if len(parts) > 1 else None
    if match:
        rssi = int(match.group(1))
        parts = parts[:-1]
    if len(parts) < 2:
        raise JeeLibParseError(f"no node id in {line.strip()!r}")
    try:
        numbers = [int(p) for p in parts[1:]]
    except ValueError as exc:
        raise JeeLibParseError(f"non-numeric byte in {line.strip()!r}") from exc
    if any(not 0 <= n <= 255 for n in numbers):
        raise JeeLibParseError(f"byte out of range 0-255 in {line.strip()!r}")
    return JeePacket(numbers[0] & NODE_ID_MASK, bytes(numbers[1:]), rssi)


def decode_values(data: bytes, datacodes: str = "h") -> list[float]:
    """The packet's values. `datacodes` is one struct code for all values (`"h"`) or one
    per value (`"hhhH"`)."""
    if len(datacodes) == 1:
        size = DATACODES.get(datacodes)
        if size is None:
            raise JeeLibParseError(f"unknown datacode {datacodes!r}")
        if len(data) % size:
            raise JeeLibParseError(
                f"{len(data)} data bytes is not a whole number of {size}-byte values"
            )
        datacodes = datacodes * (len(data) // size)
    unknown = set(datacodes) - DATACODES.keys()
    if unknown:
        raise JeeLibParseError(f"unknown datacode(s) {''.join(sorted(unknown))!r}")
    expected = sum(DATACODES[c] for c in datacodes)
    if expected != len(data):
        raise JeeLibParseError(f"expected {expected} data bytes for {datacodes!r}, got {len(data)}")
    return [float(v) for v in struct.unpack("<" + datacodes, data)]


def name_values(
    values: list[float], names: list[str] | None = None, scales: list[float] | None = None
) -> dict[str, float]:
    """Map values to input keys (names in order; index from 1 past the end, like emoncms)
    and apply each value's scale (e.g. 0.01 for a temperature sent as centi-degrees)."""
    names = names or []
    scales = scales or []
    named: dict[str, float] = {}
    for i, value in enumerate(values):
        key = names[i] if i < len(names) else str(i + 1)
        scale = scales[i] if i < len(scales) else 1.0
        named[key] = round(value * scale, 10)
    return named
