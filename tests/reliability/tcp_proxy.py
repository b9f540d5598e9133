"""A TCP proxy the fault tests can cut: the site's processes reach PostgreSQL through it, so a
test can take the database away from them (and only them: the pytest process keeps its direct
connection for setup and checks) and give it back.

`cut()` closes every open connection at once (both ends, with a reset) and, until `restore()`,
answers each new connection by closing it. Closing rather than blackholing on purpose: a
blackholed socket leaves a query waiting for an answer that never comes (no statement timeout
covers a dead peer), whereas a closed one fails the query at once, as a database restart or a
dropped network link does.
"""

from __future__ import annotations

import socket
import struct
import threading

# SO_LINGER on, 0 s: close() sends a RST, so the peer's next read fails at once (no FIN_WAIT).
_RESET = struct.pack("ii", 1, 0)


def _reset(sock: socket.socket, hard: bool = True) -> None:
    try:
        if hard:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RESET)
        # shutdown wakes a pump thread blocked in recv on this socket; close alone may not.
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # already closed by the peer: nothing left to reset
    sock.close()


class TcpProxy:
    def __init__(self, target_host: str = "127.0.0.1", target_port: int = 5432) -> None:
        self.target = (target_host, target_port)
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(128)
        self.port: int = self.listener.getsockname()[1]
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()  # both ends of every forwarded connection
        self._cut = False
        self._closed = False
        self.connections = 0  # forwarded since start: shows the site really went through us
        self.refused = 0  # closed at once while cut
        self._thread = threading.Thread(target=self._accept_loop, daemon=True, name="tcp-proxy")
        self._thread.start()

    # --- control ----------------------------------------------------------------------------

    def cut(self) -> None:
        """Close every open connection and refuse new ones until restore()."""
        with self._lock:
            self._cut = True
            sockets, self._open = self._open, set()
        for sock in sockets:
            _reset(sock)

    def restore(self) -> None:
        with self._lock:
            self._cut = False

    def close(self) -> None:
        self._closed = True
        self.cut()
        self.listener.close()
        self._thread.join(timeout=5)

    # --- forwarding -------------------------------------------------------------------------

    def _accept_loop(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return  # listener closed: the test is over
            with self._lock:
                refuse = self._cut
            if refuse:
                self.refused += 1
                _reset(client)
                continue
            threading.Thread(target=self._connect, args=(client,), daemon=True).start()

    def _connect(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(self.target, timeout=5)
        except OSError:
            _reset(client)  # database itself unreachable: the client sees a closed connection
            return
        upstream.settimeout(None)
        with self._lock:
            if self._cut:  # cut while we were connecting
                pair_open = False
            else:
                self._open.update((client, upstream))
                self.connections += 1
                pair_open = True
        if not pair_open:
            _reset(client)
            _reset(upstream)
            return
        threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()
        self._pump(upstream, client)

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        """Copy one direction until either end closes; then close both (one dead half is a dead
        connection for PostgreSQL's protocol)."""
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                sink.sendall(data)
        except OSError:
            pass  # reset by cut() or by a peer: handled by closing both below
        with self._lock:
            owned = source in self._open
            self._open.discard(source)
            self._open.discard(sink)
        if owned:  # cut() already closed both if they are gone from the set
            # A plain close: what was sent before the peer hung up still reaches the other end.
            _reset(source, hard=False)
            _reset(sink, hard=False)
