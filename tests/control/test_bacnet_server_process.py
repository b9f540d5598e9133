"""The server's write loop end to end: `manage.py bacnet_server` as the real process a site runs
(its own loopback port, the test database shared through DATABASE_URL), written to by the
independent bac-py client (tests/control/bacnet_peer_client.py) as a head-end would, and the
next control tick (run here) acting on what it accepted. The decisions themselves, in process:
tests/control/test_bacnet_writes.py."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from control import runtime
from control.models import Booking, Override, Zone
from control.runner import run_tick
from tests.conftest import test_database_url
from tests.processes import stop_process
from tests.sensors.bacnet_peer import OUR_HOST, PEER_HOST, free_udp_port

from . import factories as f
from .test_bacnet_server import peer

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def hall(transactional_db, redis_client) -> Zone:
    # Made before the server starts, so its first refresh serves it. frost off 7, cut-off 28 °C.
    return f.zone("Hall", temp=18.5, setback_setpoint=16.0)


server_process: list[subprocess.Popen] = []  # the running server, for a test to read its lines
served_lines: list[str] = []  # its log lines saying how much it served, in order


@pytest.fixture
def server(hall: Zone) -> Iterator[str]:
    """`manage.py bacnet_server` on its own port; its address once it has served the zones."""
    port = free_udp_port(OUR_HOST)
    env = dict(
        os.environ,
        DJANGO_SETTINGS_MODULE="bms.settings_test",
        DATABASE_URL=test_database_url(),
        BMS_BACNET_SERVER_ENABLED="1",
        BMS_BACNET_ADDRESS=f"{OUR_HOST}/32",
        BMS_BACNET_SERVER_PORT=str(port),
        BMS_BACNET_SERVER_INSTANCE="4194011",
        BMS_BACNET_SERVER_REFRESH_S="2",  # its bound: the rename test waits for a refresh
    )
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "bacnet_server"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        # It says where it listens, then logs how many zones it served: from then on it answers.
        assert "writes refused unless enabled" in proc.stdout.readline(), proc.poll()
        server_process[:] = [proc]
        served_lines.clear()
        refreshed(proc, "0 feeds, 1 zones served")
        yield f"{OUR_HOST}:{port}"
    finally:
        stop_process(proc, timeout_s=15)
    assert proc.returncode == 0, proc.stderr.read()


def zone_result(zone: Zone) -> dict:
    run_tick(timezone.now())
    return runtime.load_zones([zone.pk])[zone.pk]


def test_a_head_end_writes_a_zone_through_the_real_server_process(hall, server):
    n = hall.pk
    setpoint, occupancy = f"analog-value,{n}", f"binary-value,{n}"

    # Neither kind enabled: the writer is refused in BACnet's words, nothing is held.
    refused = peer(server, "--write", f"{setpoint}=22.5", "--write", f"{occupancy}=1")
    assert [a.get("error") for a in refused] == ["property: write_access_denied"] * 2
    assert not Override.objects.exists()

    # An engineer enables both (admin or API); the running server decides by the zone's flags
    # at each write, so no restart and no refresh is needed.
    Zone.objects.filter(pk=n).update(bacnet_setpoint_writable=True, bacnet_occupancy_writable=True)
    accepted = peer(server, "--write", f"{setpoint}=22.5")
    assert accepted == [{"write": setpoint, "ok": True}]
    override = Override.objects.get(zone=hall)
    assert override.setpoint == 22.5 and override.created_by is None
    writer = override.reason.removeprefix("BACnet write from ").split(": ")[0]
    assert writer.startswith(f"{PEER_HOST}:")  # the audit names the writer's address
    assert override.reason == f"BACnet write from {writer}: setpoint 22.5 °C"
    # The next tick works to it: 18.5 °C is below 22.5, so the zone calls for heat.
    result = zone_result(hall)
    assert (result["demand"], result["target"]) == (True, 22.5)
    assert "BACnet write from" in result["reason"]

    # Unoccupied from the network: the setback (16 °C) holds, the latest override winning.
    assert peer(server, "--write", f"{occupancy}=0") == [{"write": occupancy, "ok": True}]
    latest = Override.objects.filter(zone=hall).latest("pk")
    assert latest.reason.endswith(": unoccupied") and latest.setpoint == 16.0
    result = zone_result(hall)
    assert (result["demand"], result["target"]) == (False, 16.0)

    # A setpoint the zone's own limits refuse (its cut-off, 28 °C) changes nothing.
    out_of_range = peer(server, "--write", f"{setpoint}=28")
    assert out_of_range == [{"write": setpoint, "error": "property: value_out_of_range"}]
    assert Override.objects.filter(zone=hall).count() == 2
    assert zone_result(hall)["target"] == 16.0


def refreshed(proc: subprocess.Popen, line: str, most: int = 50) -> None:
    """Read the server's log (stderr) until it says it served `line` ("0 feeds, 1 zones
    served": logged at the first refresh and when a count changes), keeping each such line."""
    seen = []
    for _ in range(most):
        seen.append(proc.stderr.readline().strip())
        if "zones served" in seen[-1]:
            served_lines.append(seen[-1])
        if seen[-1].endswith(f"BACnet server: {line}"):
            return
    pytest.fail(f"no refresh said {line!r}: {seen}")


