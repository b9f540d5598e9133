"""Real processes for the fault tests: a private redis-server, the web site, Celery workers and
beat, each a separate OS process the test can kill, stop and start again.

Everything runs against the pytest test database (shared file, or PostgreSQL database reached
through a TCP proxy the test can cut: tcp_proxy.py), the test's BMS_DATA_DIR and a redis-server
of its own on a free port, never the machine's shared Redis: the fault tests restart and kill it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import redis

from tests.reliability.tcp_proxy import TcpProxy
from tests.wait import wait_for

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = "tests.reliability.fault_settings"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class PrivateRedis:
    """A redis-server of our own: `appendonly` as in docker/compose.yaml, or not."""

    def __init__(self, appendonly: bool = True) -> None:
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="bms-fault-redis-"))
        self.appendonly = appendonly
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, socket_timeout=5, socket_connect_timeout=2)

    def start(self) -> None:
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
             "--dir", str(self.dir), "--appendonly", "yes" if self.appendonly else "no",
             "--appendfsync", "everysec", "--save", "", "--daemonize", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip

        def up() -> bool:
            try:
                return bool(self.client().ping())
            except redis.RedisError:
                return False

        wait_for(up, 10, "redis-server to answer")

    def stop(self, hard: bool = False) -> None:
        """SIGTERM: what `docker compose restart redis` sends; Redis flushes the AOF and exits.
        hard=True: SIGKILL, a power cut for Redis."""
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGKILL if hard else signal.SIGTERM)
        self.proc.wait(timeout=15)
        self.proc = None

    def close(self) -> None:
        self.stop(hard=True)
        shutil.rmtree(self.dir, ignore_errors=True)


@dataclass
class Site:
    """The web server, workers and beat, sharing one environment."""

    redis: PrivateRedis
    database_url: str
    log_dir: Path
    extra_env: dict[str, str] = field(default_factory=dict)
    # PostgreSQL: the TCP proxy `database_url` goes through (tcp_proxy.TcpProxy); None on SQLite.
    db_proxy: TcpProxy | None = None
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    web_port: int = field(default_factory=free_port)

    def env(self) -> dict[str, str]:
        return dict(
            os.environ,
            DJANGO_SETTINGS_MODULE=SETTINGS,
            DATABASE_URL=self.database_url,
            REDIS_URL=self.redis.url,
            CELERY_BROKER_URL=self.redis.url,
            PYTHONPATH=str(ROOT),
            **self.extra_env,
        )

    def _spawn(self, name: str, args: list[str], env: dict[str, str] | None = None):
        log = open(self.log_dir / f"{name}.log", "ab")
        # Own session: a kill takes the process and all its children, like a crash.
        proc = subprocess.Popen(
            args, cwd=ROOT, env=env or self.env(), stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        log.close()
        self.procs[name] = proc
        return proc

    # --- web --------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.web_port}"

    def start_web(self) -> None:
        self._spawn(
            "web",
            [sys.executable, "manage.py", "runserver", f"127.0.0.1:{self.web_port}",
             "--noreload", "--skip-checks"],
        )  # fmt: skip

        def up() -> bool:
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=5):
                    return True
            except urllib.error.HTTPError:
                return True  # answering (503 while the workers are not up yet)
            except OSError:
                return False

        wait_for(up, 30, "the web server")

    def post(self, path: str, body, key: str, timeout_s: float = 10) -> int:
        """POST JSON; the HTTP status, or 0 when the connection failed."""
        request = urllib.request.Request(
            self.url + path,
            data=json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as response:
                return response.status
        except urllib.error.HTTPError as exc:
            return exc.code
        except OSError:
            return 0

    # --- celery -----------------------------------------------------------------------------

    def start_worker(self, name: str = "worker", queues: str = "ingest,commit", **env) -> None:
        self._spawn(
            name,
            [sys.executable, "-m", "celery", "-A", "bms", "worker", "-Q", queues, "-c", "2",
             "--without-gossip", "--without-mingle", "-l", "INFO", "-n", f"{name}-{os.getpid()}@%h"],
            env=dict(self.env(), **env) if env else None,
        )  # fmt: skip

    def start_beat(self, name: str = "beat", **env) -> None:
        schedule = self.log_dir / f"beat-schedule-{time.monotonic_ns()}"
        self._spawn(
            name,
            [sys.executable, "-m", "celery", "-A", "bms", "beat", "-l", "INFO", "-s", str(schedule),
             "--pidfile", ""],
            env=dict(self.env(), **env) if env else None,
        )  # fmt: skip

    def kill(self, name: str) -> None:
        """SIGKILL the process and its children at once (no warm shutdown, nothing flushed)."""
        proc = self.procs.pop(name)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass  # it had died already: that is the state we want
        proc.wait(timeout=10)

    def stop(self, name: str) -> None:
        proc = self.procs.pop(name, None)
        if proc is None:
            return
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        except ProcessLookupError:
            proc.wait(timeout=10)

    def exited(self) -> dict[str, int]:
        """Processes of the site that have exited by themselves: name -> exit code."""
        return {
            name: proc.returncode for name, proc in self.procs.items() if proc.poll() is not None
        }

    def close(self) -> None:
        for name in list(self.procs):
            self.stop(name)


def ingest_waiting(client: redis.Redis) -> int:
    """Requests in the node streams not processed yet (sensors/ingest/stream.py)."""
    return sum(client.xlen(key) for key in client.scan_iter(match="sensors:ingest:stream:*"))


def drain_pending(client: redis.Redis, stream: str) -> int:
    """Requests of a node stream read by a drain and not acknowledged (0 before any drain made
    the stream's consumer group)."""
    try:
        return client.xpending(stream, "drain")["pending"]
    except redis.ResponseError:  # NOGROUP: no drain has looked at the stream yet
        return 0


def queues_idle(client: redis.Redis, queues=("ingest", "commit")) -> bool:
    """No message waiting, none delivered-but-unacknowledged (kombu's `unacked` hash) and no
    accepted ingest request still in its node's stream."""
    pipe = client.pipeline(transaction=False)
    for queue in queues:
        pipe.llen(queue)
    pipe.hlen("unacked")
    return not any(pipe.execute()) and ingest_waiting(client) == 0


def queue_state(client: redis.Redis) -> dict:
    """What is still pending, for a timeout's message: which part did not drain, and for how
    long (ages in seconds; TTLs of the locks that can hold a drain back)."""
    now = time.time()

    def ages(key: str) -> list[float]:
        return [round(now - score, 1) for _, score in client.zrange(key, 0, 9, withscores=True)]

    return {
        "ingest": client.llen("ingest"),
        "commit": client.llen("commit"),
        "unacked": client.hlen("unacked"),
        "unacked_ages_s": ages("unacked_index"),  # oldest first: kombu restores after its timeout
        "unacked_mutex_ttl_s": client.ttl("unacked_mutex"),  # kombu's restore sweep lock
        "ingest_streams": ingest_waiting(client),
        "ingest_leases_ttl_ms": [
            client.pttl(k) for k in client.scan_iter(match="sensors:ingest:lease:*")
        ],
        "dirty_feeds": client.scard("feeds:dirty"),
        "commit_lock_ttl_s": client.ttl("feeds:commit:lock"),
        "beat_age_s": _age(client.get("bms:health:beat"), now),
    }


def _age(stamp: bytes | None, now: float) -> float | None:
    return None if stamp is None else round(now - float(stamp), 1)


def buffer_empty(client: redis.Redis) -> bool:
    return client.scard("feeds:dirty") == 0


def settled(client: redis.Redis, for_s: float = 2.0) -> bool:
    """Queues idle and buffer committed, and still so `for_s` later: a message being restored
    or just taken by a worker is, for a moment, in neither a queue nor the unacked hash."""
    if not (queues_idle(client) and buffer_empty(client)):
        return False
    time.sleep(for_s)  # a real pause: proves nothing is still moving, which no poll can show
    return queues_idle(client) and buffer_empty(client)


class Sender(threading.Thread):
    """A gateway posting readings in batches, retrying a refused batch like emonhub does.

    `accepted` holds every (t, values) the site answered 2xx for: what must not be lost.
    """

    def __init__(
        self,
        site: Site,
        key: str,
        node: str,
        rows: list[tuple[int, dict]],
        batch: int,
        pace_s: float = 0.0,
    ):
        super().__init__(daemon=True)
        self.site, self.key, self.node, self.rows, self.batch = site, key, node, rows, batch
        self.pace_s = pace_s  # pause between posts, so ingest is sustained over the faults
        self.accepted: list[tuple[int, dict]] = []
        self.refused: dict[int, int] = {}  # status -> count (0 = connection failed)
        self.requests = 0

    def run(self) -> None:
        for i in range(0, len(self.rows), self.batch):
            chunk = self.rows[i : i + self.batch]
            body = [{"node": self.node, "time": t, "values": v} for t, v in chunk]

            def post(body=body) -> bool:
                self.requests += 1
                status = self.site.post("/api/v1/readings", body, self.key)
                if 200 <= status < 300:
                    return True
                self.refused[status] = self.refused.get(status, 0) + 1
                return False

            try:
                wait_for(post, 120, f"batch {i} accepted", every_s=0.2)  # emonhub's retry
            except AssertionError:
                continue  # given up on, as emonhub would: never counted as accepted
            self.accepted.extend(chunk)
            # A real pause: ingest is sustained over the whole fault period, not a burst.
            time.sleep(self.pace_s)


def redelivered(log_path: Path) -> int:
    """Task ids a worker log shows received more than once: batches redelivered after a kill
    (or retried after a transient error)."""
    if not log_path.exists():
        return 0
    seen: dict[str, int] = {}
    for line in log_path.read_text(errors="replace").splitlines():
        if "] received" in line and "Task " in line:
            task_id = line.split("[", 2)[-1].split("]", 1)[0]
            seen[task_id] = seen.get(task_id, 0) + 1
    return sum(1 for n in seen.values() if n > 1)


def task_errors(log_path: Path) -> int:
    """Tasks a worker log shows failing (e.g. a commit while the database was away)."""
    if not log_path.exists():
        return 0
    return log_path.read_text(errors="replace").count("raised unexpected")
