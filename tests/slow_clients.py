"""Slow-client attacks (slowloris headers, slow request bodies) and timed normal requests, for
the proxy test (tests/security/test_proxy.py).

Each attacker slot keeps one connection open, trickling a byte every `interval_s`, and opens a
new one when the server closes it, until the attack ends; it records how long each connection
lived, so a test can check that the server closed it after its configured timeout.
"""

from __future__ import annotations

import http.client
import json
import select
import socket
import ssl
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Target:
    host: str
    port: int
    tls: ssl.SSLContext | None = None  # None: plain HTTP

    def connect(self, source_ip: str, timeout_s: float = 5.0) -> socket.socket:
        sock = socket.create_connection(
            (self.host, self.port), timeout=timeout_s, source_address=(source_ip, 0)
        )
        if self.tls is not None:
            sock = self.tls.wrap_socket(sock, server_hostname=self.host)
        return sock


def client_tls_context(ca_file: str) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=ca_file)


@dataclass
class Closed:
    """One attack connection the server closed: seconds since it opened and since its last byte."""

    since_open: float
    since_last_byte: float


@dataclass
class SlowClients:
    """`count` connections from `source_ip`: kind "header" trickles an endless request header,
    kind "body" sends a whole header, then trickles a body that never completes."""

    target: Target
    kind: str
    count: int
    interval_s: float
    source_ip: str = "127.0.0.2"
    path: str = "/"
    closed: list[Closed] = field(default_factory=list)
    refused: int = 0  # connections that could not even be opened
    answers: list[bytes] = field(default_factory=list)  # first bytes of any reply
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _opening(self) -> bytes:
        host = f"Host: {self.target.host}\r\n"
        if self.kind == "header":
            return f"GET {self.path} HTTP/1.1\r\n{host}X-Slow: ".encode()
        return (
            f"POST {self.path} HTTP/1.1\r\n{host}Content-Type: application/json\r\n"
            "Content-Length: 100000\r\n\r\n["
        ).encode()

    def _slot(self, attack_until: float, wait_until: float) -> None:
        """Until attack_until, trickle and reopen; then stop sending and wait (until
        wait_until) for the server to close the connection it has."""
        while time.monotonic() < attack_until:
            try:
                sock = self.target.connect(self.source_ip)
                sock.sendall(self._opening())
            except OSError:
                with self._lock:
                    self.refused += 1
                time.sleep(0.1)  # a real pause: the attacker backs off, then reconnects
                continue
            opened = last_byte = time.monotonic()
            # Non-blocking from here: a TLS 1.3 server sends session tickets after the
            # handshake, which wake select() but carry no data to read.
            sock.settimeout(0.0)
            reply = b""
            try:
                while True:
                    now = time.monotonic()
                    sending = now < attack_until
                    if not sending and now >= wait_until:
                        return  # the server kept it open: not recorded as closed
                    deadline = last_byte + self.interval_s if sending else wait_until
                    ready, _, _ = select.select([sock], [], [], max(0.0, deadline - now))
                    if ready:
                        try:
                            data = sock.recv(4096)
                        except (ssl.SSLWantReadError, BlockingIOError):
                            continue  # only TLS housekeeping arrived
                        except (OSError, ssl.SSLError):
                            data = b""
                        if data:
                            reply += data
                            continue
                        now = time.monotonic()
                        with self._lock:
                            self.closed.append(Closed(now - opened, now - last_byte))
                            if reply:
                                self.answers.append(reply[:64])
                        break
                    if sending:
                        try:
                            sock.sendall(b"a")
                        except (OSError, ssl.SSLError):
                            now = time.monotonic()
                            with self._lock:
                                self.closed.append(Closed(now - opened, now - last_byte))
                            break
                        last_byte = time.monotonic()
            finally:
                sock.close()

    def start(self, attack_s: float, wait_after_s: float) -> list[threading.Thread]:
        attack_until = time.monotonic() + attack_s
        wait_until = attack_until + wait_after_s
        threads = [
            threading.Thread(target=self._slot, args=(attack_until, wait_until), daemon=True)
            for _ in range(self.count)
        ]
        for thread in threads:
            thread.start()
        return threads


@dataclass
class Timed:
    what: str
    status: int | None  # None: no answer in time
    seconds: float


def timed_request(
    target: Target, what: str, method: str, path: str, body: bytes | None = None,
    headers: dict | None = None, timeout_s: float = 5.0, source_ip: str = "127.0.0.1",
) -> Timed:  # fmt: skip
    """One request on a fresh connection; its status and how long the whole exchange took."""
    kwargs = {"timeout": timeout_s, "source_address": (source_ip, 0)}
    if target.tls is not None:
        conn = http.client.HTTPSConnection(target.host, target.port, context=target.tls, **kwargs)
    else:
        conn = http.client.HTTPConnection(target.host, target.port, **kwargs)
    started = time.monotonic()
    try:
        conn.request(method, path, body=body, headers=headers or {})
        response = conn.getresponse()
        response.read()
        return Timed(what, response.status, time.monotonic() - started)
    except (OSError, http.client.HTTPException):
        return Timed(what, None, time.monotonic() - started)
    finally:
        conn.close()


# --- The attack in its own process --------------------------------------------------------
# 55 attacker threads in the test's own interpreter would compete for its GIL with the
# requests being timed; in a child process they only compete for CPU, as a real attacker does.


def spawn(
    target_port: int, ca_file: str | None, kind: str, count: int, interval_s: float, path: str,
    attack_s: float, wait_after_s: float, source_ip: str = "127.0.0.2",
) -> subprocess.Popen:  # fmt: skip
    """Start SlowClients in a child process; it prints "started" once every slot runs."""
    spec = dict(
        port=target_port, ca_file=ca_file, kind=kind, count=count, interval_s=interval_s,
        path=path, attack_s=attack_s, wait_after_s=wait_after_s, source_ip=source_ip,
    )  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.slow_clients", json.dumps(spec)],
        cwd=Path(__file__).resolve().parent.parent, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout.readline().strip() == "started"
    return proc


def collect(proc: subprocess.Popen, timeout_s: float) -> SlowClients:
    """The finished child's record: closed connections, refusals, replies."""
    out, _ = proc.communicate(timeout=timeout_s)
    doc = json.loads(out)
    clients = SlowClients(Target("127.0.0.1", 0), doc["kind"], doc["count"], 0)
    clients.closed = [Closed(*pair) for pair in doc["closed"]]
    clients.refused = doc["refused"]
    clients.answers = [a.encode("latin-1") for a in doc["answers"]]
    return clients


def _main(spec_json: str) -> None:
    spec = json.loads(spec_json)
    tls = client_tls_context(spec["ca_file"]) if spec["ca_file"] else None
    clients = SlowClients(
        Target("127.0.0.1", spec["port"], tls), spec["kind"], spec["count"],
        spec["interval_s"], spec["source_ip"], spec["path"],
    )  # fmt: skip
    threads = clients.start(spec["attack_s"], spec["wait_after_s"])
    print("started", flush=True)
    for thread in threads:
        thread.join()
    print(json.dumps({
        "kind": clients.kind, "count": clients.count, "refused": clients.refused,
        "closed": [[c.since_open, c.since_last_byte] for c in clients.closed],
        "answers": [a.decode("latin-1") for a in clients.answers],
    }))  # fmt: skip


if __name__ == "__main__":
    _main(sys.argv[1])
