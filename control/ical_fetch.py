"""Fetch an iCal feed over http(s) without letting a zone's URL reach inside the server.

A zone's `ical_url` is typed by an engineer, so it must not become a way to read the
server's own files or services: only http and https; the host name is resolved
here, every address it resolves to must be a public one (not loopback, private, link-local,
multicast, reserved or unspecified) unless `BMS_ICAL_ALLOWED_HOSTS` names the host or the
address; the connection goes to the address that was checked (DNS cannot change between the
check and the connect); each redirect is checked the same way. The body is bounded in bytes
and the whole fetch in time. Errors name the host and the reason, never the fetched content.
"""

from __future__ import annotations

import http.client
import ipaddress
import socket
import ssl
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

from django.conf import settings

REDIRECTS = (301, 302, 303, 307, 308)
MAX_REDIRECTS = 3
CHUNK = 64 * 1024

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


class FetchRefused(Exception):
    """The URL or an address it resolves to is not allowed, or the fetch failed.

    The message is safe to show to every staff role: it names the host and why, never
    what the server sent back."""


def max_bytes() -> int:
    return int(settings.BMS_ICAL_MAX_BYTES)


def timeout_s() -> float:
    """The whole fetch (every redirect, connect and read) ends by this."""
    return float(settings.BMS_ICAL_TIMEOUT_S)


def _allowed_entries() -> tuple[set[str], list[ipaddress.IPv4Network | ipaddress.IPv6Network]]:
    """BMS_ICAL_ALLOWED_HOSTS: host names (exact, case-insensitive) and addresses or networks
    (`192.168.1.20`, `10.0.0.0/8`) that may be fetched although not public."""
    names: set[str] = set()
    networks = []
    for entry in settings.BMS_ICAL_ALLOWED_HOSTS or []:
        entry = str(entry).strip()
        if not entry:
            continue
        try:
            networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
        except ValueError:
            names.add(entry.lower().rstrip("."))
    return names, networks


