"""The demo's Modbus ports follow BMS_PORT, or are free ports, so a second copy of
scripts/run-site.sh runs beside the first (issue #26 item 11: with 15020/15021 fixed the
second simulator could not bind, exited, and the script stopped everything)."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from demo.ports import BACNET_BASE, BASE, DEFAULT_WEB_PORT, demo_ports, udp_free
from tests.conftest import ROOT


def free_pair_web_port() -> int:
    """A web port whose two demo ports are free right now (this machine is shared)."""
    for web in range(DEFAULT_WEB_PORT + 40, DEFAULT_WEB_PORT + 400):
        relay = BASE + 2 * (web - DEFAULT_WEB_PORT)
        if all(_bindable(p) for p in (relay, relay + 1)):
            return web
    pytest.fail("no free pair of ports above 15100 on this machine")


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def hold(port: int) -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", port))
    sock.listen()
    return sock


def test_the_ports_follow_the_web_port_two_per_port():
    web = free_pair_web_port()
    relay = BASE + 2 * (web - DEFAULT_WEB_PORT)
    assert demo_ports(web) == (relay, relay + 1)


def test_ports_a_first_copy_holds_are_never_handed_to_a_second():
    web = free_pair_web_port()
    first = demo_ports(web)
    held = [hold(p) for p in first]  # the first copy's simulator listening
    try:
        second = demo_ports(web)  # a copy that computes the same pair finds it taken
        assert set(second).isdisjoint(first) and second[0] != second[1]
        assert all(_bindable(p) for p in second)
    finally:
        for sock in held:
            sock.close()


def test_a_web_port_whose_pair_is_out_of_range_gets_free_ports():
    relay, meter = demo_ports(80)  # 15020 - 2 * 7920 < 1024
    assert relay != meter and all(1024 <= p <= 65535 for p in (relay, meter))


def test_run_site_passes_the_ports_of_its_bms_port_to_the_simulator():
    """The script's own lines, run as it runs them, for BMS_PORT=<web>: the Modbus pair and
    the BACnet controller's UDP port (0 when taken: the demo then runs without it)."""
    script = (ROOT / "scripts" / "run-site.sh").read_text()
    lines = [line.strip() for line in script.splitlines() if "demo.ports" in line]
    assert len(lines) == 2 and "--relay-port" in script and '"$RELAY_PORT"' in script
    assert '--bacnet-port "$BACNET_PORT"' in script
    web = free_pair_web_port()
    done = subprocess.run(
        ["bash", "-c", "\n".join(lines) + '\necho "$RELAY_PORT $METER_PORT $BACNET_PORT"'],
        env={"PATH": "/usr/bin:/bin", "PY": sys.executable, "PORT": str(web)},
        cwd=ROOT, capture_output=True, text=True, check=True, timeout=30,
    )  # fmt: skip
    relay = BASE + 2 * (web - DEFAULT_WEB_PORT)
    bacnet = BACNET_BASE + web - DEFAULT_WEB_PORT
    assert done.stdout.split() == [str(relay), str(relay + 1),
                                   str(bacnet if udp_free(bacnet) else 0)]  # fmt: skip


def test_a_bad_argument_is_a_usage_line_not_a_traceback():
    done = subprocess.run(
        [sys.executable, "-m", "demo.ports", "http"], cwd=ROOT, capture_output=True, text=True,
        timeout=30,
    )  # fmt: skip
    assert done.returncode == 2 and "usage" in done.stderr and "Traceback" not in done.stderr
