"""A real pymodbus TCP relay board in a background thread: for tests, benchmarks and trying
the system without hardware. Not used by the running system.

    with RelayBoard(coils=64) as board:      # binds a free high port on 127.0.0.1
        board.port, board.coil(3), board.set_coil(3, False), board.stop()
        board.stop(); board.start()              # a reboot: same port, coils and registers 0
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time

from pymodbus.server import ModbusTcpServer
from pymodbus.simulator import DataType, SimData, SimDevice


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RelayBoard:
    def __init__(self, coils: int = 64, port: int | None = None) -> None:
        self.coils = coils
        self.port = port or free_port()
        self.host = "127.0.0.1"
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: ModbusTcpServer | None = None
        self._thread: threading.Thread | None = None
        # pymodbus warns about its own deprecations at DEBUG/WARNING on every start.
        logging.getLogger("pymodbus").setLevel(logging.ERROR)

    def _device(self) -> SimDevice:
        return SimDevice(
            id=0,  # answers every device id, like most cheap relay boards
            simdata=(
                [SimData(0, count=self.coils, values=False, datatype=DataType.BITS)],
                [SimData(0, count=1, values=False, datatype=DataType.BITS)],
                [SimData(0, count=16, values=0, datatype=DataType.REGISTERS)],  # holding
                [SimData(0, count=1, values=0, datatype=DataType.REGISTERS)],
            ),
        )

    def start(self) -> RelayBoard:
        ready = threading.Event()
        self._loop = asyncio.new_event_loop()

        def run() -> None:
            asyncio.set_event_loop(self._loop)

            async def serve() -> None:
                self._server = ModbusTcpServer(self._device(), address=(self.host, self.port))
                ready.set()
                await self._server.serve_forever()

            self._loop.run_until_complete(serve())

        self._thread = threading.Thread(target=run, name=f"relayboard-{self.port}", daemon=True)
        self._thread.start()
        ready.wait(5)
        self._wait_listening()
        return self

    def _wait_listening(self) -> None:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex((self.host, self.port)) == 0:
                    return
            time.sleep(0.02)
        raise RuntimeError(f"relay board did not start on port {self.port}")

    def stop(self) -> None:
        if self._server is None or self._loop is None:
            return
        asyncio.run_coroutine_threadsafe(self._server.shutdown(), self._loop).result(5)
        if self._thread is not None:
            self._thread.join(5)
        self._server = None

    def _call(self, coro):
        assert self._loop is not None and self._server is not None, "board not running"
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(5)

    def coil(self, address: int) -> bool:
        return bool(self._call(self._server.async_getValues(1, 1, address, 1))[0])

    def coils_state(self, address: int, count: int) -> list[bool]:
        return [bool(v) for v in self._call(self._server.async_getValues(1, 1, address, count))]

    def register(self, address: int) -> int:
        """A holding register's value (an analogue output, a watchdog register)."""
        return int(self._call(self._server.async_getValues(1, 3, address, 1))[0])

    def set_register(self, address: int, value: int) -> None:
        """Change a holding register behind the system's back (a watchdog the board reset)."""
        self._call(self._server.async_setValues(1, 6, address, [value]))

    def set_coil(self, address: int, value: bool) -> None:
        """Change a coil behind the system's back (a relay that rebooted, a hand switch)."""
        self._call(self._server.async_setValues(1, 5, address, [value]))

    def __enter__(self) -> RelayBoard:
        return self.start()

    def __exit__(self, *_exc) -> None:
        self.stop()
