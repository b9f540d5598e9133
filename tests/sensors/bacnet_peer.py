"""The independent BACnet controller (bac-py, tests/sensors/bacnet_controller.py) as a real
process on its own loopback address, for the tests of our client and of the control tick."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PEER_PYTHON = ROOT / ".venv-bacnet-peer" / "bin" / "python"
CONTROLLER = Path(__file__).with_name("bacnet_controller.py")
PEER_HOST, OUR_HOST = "127.0.0.2", "127.0.0.3"
INSTANCE = 2601


def free_udp_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class Controller:
    """The simulated boiler-house controller, started and stopped as a real process."""

    def __init__(
        self,
        port: int,
        broadcast_to: str,
        refuse_cov: tuple[str, ...] = (),
        bbmd: bool = False,
        name: str = "",
    ) -> None:
        self.port, self.broadcast_to, self.refuse_cov = port, broadcast_to, refuse_cov
        self.bbmd, self.name = bbmd, name
        self.process: subprocess.Popen | None = None

    @property
    def address(self) -> str:
        return f"{PEER_HOST}:{self.port}"

    def start(self) -> None:
        if not PEER_PYTHON.exists():
            pytest.fail(
                "No .venv-bacnet-peer: run `source scripts/setup.sh; bms_setup --for-tests`"
            )
        self.process = subprocess.Popen(
            [str(PEER_PYTHON), str(CONTROLLER), "--interface", PEER_HOST, "--port",
             str(self.port), "--instance", str(INSTANCE), "--broadcast-to", self.broadcast_to,
             *[arg for ref in self.refuse_cov for arg in ("--refuse-cov", ref)],
             *(["--bbmd"] if self.bbmd else []), *(["--name", self.name] if self.name else [])],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=sys.stderr, text=True,
        )  # fmt: skip
        assert self.process.stdout.readline().strip() == "ready"

    def plant(self, command: str) -> None:
        """Change a point at the controller (bacnet_controller.py's stdin commands)."""
        assert self.process is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline().strip()
        assert answer == "ok", f"{command}: {answer}"

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(timeout=10)
            self.process = None


@pytest.fixture
def controller(settings, redis_client):
    # A clean Redis too: which points a COV subscription covers, and the poll lock, are kept
    # there per device id; a test before this one with the same device id left them, and
    # its "covered" point was then never polled (seen in a run of several files).
    our_port = free_udp_port(OUR_HOST)
    settings.BMS_BACNET_ADDRESS = f"{OUR_HOST}/32"
    settings.BMS_BACNET_PORT = our_port
    peer = Controller(free_udp_port(PEER_HOST), f"{OUR_HOST}:{our_port}")
    peer.start()
    yield peer
    peer.stop()
