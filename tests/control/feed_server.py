"""A real local HTTP server for iCal tests: serves a directory, can redirect, and records
every request it gets (so a test can prove a refused URL was never fetched)."""

from __future__ import annotations

import http.server
import socket
import threading
from pathlib import Path


class FeedServer:
    def __init__(self, directory: Path, host: str = "127.0.0.1") -> None:
        self.requests: list[str] = []
        self.redirects: dict[str, str] = {}  # path -> Location
        server = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *a, **kw):
                super().__init__(*a, directory=str(directory), **kw)

            def do_GET(self):
                server.requests.append(self.path)
                if self.path in server.redirects:
                    self.send_response(302)
                    self.send_header("Location", server.redirects[self.path])
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                super().do_GET()

            def log_message(self, *_args):
                return

        family_server = http.server.ThreadingHTTPServer
        if ":" in host:

            class V6(http.server.ThreadingHTTPServer):
                address_family = socket.AF_INET6

            family_server = V6
        self.host = host
        self._httpd = family_server((host, 0), Handler)
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def url(self, path: str) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/{path}"

    def __enter__(self) -> FeedServer:
        self._thread.start()
        return self

    def __exit__(self, *_exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
