"""Hosts in network namespaces: two control hosts, each a network namespace of its
own (a veth on a bridge the test creates and removes) and a PID namespace of its own, reach
Redis and the relay boards over that network; beat runs on the "server" (the root namespace).
The host holding a control tick is cut off the network mid-tick (its link set down): it is
alive but silent, so only its lease running out frees the tick. The other host ticks within
two tick periods, and the relay it commands keeps its state (re-asserted when changed behind
the system's back). Needs root (ip netns) and SQLite (the database is a file both reach)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import pytest
import redis
from django.db import connection

from control import runtime
from control.drivers.simulated_board import RelayBoard
from core import redis as bms_redis
from sensors.models import Actuator
from tests.conftest import ROOT, test_database_url
from tests.control import factories as f
from tests.reliability.harness import free_port
from tests.wait import wait_for

pytestmark = pytest.mark.integration

TICK_S = 3
TAG = os.getpid() % 10_000
NET = f"10.{200 + os.getpid() % 50}.{os.getpid() % 250}"  # a /24 of this run's own
SERVER_IP = f"{NET}.1"


def sh(*args: str) -> None:
    subprocess.run(args, check=True, capture_output=True, timeout=30)


class Hosts:
    """A bridge with the server's address, and one namespace per host on a veth to it."""

    def __init__(self, names: list[str]) -> None:
        self.bridge = f"bmsbr{TAG}"
        self.names = names
        self.ns = {n: f"bms-{n}-{TAG}" for n in names}
        self.veth = {n: f"bv{n}{TAG}" for n in names}

    def up(self) -> None:
        sh("ip", "link", "add", self.bridge, "type", "bridge")
        sh("ip", "addr", "add", f"{SERVER_IP}/24", "dev", self.bridge)
        sh("ip", "link", "set", self.bridge, "up")
        for i, n in enumerate(self.names):
            ns, veth = self.ns[n], self.veth[n]
            sh("ip", "netns", "add", ns)
            sh("ip", "link", "add", veth, "type", "veth", "peer", "name", f"{veth}p")
            sh("ip", "link", "set", f"{veth}p", "netns", ns)
            sh("ip", "link", "set", veth, "master", self.bridge)
            sh("ip", "link", "set", veth, "up")
            sh(
                "ip",
                "netns",
                "exec",
                ns,
                "ip",
                "addr",
                "add",
                f"{NET}.{10 + i}/24",
                "dev",
                f"{veth}p",
            )
            sh("ip", "netns", "exec", ns, "ip", "link", "set", f"{veth}p", "up")
            sh("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")

    def cut(self, name: str, down: bool = True) -> None:
        sh("ip", "link", "set", self.veth[name], "down" if down else "up")

    def down(self) -> None:
        for ns in self.ns.values():
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)
        subprocess.run(["ip", "link", "del", self.bridge], capture_output=True, timeout=30)


