"""A bacpypes3 application on a thread and event loop of its own, started from a sync caller:
the COV client (sensors/devices/bacnet_cov.py) and the site's BACnet server
(control/bacnet_server.py) both run this way.

A subclass sets `local`, `_loop`, `_app`, `_thread`, `_ready` (an Event) and `_error` in its
__init__, names itself in LABEL and THREAD_NAME, and makes its application in `_create_app`.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any


class AppThread:
    LABEL = "BACnet application"
    THREAD_NAME = "bacnet"

    local: str
    _loop: asyncio.AbstractEventLoop | None
    _app: Any
    _thread: threading.Thread | None
    _ready: threading.Event
    _error: BaseException | None

    def start(self, timeout_s: float = 10.0) -> None:
        self._thread = threading.Thread(target=self._run, name=self.THREAD_NAME, daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout_s):
            raise RuntimeError(f"{self.LABEL} did not start within {timeout_s:g} s")
        if self._error is not None:
            raise RuntimeError(f"{self.LABEL} cannot listen on {self.local}: {self._error}")

    def _run(self) -> None:
        loop = self._loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            # bacpypes3 binds its socket on the running loop: created inside it.
            self._app = loop.run_until_complete(self._create_app())
        except (OSError, ValueError) as exc:
            self._error = exc
            self._ready.set()
            loop.close()
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            self._app.close()
            loop.close()

    async def _create_app(self) -> Any:
        raise NotImplementedError
