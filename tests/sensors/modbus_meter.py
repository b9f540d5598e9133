"""A real pymodbus TCP server on a free high port, run in a background asyncio thread.

It can behave as real meters do when asked for something they dislike: refuse given registers
with a Modbus exception (`refuse`), leave requests touching given registers unanswered for a
while (`mute`: the answer comes late, as from a slow gateway), and refuse requests longer than
the meter's own block limit (`max_block`, exception 03). `requests` records every read.
"""

from __future__ import annotations

import asyncio
import struct
import threading

from pymodbus.constants import ExcCodes
from pymodbus.server import ModbusTcpServer
from pymodbus.simulator import DataType, SimData, SimDevice

FC_HOLDING, FC_INPUT = 3, 4


def float32_words(value: float) -> list[int]:
    return list(struct.unpack(">2H", struct.pack(">f", value)))


class MeterServer:
    def __init__(self, device_id: int = 1, registers: int = 100) -> None:
        bits = [SimData(0, count=8, values=False, datatype=DataType.BITS)]
        regs = [SimData(0, count=registers, values=0, datatype=DataType.REGISTERS)]
        self.device_id = device_id
        self.refuse: dict[int, ExcCodes] = {}
        self.mute: set[int] = set()
        self.mute_s = 3.0
        self.max_block: int | None = None
        self.requests: list[tuple[int, int, int]] = []
        self.device = SimDevice(
            device_id, simdata=(bits, bits, regs, list(regs)), action=self._action
        )
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.server: ModbusTcpServer | None = None

    async def _action(self, function_code, _start, address, count, _registers, values):
        if values is not None:
            return None  # a write (MeterServer.set): always allowed
        self.requests.append((function_code, address, count))
        if self.max_block is not None and count > self.max_block:
            return ExcCodes.ILLEGAL_VALUE
        touched = set(range(address, address + count))
        if touched & self.mute:
            await asyncio.sleep(self.mute_s)  # then answers, too late for the client
        for register in sorted(touched & set(self.refuse)):
            return self.refuse[register]
        return None

    def _run(self, coroutine, timeout: float = 5.0):
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def start(self) -> MeterServer:
        self.thread.start()

        async def start() -> None:
            self.server = ModbusTcpServer(self.device, address=("127.0.0.1", 0))
            await self.server.serve_forever(background=True)

        self._run(start())
        return self

    @property
    def port(self) -> int:
        return self.server.transport.sockets[0].getsockname()[1]

    def set(self, function_code: int, address: int, words: list[int]) -> None:
        self._run(
            self.server.context.async_setValues(self.device_id, function_code, address, words)
        )

    def stop(self) -> None:
        if not self.thread.is_alive():
            return  # already stopped (a test may stop the meter to simulate a failure)
        self._run(self.server.shutdown())

        async def cancel_muted() -> None:
            # Requests still sleeping in `mute` are cancelled, not left pending at exit.
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        self._run(cancel_muted())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