class HungBoard:
    """Accepts Modbus connections on the server's address and never answers: a slow tick."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind((SERVER_IP, 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]


def namespace_of(proc: subprocess.Popen) -> str:
    children = open(f"/proc/{proc.pid}/task/{proc.pid}/children").read().split()
    return os.readlink(f"/proc/{children[0]}/ns/pid").strip("pid:[]")


@pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("ip") or not shutil.which("redis-server"),
    reason="needs root, iproute2 and redis-server",
)
def test_a_control_host_cut_off_mid_tick_is_replaced_within_two_ticks(
    transactional_db, settings, tmp_path
):
    if connection.vendor != "sqlite":
        pytest.skip("the hosts reach the database as a file (SQLite)")
    hosts = Hosts(["a", "b"])
    procs: dict[str, subprocess.Popen] = {}
    redis_dir = Path(tempfile.mkdtemp(prefix="bms-netns-redis-"))
    try:
        hosts.up()
        port = free_port()
        procs["redis"] = subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", f"127.0.0.1 {SERVER_IP}",
             "--protected-mode", "no", "--save", "", "--appendonly", "no", "--dir", str(redis_dir)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )  # fmt: skip
        url = f"redis://{SERVER_IP}:{port}/0"
        settings.REDIS_URL = url
        bms_redis._clients.clear()
        client = redis.Redis.from_url(url, socket_timeout=2)
        wait_for(lambda: _quiet(client.ping), 10, "redis-server")

        board = RelayBoard(coils=8)
        board.host = SERVER_IP
        board.start()
        hung = HungBoard()
        valve = f.relay("Hall valve", board, coil=1)
        stuck = Actuator.objects.create(
            name="Hall valve 2", kind="valve", host=SERVER_IP, port=hung.port, coil=1,
            min_on_s=0, min_off_s=0,
        )  # fmt: skip
        zone = f.zone("Hall", valve, stuck, temp=4.0)  # frost protection: both ON

        env = dict(
            os.environ,
            DJANGO_SETTINGS_MODULE="bms.settings_test",
            DATABASE_URL=test_database_url(),
            BMS_DATA_DIR=str(tmp_path),
            REDIS_URL=url,
            BMS_CONTROL_TICK=str(TICK_S),
            BMS_CONTROL_DEVICE_TIMEOUT="0.5",
            BMS_CONTROL_DEVICE_DEADLINE="1.5",
        )
        env.pop("CELERY_BROKER_URL", None)

        def spawn(name: str, prefix: list[str], args: list[str]) -> None:
            log = open(tmp_path / f"{name}.log", "wb")
            procs[name] = subprocess.Popen(
                [*prefix, sys.executable, "-m", "celery", "-A", "bms", *args, "-l", "INFO"],
                cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip

        for n in hosts.names:
            spawn(
                f"control-{n}",
                ["ip", "netns", "exec", hosts.ns[n], "unshare", "--pid", "--fork", "--mount",
                 "--mount-proc"],
                ["worker", "-Q", "control", "-c", "1", "--without-gossip", "--without-mingle",
                 "-n", f"control-{n}-{os.getpid()}@%h"],
            )  # fmt: skip
        spawn("beat", [], ["beat", "--pidfile="])

        seen: list[float] = []

        def ticks() -> list[float]:
            f.set_temperature(zone, 4.0)  # the sensor stays fresh
            raw = _quiet(lambda: client.get(runtime.LAST_TICK_KEY))
            if raw:
                at = datetime.fromisoformat(json.loads(raw)["at"]).timestamp()
                if not seen or at > seen[-1]:
                    seen.append(at)
            return seen

        wait_for(lambda: len(ticks()) >= 2 and board.coil(1), 120, "ticks switching the relay")
        names = {namespace_of(procs[f"control-{n}"]): n for n in hosts.names}

        def holder() -> str | None:
            ticks()
            value = _quiet(lambda: client.get(runtime.TICK_LOCK_KEY))
            return names.get(value.decode().split(" ")[2].split(":")[1]) if value else None

        victim = wait_for(holder, 30, "a tick holding the lock")
        cut_at = time.time()
        hosts.cut(victim)
        before = len(seen)
        wait_for(lambda: len(ticks()) > before and seen[-1] > cut_at, 60, "the other host")
        takeover_s = seen[-1] - cut_at
        board.set_coil(1, False)  # a relay that rebooted, behind the system's back
        corrected_from = time.time()
        wait_for(lambda: ticks() and board.coil(1), 30, "the relay's state restored")
        corrected_s = time.time() - corrected_from
        hosts.cut(victim, down=False)  # back on the network: one tick at a time again
        back = len(seen)
        wait_for(lambda: len(ticks()) >= back + 4, 60, "ticks with both hosts back")
        spacing = [b - a for a, b in zip(seen[back:], seen[back + 1 :], strict=False)]
        gaps = [b - a for a, b in zip(seen, seen[1:], strict=False)]
        print(
            f"\nnetns hosts: control host {victim} cut off mid-tick; the other ticked "
            f"{takeover_s:.1f} s later (tick {TICK_S} s, lease {TICK_S} s); longest gap between "
            f"ticks {max(gaps):.1f} s; relay changed behind our back restored in "
            f"{corrected_s:.1f} s; after reconnecting, ticks {min(spacing):.1f}–"
            f"{max(spacing):.1f} s apart"
        )
        # How soon is the printed figure (two-tick target, docs/RELIABILITY.md), not an
        # assertion: what must hold is that the other host took over and corrected the relay.
        assert takeover_s > 0
        assert board.coil(1) is True
        assert min(spacing) > TICK_S / 2  # the reconnected host does not double the ticks
        board.stop()
        hung.sock.close()
    finally:
        for proc in procs.values():
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(timeout=10)
        hosts.down()
        bms_redis._clients.clear()
        shutil.rmtree(redis_dir, ignore_errors=True)


def _quiet(call):
    try:
        return call()
    except (redis.RedisError, OSError):
        return None
