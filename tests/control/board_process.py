"""A Modbus TCP board in its own process that logs every write, for tests that need the
board's own record of what the system did (the order of relay writes, register values):

    python -m tests.control.board_process --port 15020 --log writes.jsonl [--refuse-register 11]

Coils 0-63 and holding registers 0-63; it answers every unit id. Each write request is one
JSON line {"t", "fc", "address", "values"} appended before the board applies it. A register
named by --refuse-register is answered with exception 03 (illegal data value), as a board
answers a watchdog setting it does not support.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import time

from pymodbus.constants import ExcCodes
from pymodbus.server import ModbusTcpServer
from pymodbus.simulator import DataType, SimData, SimDevice

WRITES = {5, 6, 15, 16}  # write single / multiple coils and registers
REGISTER_WRITES = {6, 16}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--refuse-register", type=int, default=None)
    args = parser.parse_args()
    logging.getLogger("pymodbus").setLevel(logging.ERROR)
    log = open(args.log, "a", buffering=1)  # open for the life of the process

    async def action(fc, _start, address, _count, _registers, values):
        if values is None or fc not in WRITES:
            return None
        if fc in REGISTER_WRITES and address == args.refuse_register:
            return ExcCodes.ILLEGAL_VALUE
        entry = {"t": time.time(), "fc": fc, "address": address, "values": [int(v) for v in values]}
        log.write(json.dumps(entry) + "\n")
        return None

    device = SimDevice(
        id=0,
        simdata=(
            [SimData(0, count=64, values=False, datatype=DataType.BITS)],
            [SimData(0, count=1, values=False, datatype=DataType.BITS)],
            [SimData(0, count=64, values=0, datatype=DataType.REGISTERS)],
            [SimData(0, count=1, values=0, datatype=DataType.REGISTERS)],
        ),
        action=action,
    )

    async def serve() -> None:
        server = ModbusTcpServer(device, address=("127.0.0.1", args.port))
        await server.serve_forever()

    asyncio.run(serve())


if __name__ == "__main__":
    main()