def read_until(server: str, refs: list[str], expected: list, tries: int = 20) -> list:
    """The values of `refs`, read until they are `expected` (a refresh after the change has
    run) or `tries` reads have passed."""
    args = [a for ref in refs for a in ("--read", ref)]
    for _ in range(tries):
        values = [a.get("value") for a in peer(server, *args)]
        if values == expected:
            break
    return values


def test_the_running_server_follows_a_zone_renamed_added_and_disabled(hall, server):
    """No restart: the next refresh names the zone's objects anew, serves a new zone, and
    shows a disabled one neither occupied nor calling for heat."""
    now = timezone.now()
    Booking.objects.create(zone=hall, title="Yoga", start=now - timedelta(minutes=1),
                           end=now + timedelta(hours=1))  # fmt: skip
    run_tick(now)  # booked and at 18.5 °C: occupied and calling for heat
    n = hall.pk
    before = read_until(server, [f"binary-value,{n}", f"binary-input,{n}"], [1, 1])
    assert before == [1, 1]

    Zone.objects.filter(pk=hall.pk).update(name="Main hall", enabled=False)
    store = f.zone("Store", temp=12.0)
    refreshed(server_process[0], "0 feeds, 2 zones served")
    answers = peer(
        server,
        "--read", f"analog-input,{n}:object-name", "--read", f"analog-value,{n}:object-name",
        "--read", f"binary-value,{n}", "--read", f"binary-input,{n}",
        "--read", f"analog-input,{store.pk}:object-name", "--read", f"analog-input,{store.pk}",
        "--read", f"analog-value,{n}",
    )  # fmt: skip
    values = [a.get("value") for a in answers]
    assert values[:4] == ["Main hall temperature", "Main hall setpoint", 0, 0]
    assert values[4] == "Store temperature"
    assert values[5] == pytest.approx(12.0)
    assert values[6] == 0.0  # disabled: no tick works to a setpoint

    # Refreshes that change no count say nothing: a line each refresh was 8,600 lines a day.
    f.set_temperature(store, 13.0)
    assert read_until(server, [f"analog-input,{store.pk}"], [pytest.approx(13.0)]) == [
        pytest.approx(13.0)
    ]
    proc = server_process[0]
    stop_process(proc, timeout_s=15)
    rest = proc.stderr.read().splitlines()
    served_lines.extend(line for line in rest if "zones served" in line)
    assert [line.split(" INFO ", 1)[1] for line in served_lines] == [
        "control.management.commands.bacnet_server: BACnet server: 0 feeds, 1 zones served",
        "control.management.commands.bacnet_server: BACnet server: 0 feeds, 2 zones served",
    ]
    # Through the logger: each with its date and time.
    assert all(line[:4].isdigit() and line[4] == "-" for line in served_lines)