def _plain(address: Address) -> Address:
    """::ffff:127.0.0.1 is 127.0.0.1 to the kernel: judge it as such."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def address_problem(address: Address) -> str | None:
    """Why this address may not be fetched (None: it is public)."""
    address = _plain(address)
    for test, what in (
        (address.is_unspecified, "unspecified"),
        (address.is_loopback, "loopback"),
        (address.is_link_local, "link-local"),
        (address.is_private, "private"),
        (address.is_multicast, "multicast"),
        (address.is_reserved, "reserved"),
    ):
        if test:
            return what
    if not address.is_global:
        return "not public"
    return None


@dataclass(frozen=True)
class Target:
    scheme: str
    host: str
    port: int
    path: str  # path and query, as sent in the request line


def parse(url: str) -> Target:
    """Check the form of the URL (not its addresses)."""
    url = url.strip()
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise FetchRefused(f"not a valid URL ({exc})") from exc
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise FetchRefused("only http:// and https:// URLs may be used (no files or other schemes)")
    host = (parts.hostname or "").rstrip(".")
    if not host:
        raise FetchRefused("the URL has no host")
    if parts.username is not None or parts.password is not None:
        raise FetchRefused("the URL must not contain a user name or password")
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return Target(scheme, host, port or (443 if scheme == "https" else 80), path)


def resolve(host: str, port: int) -> list[Address]:
    try:
        literal = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    if literal is not None:
        return [literal]
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise FetchRefused(f"cannot resolve host {host}") from exc
    found: list[Address] = []
    for info in infos:
        address = ipaddress.ip_address(info[4][0].split("%", 1)[0])
        if address not in found:
            found.append(address)
    if not found:
        raise FetchRefused(f"cannot resolve host {host}")
    return found


def check_addresses(host: str, addresses: Iterable[Address]) -> None:
    """Every address must be allowed: a name resolving to one public and one private address
    could be connected to either."""
    names, networks = _allowed_entries()
    if host.lower() in names:
        return
    for address in addresses:
        plain = _plain(address)
        if any(plain in net or address in net for net in networks):
            continue
        problem = address_problem(address)
        if problem is not None:
            raise FetchRefused(
                f"host {host} is at {_article(problem)} {problem} address ({address}); only public "
                "addresses "
                "may be fetched unless BMS_ICAL_ALLOWED_HOSTS names the host or address"
            )


class PinnedHTTPConnection(http.client.HTTPConnection):
    """An HTTP connection to the address that was checked, not to whatever the host name
    resolves to a moment later (DNS rebinding). The request's Host header still names the host.

    It overrides connect(), the documented step that opens the connection, with documented
    calls only (socket.create_connection, SSLContext.wrap_socket). The one thing it assumes of
    http.client beyond its documentation is that requests are sent on the socket connect()
    leaves in `self.sock`, as every HTTPConnection subclass does; tests/control/
    test_ical_security.py pins it (a name that resolves nowhere is still fetched)."""

    def __init__(self, host: str, port: int, address: Address, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self.address = address

    def connect(self) -> None:
        self.sock = socket.create_connection((str(self.address), self.port), self.timeout)
        # As http.client does: a request goes out in one segment, not held for Nagle's timer.
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class PinnedHTTPSConnection(PinnedHTTPConnection):
    """As PinnedHTTPConnection, over TLS: SNI and the certificate check use the host name."""

    default_port = http.client.HTTPS_PORT

    def __init__(
        self, host: str, port: int, address: Address, timeout: float, context: ssl.SSLContext
    ) -> None:
        super().__init__(host, port, address, timeout)
        self.tls = context

    def connect(self) -> None:
        super().connect()
        self.sock = self.tls.wrap_socket(self.sock, server_hostname=self.host)


def _connection(target: Target, address: Address, timeout: float) -> PinnedHTTPConnection:
    if target.scheme == "https":
        return PinnedHTTPSConnection(
            target.host, target.port, address, timeout, ssl.create_default_context()
        )
    return PinnedHTTPConnection(target.host, target.port, address, timeout)


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # already closed: the fetch ended as the timer fired


def _remaining(deadline: float, host: str) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise FetchRefused(f"fetching from {host} took longer than {timeout_s():g} s")
    return left


def fetch(url: str) -> bytes:
    """The body of a 200 answer, at most max_bytes(), within timeout_s() in all."""
    deadline = time.monotonic() + timeout_s()
    limit = max_bytes()
    for _hop in range(MAX_REDIRECTS + 1):
        target = parse(url)
        addresses = resolve(target.host, target.port)
        check_addresses(target.host, addresses)
        conn = _connection(target, addresses[0], _remaining(deadline, target.host))
        watchdog: threading.Timer | None = None
        try:
            conn.connect()
            # A server trickling its headers a byte at a time would pass every per-read
            # timeout: at the deadline the socket is shut, whatever is being read.
            watchdog = threading.Timer(_remaining(deadline, target.host), _shut, [conn.sock])
            watchdog.daemon = True
            watchdog.start()
            conn.request(
                "GET",
                target.path,
                headers={"User-Agent": "open-bms ical sync", "Accept-Encoding": "identity"},
            )
            response = conn.getresponse()
            if response.status in REDIRECTS:
                location = response.getheader("Location")
                if not location:
                    raise FetchRefused(f"{target.host} answered a redirect without a Location")
                url = urljoin(url, location)  # checked again at the top of the loop
                continue
            if response.status != 200:
                raise FetchRefused(f"{target.host} answered HTTP {response.status}")
            declared = response.getheader("Content-Length")
            if (
                declared is not None
                and declared.isascii()
                and declared.isdigit()
                and int(declared) > limit
            ):
                raise FetchRefused(f"the feed from {target.host} is larger than {limit} bytes")
            body = bytearray()
            while True:
                _remaining(deadline, target.host)
                chunk = response.read(min(CHUNK, limit + 1 - len(body)))
                if not chunk:
                    _remaining(deadline, target.host)  # shut by the watchdog: not a whole body
                    return bytes(body)
                body += chunk
                if len(body) > limit:
                    raise FetchRefused(f"the feed from {target.host} is larger than {limit} bytes")
        except (OSError, http.client.HTTPException) as exc:
            # The exception's class only: its text can quote what the server sent.
            raise FetchRefused(f"cannot fetch from {target.host}: {type(exc).__name__}") from exc
        finally:
            if watchdog is not None:
                watchdog.cancel()
            conn.close()
    raise FetchRefused(f"more than {MAX_REDIRECTS} redirects")


def _article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"
