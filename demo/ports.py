"""The demo's Modbus TCP ports (simulated relay board, grid meter) for a web port, and its
BACnet controller's UDP port.

scripts/run-site.sh stops everything as soon as one process stops, and the demo simulator stops
when it cannot bind its ports: with the ports fixed at 15020/15021 a second copy of the site on
one machine (BMS_PORT=8001) could not run at all. So the ports follow the web port, two per web
port, 15020/15021 beside the default 8000 (8001: 15022/15023; 8080: 15180/15181); when those are
taken or out of range, two free ports the system picks. Plain stdlib, no Django:

    python -m demo.ports 8001      ->  15022 15023
"""

from __future__ import annotations

import socket
import sys

DEFAULT_WEB_PORT = 8000
BASE = 15020  # the relay board's port beside the default web port; the meter's is the next
BACNET_BASE = 47820  # UDP; 47808/47809 are BACnet discovery's and our own server's
HOST = "127.0.0.1"
MAX_PICKS = 16


def _free(port: int, host: str = HOST, kind: int = socket.SOCK_STREAM) -> bool:
    with socket.socket(socket.AF_INET, kind) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def _any_free(host: str = HOST) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def demo_ports(web_port: int, host: str = HOST) -> tuple[int, int]:
    """(relay board port, meter port) for a site whose web server listens on `web_port`."""
    relay = BASE + 2 * (web_port - DEFAULT_WEB_PORT)
    if 1024 <= relay < 65535 and _free(relay, host) and _free(relay + 1, host):
        return relay, relay + 1
    # The system's picks, two different ones (a port just released may be handed out again).
    relay = _any_free(host)
    for _ in range(MAX_PICKS):
        meter = _any_free(host)
        if meter != relay:
            return relay, meter
    raise OSError("no two free ports for the demo's relay board and meter")


def udp_free(port: int, host: str = HOST) -> bool:
    return _free(port, host, socket.SOCK_DGRAM)


def bacnet_port(web_port: int, host: str = HOST) -> int:
    """The demo BACnet controller's UDP port for a site on `web_port` (47820 beside 8000, 47821
    beside 8001, so a second copy of the site has its own), or 0 (none) when it is taken or
    out of range: then the demo runs without it (demo/bacnet_controller.py).

        python -m demo.ports --bacnet 8001   ->  47821
    """
    port = BACNET_BASE + (web_port - DEFAULT_WEB_PORT)
    if not 1024 <= port <= 65535 or not udp_free(port, host):
        return 0
    return port


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "--bacnet" and argv[1].isdigit():
        print(bacnet_port(int(argv[1])))
        return 0
    if len(argv) != 1 or not argv[0].isdigit() or not 1 <= int(argv[0]) <= 65535:
        print("usage: python -m demo.ports [--bacnet] WEB_PORT (1-65535)", file=sys.stderr)
        return 2
    relay, meter = demo_ports(int(argv[0]))
    print(relay, meter)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
