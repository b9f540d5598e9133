"""A real threaded HTTP server running the whole Django site, that a test can stop and start
again on the same port (pytest-django's live_server cannot be stopped mid-test)."""

from __future__ import annotations

import socket
import threading
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from django.core.wsgi import get_wsgi_application
from django.db import connections


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    allow_reuse_address = True  # restart on the same port at once, despite TIME_WAIT
    # socketserver's listen backlog is 5; Chromium opens six connections to a host at once,
    # and on a loaded machine the accept loop (one connection a pass) falls behind. A SYN
    # the full queue drops is retried after 1, 3, 7, 15 s: a page then misses its load event.
    request_queue_size = 128


class _Handler(WSGIRequestHandler):
    def handle(self) -> None:
        try:
            super().handle()
        finally:
            # Each request runs in its own thread: close its database connection, or test
            # teardown (flush, drop of a PostgreSQL test database) finds it still open.
            connections.close_all()

    def log_message(self, format: str, *args) -> None:
        return  # keep test output readable; failures show in the browser's own checks


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class KioskServer:
    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.app = get_wsgi_application()
        self._httpd: _ThreadingServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self._httpd = make_server(
            "127.0.0.1", self.port, self.app, server_class=_ThreadingServer, handler_class=_Handler
        )
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        if self._httpd is None:
            return
        self._httpd.shutdown()
        self._httpd.server_close()  # the port now refuses connections, like a dead server
        self._thread.join(timeout=5)
        self._httpd = None
