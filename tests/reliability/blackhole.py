"""A TCP server that accepts connections and never answers: a hung relay board or meter."""

from __future__ import annotations

import socket
import threading


class Blackhole:
    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.accepted: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return  # closed: the test is over
            self.accepted.append(conn)  # held open, never read, never answered

    def __enter__(self) -> Blackhole:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.sock.close()
        for conn in self.accepted:
            conn.close()
