"""Ingest benchmark, end to end: HTTP post -> Celery -> feed store -> read back and verified.

Starts its own gunicorn and Celery worker on a scratch data dir, SQLite file and Redis db,
then runs:
  1. bulk:   /input/bulk, 100 rows x 10 values per request, N concurrent clients for D seconds;
             throughput counts only values read back from the feed files (target >= 20,000/s).
  2. single: sequential one-reading posts to /api/v1/readings (target >= 500 req/s), p50/p99,
             then the same posts to gunicorn alone (bench/gunicorn_alone.py: same workers and
             threads, a fixed 202, nothing behind it): the site should reach >= 85 % of that;
             and to gunicorn + one XADD (bench/gunicorn_xadd_floor.py), the floor of any
             design that appends a post to the stream before answering it.
  3. fresh (--fresh-only, instead of 1 and 2): sites of N nodes x 5 values every 10 s (--fresh-nodes 300,10000: 30 and 1,000
             requests a second), each post on its own connection, with beat running as
             run-site.sh runs it (commits on the same worker); prints the time from each
             post's `ok` to its value readable through /feed/data.json, p50/p95/p99/max
             (bench/fresh_load.py), beside the figures before issue #29; with
             --fresh-timeline S also, for every S seconds, the readable times of the posts
             answered in it and the cores the web, worker, client and Redis used.

    .venv/bin/python bench/ingest.py [--seconds 60] [--clients 8] [--single-seconds 20]
                                     [--single-only] [--fresh-only] [--fresh-nodes 300,10000]
                                     [--fresh-timeline 10]

The single phase also prints the CPU time each process group (web, worker, Redis, this
client) spent per request: on 2 cores they share, so that says where the rate goes.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parent.parent
KEYS = [str(i) for i in range(1, 11)]
ROWS_PER_REQUEST = 100


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def value_of(row: int, key_index: int) -> float:
    # Exact in float32, different per row and key, so a lost or misplaced value shows.
    return float((row * 7 + key_index * 131) % 100_000) / 4


class Services:
    def __init__(
        self, env: dict, port: int, scratch: Path, workers: int, threads: int, beat: bool = False
    ) -> None:
        self.env, self.port, self.scratch = env, port, scratch
        self.workers, self.threads, self.beat = workers, threads, beat
        self.procs: list[subprocess.Popen] = []

    def start(self) -> None:
        py = sys.executable
        subprocess.run([py, "manage.py", "migrate", "-v", "0"], cwd=ROOT, env=self.env, check=True)
        logs = open(self.scratch / "services.log", "ab")
        # With the site's gunicorn settings, as scripts/run-site.sh starts it (the application
        # loaded once and forked, the listen backlog of 4,096); until 2026-11-27 the bench ran
        # gunicorn's defaults (a backlog of 2,048: posts refused sooner at 10,000 nodes).
        self.procs.append(subprocess.Popen(
            [str(Path(py).parent / "gunicorn"), "-c", "python:bms.gunicorn_conf",
             "bms.wsgi:application", "--bind", f"127.0.0.1:{self.port}", "--workers",
             str(self.workers), "--threads", str(self.threads), "--timeout", "30",
             "--keep-alive", "30"],
            cwd=ROOT, env=dict(self.env, PYTHONPATH=str(ROOT)), stdout=logs, stderr=subprocess.STDOUT,
        ))  # fmt: skip
        self.procs.append(subprocess.Popen(
            [py, "-m", "celery", "-A", "bms", "worker", "-Q", "ingest,commit", "-c", "2",
             "--without-gossip", "--without-mingle", "-l", os.environ.get("BENCH_WORKER_LOG", "WARNING"),
             "-n", f"bench-{os.getpid()}@%h"],
            cwd=ROOT, env=self.env, stdout=logs, stderr=subprocess.STDOUT,
        ))  # fmt: skip
        if self.beat:  # commits every BMS_FEED_COMMIT_INTERVAL on the same worker, as on a site
            self.procs.append(subprocess.Popen(
                [py, "-m", "celery", "-A", "bms", "beat", "-l", "WARNING"],
                cwd=ROOT, env=self.env, stdout=logs, stderr=subprocess.STDOUT,
            ))  # fmt: skip
        deadline = time.monotonic() + 120  # a loaded 2-core machine starts slowly
        while time.monotonic() < deadline:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                conn.request("GET", "/healthz")
                conn.getresponse().read()
                return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError("gunicorn did not start; see services.log")

    def stop(self) -> None:
        for proc in self.procs:
            proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()


def process_tree(pid: int) -> list[int]:
    """A process and all its descendants (gunicorn's and Celery's workers are children)."""
    pids, todo = [], [pid]
    while todo:
        current = todo.pop()
        pids.append(current)
        try:
            children = Path(f"/proc/{current}/task/{current}/children").read_text().split()
        except OSError:
            continue
        todo += [int(c) for c in children]
    return pids


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU time of these processes so far (Linux /proc; 0 for ones gone)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime in clock ticks
    return total / os.sysconf("SC_CLK_TCK")


def cpu_groups(services: Services, redis) -> dict[str, list[int]]:
    """Who uses the 2 cores while posting: web, worker, Redis (if local) and this client."""
    groups = {
        "web": process_tree(services.procs[0].pid),
        "worker": process_tree(services.procs[1].pid),
        "client": [os.getpid()],
    }
    redis_pid = int(redis.info("server").get("process_id", 0))
    if Path(f"/proc/{redis_pid}").exists():
        groups["redis"] = [redis_pid]
    return groups


def wait_for_drain(redis, timeout_s: float = 300) -> float:
    """Until the ingest queue is empty and the worker has finished its last task."""
    deadline = time.monotonic() + timeout_s
    idle_since = None
    while time.monotonic() < deadline:
        busy = (
            redis.llen("ingest")
            or redis.hlen("unacked")
            or any(redis.xlen(k) for k in redis.scan_iter(match="sensors:ingest:stream:*"))
        )
        if busy:
            idle_since = None
        elif idle_since is None:
            idle_since = time.monotonic()
        elif time.monotonic() - idle_since > 0.5:
            return idle_since
        time.sleep(0.05)
    raise RuntimeError("the ingest queue did not drain")


def bulk_phase(port: int, key: str, seconds: float, clients: int, t0: int) -> dict:
    next_row = {"n": 0}
    lock = threading.Lock()
    stats = {"requests": 0, "errors": 0, "rows": 0}
    stop_at = time.monotonic() + seconds

    def client() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        while time.monotonic() < stop_at:
            with lock:
                first = next_row["n"]
                next_row["n"] += ROWS_PER_REQUEST
            rows = [
                [t0 + r, 10, *(value_of(r, k) for k in range(10))]
                for r in range(first, first + ROWS_PER_REQUEST)
            ]
            body = urlencode(
                {"data": json.dumps(rows, separators=(",", ":")), "time": 0, "apikey": key}
            )
            conn.request(
                "POST", "/input/bulk", body, {"Content-Type": "application/x-www-form-urlencoded"}
            )
            response = conn.getresponse()
            reply = response.read()
            with lock:
                stats["requests"] += 1
                if reply == b"ok":
                    stats["rows"] += ROWS_PER_REQUEST
                else:
                    stats["errors"] += 1
                    # The rows were not accepted: they are not expected in the feed.
                    print(f"  bulk post refused: {response.status} {reply[:200]!r}")
        conn.close()

    started = time.monotonic()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    stats["post_seconds"] = time.monotonic() - started
    stats["started"] = started
    stats["max_row"] = next_row["n"]
    return stats


def single_phase(port: int, key: str, seconds: float, t0: int) -> dict:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    latencies, errors, i = [], 0, 0
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {key}"}
    stop_at = time.monotonic() + seconds
    started = time.monotonic()
    while time.monotonic() < stop_at:
        body = json.dumps({"time": t0 + i, "values": {"power": float(i % 5000)}})
        sent = time.perf_counter()
        conn.request("POST", "/api/v1/readings", body, headers)
        response = conn.getresponse()
        response.read()
        latencies.append(time.perf_counter() - sent)
        if response.status != 202:
            errors += 1
        i += 1
    elapsed = time.monotonic() - started
    latencies.sort()
    return {
        "requests": i,
        "errors": errors,
        "rate": i / elapsed,
        "p50_ms": statistics.median(latencies) * 1000,
        "p99_ms": latencies[int(len(latencies) * 0.99) - 1] * 1000,
    }


def baseline_rate(args, scratch: Path, seconds: float, t0: int, app: str) -> dict:
    """single_phase against gunicorn serving bench/<app>.py (same workers, threads): gunicorn
    alone, or the XADD floor."""
    port = free_port()
    py = sys.executable
    with open(scratch / f"{app}.log", "ab") as logs:
        proc = subprocess.Popen(
            [str(Path(py).parent / "gunicorn"), f"{app}:application", "--chdir",
             str(ROOT / "bench"), "--bind", f"127.0.0.1:{port}", "--workers",
             str(args.web_workers), "--threads", str(args.web_threads), "--keep-alive", "30"],
            stdout=logs, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"gunicorn serving {app} did not start") from None
                time.sleep(0.1)
        # Its CPU per request is the floor of the site's web CPU: gunicorn's own share.
        pids = process_tree(proc.pid)
        before = cpu_seconds(pids)
        result = single_phase(port, "unused", seconds, t0)
        result["web_cpu_ms"] = (cpu_seconds(pids) - before) / max(result["requests"], 1) * 1000
        return result
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def bulk_and_verify(args, port: int, key: str, node, now: int, redis) -> bool:
    """The bulk phase, then every value read back from the feed files. True if none is lost,
    wrong or refused."""
    from feeds.store import service
    from sensors.models import Sensor

    t_bulk = now - 30 * 86400  # a synthetic second per row: 1 s feeds, no overwrites
    print(
        f"bulk: {args.clients} clients x /input/bulk ({ROWS_PER_REQUEST} rows x 10 values) for {args.seconds:.0f} s"
    )
    bulk = bulk_phase(port, key, args.seconds, args.clients, t_bulk)
    drained_at = wait_for_drain(redis)
    e2e_seconds = drained_at - bulk["started"]
    service.commit_all()
    sensors = {s.key: s.feed_id for s in Sensor.objects.filter(node=node)}
    expected_rows = bulk["rows"]
    stored_values = 0
    wrong = 0
    for k_index, input_key in enumerate(KEYS):
        points = service.read(sensors[input_key], t_bulk, t_bulk + bulk["max_row"] - 1, 1)
        for t_ms, v in points:
            if v is None:
                continue
            stored_values += 1
            if v != value_of(t_ms // 1000 - t_bulk, k_index):
                wrong += 1
    accepted_values = expected_rows * 10
    print(
        f"  requests {bulk['requests']} ({bulk['errors']} refused), posted in {bulk['post_seconds']:.1f} s "
        f"= {accepted_values / bulk['post_seconds']:,.0f} values/s accepted"
    )
    print(
        f"  end to end (post -> worker -> feed, queue drained) {e2e_seconds:.1f} s "
        f"= {accepted_values / e2e_seconds:,.0f} values/s"
    )
    print(
        f"  read back: {stored_values:,} of {accepted_values:,} values, {wrong} wrong, "
        f"{accepted_values - stored_values} lost"
    )
    return stored_values == accepted_values and wrong == 0 and bulk["errors"] == 0


# POST -> readable before issue #29, measured from outside on this machine kind (the issue).
FRESH_BEFORE = {300: "p50 466 ms, p99 3,750 ms, max 4,500 ms (the issue's measurement)"}


def log_inputs(nodes: list, public: bool = False) -> list:
    """Inputs p1..p5 of each saved node, each logged to a 10 s feed of its own, made in bulk;
    the feeds in node order, five a node."""
    from feeds.models import Feed
    from sensors.models import Sensor

    feeds = Feed.objects.bulk_create(
        [
            Feed(name=f"{node.name}:p{k}", tag=node.name, interval=10, public=public)
            for node in nodes
            for k in range(1, 6)
        ],
        batch_size=2000,
    )
    Sensor.objects.bulk_create(
        [
            Sensor(node=node, key=f"p{k}", feed=feeds[5 * i + k - 1])
            for i, node in enumerate(nodes)
            for k in range(1, 6)
        ],
        batch_size=2000,
    )
    return feeds


def fresh_site(count: int) -> list:
    """`count` nodes of 5 inputs each, every input logged to a public 10 s feed: made in bulk
    (10,000 nodes by the admin would take hours), then one config generation bump so every
    web process learns the new keys."""
    from bench.fresh_load import BenchNode
    from sensors import cache
    from sensors.models import Node

    nodes, keys = [], []
    for i in range(count):
        node = Node(name=f"fresh-{count}-{i:05d}", interval=10)
        keys.append(node.set_new_key())
        nodes.append(node)
    nodes = Node.objects.bulk_create(nodes, batch_size=2000)
    feeds = log_inputs(nodes, public=True)
    cache.bump_generation()
    return [
        BenchNode(node.name, key, feeds[5 * i].pk)
        for i, (node, key) in enumerate(zip(nodes, keys, strict=True))
    ]


WARM_ROUNDS = 6  # unmeasured posts of every node before the measured ones


class CpuSampler(threading.Thread):
    """Each group's CPU (cores) in every `every_s`, read from /proc while the load runs: with
    the readable times by the second of their `ok`, what the machine was doing when a reading
    was late (a commit, the web saturated, the client)."""

    def __init__(self, groups: dict[str, list[int]], every_s: float = 1.0) -> None:
        super().__init__(daemon=True)
        self.groups = groups
        self.every_s = every_s
        self.samples: list[tuple[float, dict[str, float]]] = []
        self.stopping = threading.Event()

    def sample(self) -> None:
        # The web's and worker's trees again each time (gunicorn and Celery fork workers
        # anew); the client is this process alone, not the services it started.
        pids = {
            name: process_tree(group[0]) if name in ("web", "worker") else group
            for name, group in self.groups.items()
        }
        self.samples.append(
            (time.perf_counter(), {name: cpu_seconds(p) for name, p in pids.items()})
        )

    def run(self) -> None:
        self.sample()
        while not self.stopping.wait(self.every_s):
            self.sample()

    def stop(self) -> None:
        self.stopping.set()
        self.join()
        self.sample()


def print_timeline(seen: list[tuple[float, float]], sampler: CpuSampler, window_s: float) -> None:
    """Per window: the checked posts answered in it (count, p50 and worst ms to readable) and
    the cores each group used in it."""
    start = sampler.samples[0][0]
    end = sampler.samples[-1][0]
    names = list(sampler.samples[0][1])
    print("  timeline (by when the post was answered): s, checked, readable p50 / max ms, cores "
          + " / ".join(names))  # fmt: skip
    at = start
    while at < end:
        upto = min(end, at + window_s)
        fresh = sorted(ms for ok_at, ms in seen if at <= ok_at < upto)
        inside = [(t, cpu) for t, cpu in sampler.samples if at - 1e-9 <= t <= upto + 1e-9]
        cores = ""
        if len(inside) >= 2:
            (t0, c0), (t1, c1) = inside[0], inside[-1]
            cores = " / ".join(f"{(c1[n] - c0[n]) / (t1 - t0):.2f}" for n in names)
        median = f"{fresh[len(fresh) // 2]:.0f}" if fresh else "-"
        worst = f"{fresh[-1]:.0f}" if fresh else "-"
        print(f"    {at - start:5.0f}  {len(fresh):5d}  {median:>6} / {worst:>6}   {cores}")
        at = upto


def every_feed_written() -> bool:
    """Whether every feed has its files: the worker's first commit of a new feed writes its
    meta (fsynced), and 50,000 new feeds take minutes, past the commit task's soft limit (the
    next commit goes on from there). A site that has run a few minutes has long done it."""
    from django.conf import settings
    from django.db import connection

    from feeds.models import Feed

    try:
        feeds = Feed.objects.count()
    finally:
        connection.close()  # this runs in a thread of its own each time
    return sum(1 for _ in Path(settings.BMS_FEED_DIR).rglob("*.meta")) >= feeds


def fresh_phase(args, port: int, redis, groups: dict[str, list[int]]) -> bool:
    """POST -> readable through /feed/data.json for each site size. True if every checked
    value was seen and no post was refused."""
    from bench import fresh_load
    from sensors.models import Node

    ok = True
    for count in args.fresh_nodes:
        nodes = fresh_site(count)
        # Every post checked at 300 nodes (30 a second); about 30 checks a second beyond.
        check_every = max(1, count // 300)
        print(
            f"fresh: {count:,} nodes x 5 values every 10 s ({count / 10:,.0f} req/s), each post "
            f"on its own connection, for {args.fresh_seconds:.0f} s; 1 post in {check_every} "
            "checked through /feed/data.json"
        )
        # Unmeasured rounds first, then the measured ones without a pause: a node's first post
        # to each web worker fills that worker's caches for it (after one round about 30 % of
        # the measured posts were such first visits, where a site that has run a few minutes
        # has none; after six rounds about 4 %), and the worker's first commits write every
        # new feed's files. Until 2026-11-27 the rounds were waited out (drained) before the
        # measured ones: at 10,000 nodes that pause outlasted three of the nodes' intervals,
        # every node was judged silent, and the raising and clearing of 10,000 alarms ran in
        # the measured phase, as did the first commit of 50,000 new feeds.
        sampler = CpuSampler(groups) if args.fresh_timeline else None
        got = fresh_load.run(
            port, nodes, args.fresh_seconds, check_every=check_every,
            warm_s=WARM_ROUNDS * 10.0, warm_until=every_feed_written,
            on_measure=sampler.start if sampler else None,
        )  # fmt: skip
        if sampler:
            sampler.stop()
        print(
            f"  warm-up: {got['warm_s']:.0f} s, until every feed's files were written; "
            f"{got['warm_refused']} of its posts refused"
        )
        print(
            f"  {got['posts']:,} posts ({got['refused']} refused), post p50 {got['post_p50_ms']:.1f} ms; "
            f"ok -> readable over {got['checked']:,} checked ({got['reads']:,} reads): "
            f"p50 {got['p50_ms']:.0f} ms, p95 {got['p95_ms']:.0f} ms, p99 {got['p99_ms']:.0f} ms, "
            f"max {got['max_ms']:.0f} ms; never seen {got['never_seen']}; "
            f"a round of reads took {got['round_ms']:.1f} ms on average (the resolution)"
        )
        print(f"  before issue #29: {FRESH_BEFORE.get(count, 'not measured')}")
        if sampler:
            print_timeline(got["seen"], sampler, args.fresh_timeline)
        # This site's nodes stop posting now: disabled, so that during the next site size's
        # run they are not judged silent (one alarm each, raised and written by the worker).
        Node.objects.filter(name__startswith=f"fresh-{count}-").update(enabled=False)
        ok = ok and got["refused"] == 0 and got["never_seen"] == 0
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60, help="bulk phase length (60)")
    parser.add_argument("--clients", type=int, default=8, help="concurrent bulk clients (8)")
    parser.add_argument("--single-seconds", type=float, default=20, help="single phase length")
    parser.add_argument("--redis-db", type=int, default=12, help="scratch Redis db (flushed!)")
    parser.add_argument(
        "--web-workers", type=int, default=3, help="gunicorn workers (3, as run-site.sh)"
    )
    parser.add_argument(
        "--web-threads", type=int, default=4, help="threads per worker (4, as run-site.sh)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    parser.add_argument(
        "--single-only", action="store_true", help="skip the bulk phase (single posts only)"
    )
    parser.add_argument(
        "--fresh-only", action="store_true", help="only the POST -> readable phase (with beat)"
    )
    parser.add_argument(
        "--fresh-nodes",
        type=lambda text: [int(n) for n in text.split(",") if n],
        default=[300],
        help="site sizes for the POST -> readable phase, nodes posting every 10 s (300; "
        "300,10000 for 30 and 1,000 req/s; empty to skip)",
    )
    parser.add_argument(
        "--fresh-seconds", type=float, default=60, help="POST -> readable phase length (60)"
    )
    parser.add_argument(
        "--fresh-timeline",
        type=float,
        default=0,
        metavar="S",
        help="also print, for every S seconds of the POST -> readable phase, the readable times "
        "of the posts answered in it and the cores the web, worker, Redis and client used",
    )
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="bms-bench-ingest-"))
    port = free_port()
    env = dict(
        os.environ,
        DJANGO_SETTINGS_MODULE="bms.settings",
        BMS_DATA_DIR=str(scratch),
        DATABASE_URL=f"sqlite:///{scratch}/db.sqlite3",
        REDIS_URL=f"redis://127.0.0.1:6379/{args.redis_db}",
        BMS_FEED_MAX_POINTS="10000000",
        # The bulk rows are written 30 days back (1 s feeds, no overwrites): past the default
        # backfill bound of 7 days, which would refuse them all.
        BMS_FEED_MAX_BACKFILL_DAYS="60",
        # One node posting hundreds of requests a second is the point of the benchmark; the
        # production default (600/min per node, docs/INGEST.md) would refuse it.
        BMS_THROTTLE_INGEST="off",
        # The freshness checks read public feeds from one address many times a second.
        BMS_THROTTLE_PUBLIC="off",
        LOG_LEVEL="WARNING",
        ALLOWED_HOSTS="127.0.0.1,localhost",
    )
    os.environ.update(env)
    sys.path.insert(0, str(ROOT))
    import django

    services = Services(
        env, port, scratch, args.web_workers, args.web_threads, beat=args.fresh_only
    )
    try:
        from redis import Redis

        redis = Redis.from_url(env["REDIS_URL"])
        redis.flushdb()
        services.start()
        django.setup()
        from feeds.store import service
        from sensors.models import Node, Sensor

        bulk_node = Node(name="bench-bulk", node_id=10, interval=1)
        bulk_key = bulk_node.set_new_key()
        bulk_node.save()
        single_node = Node(name="bench-single", node_id=11, interval=1)
        single_key = single_node.set_new_key()
        single_node.save()

        if args.fresh_only:
            ok = fresh_phase(args, port, redis, cpu_groups(services, redis))
            print("verified: every checked value seen" if ok else "VERIFICATION FAILED")
            args.keep = args.keep or not ok
            return
        now = int(time.time())
        bulk_ok = args.single_only or bulk_and_verify(args, port, bulk_key, bulk_node, now, redis)

        t_single = now - 86400
        print(f"single: sequential /api/v1/readings posts for {args.single_seconds:.0f} s")
        groups = cpu_groups(services, redis)
        cpu_before = {name: cpu_seconds(pids) for name, pids in groups.items()}
        single = single_phase(port, single_key, args.single_seconds, t_single)
        cpu_ms = {
            name: (cpu_seconds(pids) - cpu_before[name]) / max(single["requests"], 1) * 1000
            for name, pids in groups.items()
        }
        wait_for_drain(redis)
        service.commit_all()
        feed_id = Sensor.objects.get(node=single_node, key="power").feed_id
        points = service.read(feed_id, t_single, t_single + single["requests"] - 1, 1)
        landed = sum(1 for _, v in points if v is not None)
        print(
            f"  {single['requests']} requests ({single['errors']} errors) = {single['rate']:,.0f} req/s, "
            f"p50 {single['p50_ms']:.2f} ms, p99 {single['p99_ms']:.2f} ms; read back {landed}"
        )
        # On a 2-core machine the web, the worker, Redis and the client share the cores: what
        # each costs per request says where the rate goes (and shows a machine whose speed
        # drifts: the client's share is the same code every run).
        print(
            "  CPU per request: "
            + ", ".join(f"{name} {ms:.2f} ms" for name, ms in cpu_ms.items())
            + f"; total {sum(cpu_ms.values()):.2f} ms"
        )
        alone = baseline_rate(args, scratch, args.single_seconds, t_single, "gunicorn_alone")
        print(
            f"  gunicorn alone: {alone['rate']:,.0f} req/s (p50 {alone['p50_ms']:.2f} ms, "
            f"web CPU {alone['web_cpu_ms']:.2f} ms per request); "
            f"the site reached {single['rate'] / alone['rate']:.0%} of it"
        )
        floor = baseline_rate(args, scratch, args.single_seconds, t_single, "gunicorn_xadd_floor")
        print(
            f"  gunicorn + one XADD (the floor of answering after the append): "
            f"{floor['rate']:,.0f} req/s (p50 {floor['p50_ms']:.2f} ms) = "
            f"{floor['rate'] / alone['rate']:.0%} of gunicorn alone; "
            f"the site reached {single['rate'] / floor['rate']:.0%} of the floor"
        )
        ok = bulk_ok and landed == single["requests"]
        print("verified: none lost" if ok else "VERIFICATION FAILED")
        args.keep = args.keep or not ok  # keep services.log to see what went wrong
    finally:
        services.stop()
        if args.keep:
            print(f"scratch kept in {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
