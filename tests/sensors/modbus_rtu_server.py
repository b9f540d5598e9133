"""A real pymodbus RTU serial server with several meters (unit ids) on one line, run as its own
process on one end of a pseudo-terminal pair (tests/sensors/test_modbus_rtu.py makes the pair
with socat): the RS-485 bus of a plant room, without the wires.

    python -m tests.sensors.modbus_rtu_server PORT CONFIG.json

CONFIG: {"units": {"<id>": {"input": {"<address>": [words]}, "holding": {...},
                            "size": 400, "holes": {"input": [address, ...]}}}, "baudrate": 19200}
Registers listed in `holes` are not defined, so the meter answers exception 02 for them, as a
real meter does for an address it does not have. Prints "ready" once it listens.
"""

from __future__ import annotations

import asyncio
import json
import sys

from pymodbus.server import ModbusSerialServer
from pymodbus.simulator import DataType, SimData, SimDevice


def _block(size: int, values: dict[str, list[int]], holes: list[int]) -> list[SimData]:
    words = [0] * size
    for address, chunk in values.items():
        start = int(address)
        words[start : start + len(chunk)] = chunk
    blocks, start = [], 0
    for hole in sorted(set(holes)) + [size]:
        if hole > start:
            blocks.append(SimData(start, values=words[start:hole], datatype=DataType.REGISTERS))
        start = hole + 1
    return blocks


def device(unit: int, spec: dict) -> SimDevice:
    size = int(spec.get("size", 400))
    holes = spec.get("holes", {})
    bits = [SimData(0, count=8, values=False, datatype=DataType.BITS)]
    holding = _block(size, spec.get("holding", {}), holes.get("holding", []))
    inputs = _block(size, spec.get("input", {}), holes.get("input", []))
    return SimDevice(unit, simdata=(bits, bits, holding, inputs))


async def main(port: str, config: dict) -> None:
    devices = [device(int(unit), spec) for unit, spec in config["units"].items()]
    server = ModbusSerialServer(
        devices, port=port, baudrate=int(config.get("baudrate", 19200)), timeout=1
    )
    await server.serve_forever(background=True)
    print("ready", flush=True)
    await asyncio.Event().wait()  # until the test terminates the process


if __name__ == "__main__":
    with open(sys.argv[2]) as handle:
        asyncio.run(main(sys.argv[1], json.load(handle)))
