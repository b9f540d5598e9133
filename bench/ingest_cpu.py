"""CPU a web worker spends per ingest POST (issue #29): in-process and served by gunicorn.

At 1,000 req/s (10,000 nodes posting every 10 s, each on a connection of its own) the web tier
was the bottleneck on 2 cores (docs/BENCHMARKS.md, "Quiet machine, 2026-11-27"). On a machine
shared with other work, wall time says little; CPU time says what a post costs and so what
rate two cores could carry. Three shapes:

- `post`: `/input/post` as an emonTx on WiFi sends it (bench/fresh_load.py): a form with
  `node`, `fulljson` (5 values and the time) and `apikey`, `Connection: close`; N nodes, each
  with its own key, posting in turn;
- `now`: the same without a time (a device without a clock: the reading is the server's now);
- `bulk`: `/input/bulk.json` as emonhub sends it (../shared/conformance/emonhub/: each captured
  request, byte for byte, with a gateway key of the site; `sendnames` is `cb=1` zlib JSON,
  `positional` a form), the captures replayed in turn.

Measured:
1. in-process: the site's WSGI application (bms.wsgi.application, as gunicorn calls it) on a
   gunicorn-like environ, `time.process_time()` over `--posts` requests after a warm-up round
   (the caches filled, as on a running site); a cold post (every cache dropped: a new worker,
   a config change); and a post whose node's own entries ran out (their 60 s TTL, as each
   node's are once a minute per web worker, sensors/cache.py) while the whole-site tables
   (keys, feed files) did not;
2. served: gunicorn as scripts/run-site.sh starts it (`-c python:bms.gunicorn_conf`, its
   workers and threads), one new connection per request from this process; the CPU of the
   gunicorn master and workers (utime + stime from /proc, 10 ms ticks) over `--posts` requests.
   Requests are sent one at a time, so the figure is the work of a post, not of contention.
   `--web-shapes 3x4,3x1,...` serves with each shape in turn (workers x threads; one thread is
   gunicorn's sync worker): what the same post costs the web in each;
3. `--drain N`: the drain's CPU a request (sensors/ingest/drain.py, in this process): N
   rounds of one post from every node, drained `--drain-pass` nodes at a time (a pass at
   1,000 req/s finds a few nodes with a post each; a backlog, hundreds);
4. `--profile`: cProfile of the in-process posts (and the drain), the functions that cost most.

No Celery worker runs: posts wait in the Redis streams, and the Redis db (`--redis-db`) is
flushed before and after. The throttle is on, at its production default (posts are spread over
the nodes so none is over it).

    .venv/bin/python bench/ingest_cpu.py [--posts 3000] [--nodes 300] [--redis-db 7]
                                         [--shape post,now,bulk] [--no-served] [--profile]
    .venv/bin/python bench/ingest_cpu.py --shape post --web-shapes 3x4,2x4,1x4,3x1,2x1
    .venv/bin/python bench/ingest_cpu.py --tables-only --nodes 10000 [--redis-db 7]
    .venv/bin/python bench/ingest_cpu.py --shape post --no-served --drain 5 [--drain-pass 5,300]
"""

from __future__ import annotations

import argparse
import base64
import cProfile
import io
import json
import os
import pstats
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.ingest import cpu_seconds, log_inputs, process_tree  # noqa: E402  (the same /proc CPU measure)

CAPTURES = Path(os.environ.get("BMS_CONFORMANCE_DIR", "/work/shared/conformance")) / "emonhub"
CAPTURE_KEY = "0123456789abcdef0123456789abcdef"  # the captures' write key (their README)
CAPTURE_FILES = ["sendnames.jsonl", "positional.jsonl"]


class Request:
    """One HTTP request: what gunicorn would put in a WSGI environ, and its bytes on the wire."""

    def __init__(self, method: str, target: str, headers: dict[str, str], body: bytes) -> None:
        self.method, self.target, self.headers, self.body = method, target, headers, body

    def environ(self) -> dict:
        path, _, query = self.target.partition("?")
        environ = {
            "REQUEST_METHOD": self.method,
            "SCRIPT_NAME": "",
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "SERVER_NAME": "127.0.0.1",
            "SERVER_PORT": "8000",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "REMOTE_ADDR": "127.0.0.1",
            "wsgi.url_scheme": "http",
            "wsgi.input": io.BytesIO(self.body),
            "wsgi.errors": sys.stderr,
            "wsgi.multithread": True,
            "wsgi.multiprocess": True,
            "wsgi.run_once": False,
            "HTTP_HOST": "localhost",
            "HTTP_CONNECTION": "close",
        }
        for name, value in self.headers.items():
            key = name.upper().replace("-", "_")
            environ[key if key in ("CONTENT_TYPE", "CONTENT_LENGTH") else f"HTTP_{key}"] = value
        environ.setdefault("CONTENT_LENGTH", str(len(self.body)))
        return environ

    def wire(self) -> bytes:
        head = [f"{self.method} {self.target} HTTP/1.1", "Host: localhost", "Connection: close"]
        head += [f"{name}: {value}" for name, value in self.headers.items()]
        if not any(name.lower() == "content-length" for name in self.headers):
            head.append(f"Content-Length: {len(self.body)}")
        return ("\r\n".join(head) + "\r\n\r\n").encode() + self.body


def post_requests(nodes: list[tuple[str, str]], t: int | None) -> list[Request]:
    """One `/input/post` per node, as bench/fresh_load.py's nodes send it; `t` None: without a
    time, as a device without a clock posts its reading (the server's time is the reading's)."""
    out = []
    for index, (name, key) in enumerate(nodes):
        values = {f"p{k}": float(index * 1000 + k) for k in range(1, 6)}
        if t is not None:
            values["time"] = t
        body = urlencode({"node": name, "fulljson": json.dumps(values), "apikey": key}).encode()
        out.append(
            Request(
                "POST", "/input/post", {"Content-Type": "application/x-www-form-urlencoded"}, body
            )
        )
    return out


def bulk_requests() -> list[Request]:
    """The emonhub captures, each request as sent (its `sentat` kept: emoncms shifts the rows'
    times by the server's clock minus `sentat`, so they land near now whenever replayed)."""
    out = []
    for name in CAPTURE_FILES:
        for line in (CAPTURES / name).read_text().splitlines():
            if not line.strip():
                continue
            captured = json.loads(line)
            headers = {k: v for k, v in captured["headers"].items() if k.lower() != "host"}
            body = base64.b64decode(captured["body_base64"])
            out.append(Request(captured["method"], captured["path"], headers, body))
    return out


def make_site(count: int) -> list[tuple[str, str]]:
    """`count` nodes with keys of their own, and the captures' key as a gateway key of a site
    (emonhub posts every node it hears with it; the first replay registers them)."""
    from sensors import cache, keys
    from sensors.models import GatewayKey, Node, Site

    site = Site.objects.create(name="Bench", slug="bench")
    GatewayKey.objects.create(
        site=site,
        name="emonhub",
        key_prefix=keys.key_prefix(CAPTURE_KEY),
        key_hash=keys.hash_key(CAPTURE_KEY),
    )
    nodes, out = [], []
    for i in range(count):
        node = Node(name=f"cpu-{i:05d}", interval=10)
        out.append((node.name, node.set_new_key()))
        nodes.append(node)
    nodes = Node.objects.bulk_create(nodes, batch_size=2000)
    # Each input logged to a 10 s feed, as bench/ingest.py's fresh site: the web reads the
    # node's feed files for the history check.
    log_inputs(nodes)
    cache.bump_generation()
    return out


def call_wsgi(application: Callable, request: Request) -> tuple[str, bytes]:
    sent: dict = {}

    def start_response(status: str, headers: list, exc_info=None) -> None:
        sent["status"] = status

    chunks = application(request.environ(), start_response)
    try:
        body = b"".join(chunks)
    finally:
        chunks.close()  # as a WSGI server does: request_finished
    return sent["status"], body


def check_answer(status: str, body: bytes) -> None:
    if not status.startswith("200") or body not in (b"ok", b'{"success": true}'):
        raise RuntimeError(f"a post was not accepted: {status} {body[:300]!r}")


def site_tables() -> set[int]:
    """The caches that hold one table for every node (the keys', the feed files'), by id: they
    run out once a TTL per process, not per node. Before issue #29's second step only the
    keys' was one (node_auth._keys, a ProcessCache then, a ProcessTable's inside now)."""
    from sensors.ingest import history_budget, node_auth

    tables = [node_auth._keys, getattr(history_budget, "_files_table", None)]
    return {id(getattr(t, "_cache", t)) for t in tables if t is not None}


def in_process(requests: list[Request], posts: int, profile: bool) -> dict:
    """CPU ms a request through bms.wsgi.application, warm and cold."""
    from bms.wsgi import application
    from sensors import cache

    for request in requests:  # warm-up: every key and node seen once, as on a running site
        check_answer(*call_wsgi(application, request))
    order = [requests[i % len(requests)] for i in range(posts)]
    # Timed by CPU, not wall: on a shared machine wall time is mostly waiting for a core.
    profiler = cProfile.Profile(time.process_time) if profile else None
    wall0, cpu0 = time.perf_counter(), time.process_time()
    if profiler:
        profiler.enable()
    for request in order:
        check_answer(*call_wsgi(application, request))
    if profiler:
        profiler.disable()
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    # Cold: each post after the per-process caches were dropped (a new worker, a config change,
    # or their 60 s TTL run out), so its node's configuration is read from the database again.
    cold_n = min(200, len(requests))
    cold_cpu = 0.0
    for request in requests[:cold_n]:
        cache.clear_all()
        c0 = time.process_time()
        check_answer(*call_wsgi(application, request))
        cold_cpu += time.process_time() - c0
    # A node's own entries ran out (their 60 s TTL) but the process's whole-site tables did
    # not: what a post costs when its node last posted more than a minute ago in this worker
    # (at 10,000 nodes on several workers, a third to a half of the posts).
    keep = site_tables()
    node_cold_cpu = 0.0
    for request in requests[:cold_n]:
        for one in cache._caches:
            if id(one) not in keep:
                one.clear()
        c0 = time.process_time()
        check_answer(*call_wsgi(application, request))
        node_cold_cpu += time.process_time() - c0
    result = {
        "cpu_ms": cpu / posts * 1000,
        "wall_ms": wall / posts * 1000,
        "cold_cpu_ms": cold_cpu / cold_n * 1000,
        "node_cold_cpu_ms": node_cold_cpu / cold_n * 1000,
    }
    if profiler:
        result["profile"] = profiler
    return result


def table_reads(repeat: int = 5) -> dict[str, float]:
    """CPU ms to read each whole-site table of a web process (what a new worker, a config
    change, or the tables' 60 s TTL costs a process, once, whatever its posts)."""
    from sensors import cache
    from sensors.ingest import history_budget, node_auth, processing

    tables = {
        "keys": node_auth._keys,
        "feed files": getattr(history_budget, "_files_table", None),
        "inputs (the drain's)": getattr(processing, "_sensor_table", None),
    }
    out = {}
    for name, table in tables.items():
        if not isinstance(table, getattr(cache, "ProcessTable", ())):
            continue  # not a table in this code (before issue #29's second step)
        table.clear()
        table.get()  # the first read also warms the database's pages
        c0 = time.process_time()
        for _ in range(repeat):
            table.clear()
            table.get()
        out[name] = (time.process_time() - c0) / repeat * 1000
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def exchange(port: int, wire: bytes) -> tuple[str, bytes]:
    """One request on a new connection, read to the server's close (`Connection: close`)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.sendall(wire)
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status = head.split(b"\r\n", 1)[0].split(b" ", 1)[1].decode()
    return status, body


class Gunicorn:
    """gunicorn serving the site as scripts/run-site.sh starts it."""

    def __init__(self, workers: int, threads: int, extra: list[str]) -> None:
        self.port = free_port()
        gunicorn = Path(sys.executable).parent / "gunicorn"
        self.proc = subprocess.Popen(
            [str(gunicorn), "-c", "python:bms.gunicorn_conf", "bms.wsgi:application",
             "--bind", f"127.0.0.1:{self.port}", "--workers", str(workers), "--threads",
             str(threads), "--timeout", "30", "--log-level", "warning", *extra],
            cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
        )  # fmt: skip
        deadline = time.monotonic() + 90
        while True:
            try:
                exchange(
                    self.port,
                    b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
                )
                return
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("gunicorn did not start") from None
                time.sleep(0.3)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


def served(requests: list[Request], posts: int, workers: int, threads: int) -> dict:
    """gunicorn's CPU ms a request (master + workers), one request at a time."""
    server = Gunicorn(workers, threads, [])
    try:
        wires = [request.wire() for request in requests]
        # Warm-up: each worker takes connections as it can, so a few rounds reach them all.
        for _ in range(workers):
            for wire in wires:
                check_answer(*exchange(server.port, wire))
        pids = process_tree(server.proc.pid)
        cpu0, wall0 = cpu_seconds(pids), time.perf_counter()
        for i in range(posts):
            check_answer(*exchange(server.port, wires[i % len(wires)]))
        wall = time.perf_counter() - wall0
        cpu = cpu_seconds(pids) - cpu0
        return {"cpu_ms": cpu / posts * 1000, "wall_ms": wall / posts * 1000}
    finally:
        server.stop()


def drained(nodes: list[tuple[str, str]], rounds: int, per_pass: int, profile: bool) -> dict:
    """CPU ms the drain spends a request: `rounds` times, every node posts once (10 s apart,
    as the fresh site's nodes do; in-process, not timed), then the drain takes them (timed by
    `time.process_time`, its waits on the bells cost none). A pass then holds one request a
    node, as at 1,000 req/s where a pass every few ms finds a few nodes each with one post."""
    from bms.wsgi import application
    from sensors.ingest.drain import Drain

    base = int(time.time()) - 10 * (rounds + 1)  # the last round is the newest reading
    cpu = 0.0
    requests = 0
    profiler = cProfile.Profile(time.process_time) if profile else None
    # One drain holding every shard, its passes timed: a running drain task's steady state
    # (its start, lease taking and linger are not a pass's work).
    drain = Drain(0)
    drain.acquire()
    try:
        for r in range(rounds + 1):
            round_requests = post_requests(nodes, base + 10 * r)
            for start in range(0, len(round_requests), per_pass):
                for request in round_requests[start : start + per_pass]:
                    check_answer(*call_wsgi(application, request))
                if profiler and r:
                    profiler.enable()
                c0 = time.process_time()
                done = drain.run_pass()
                if r:  # round 0 warms the worker's caches (a running drain has them)
                    cpu += time.process_time() - c0
                    requests += done
                if profiler and r:
                    profiler.disable()
                if done != len(round_requests[start : start + per_pass]) or drain.report.dropped:
                    raise RuntimeError(f"the pass did not take every request: {drain.report}")
    finally:
        drain.release()
    result = {"cpu_ms": cpu / max(1, requests) * 1000, "requests": requests}
    if profiler:
        result["profile"] = profiler
    return result


def print_profile(profiler: cProfile.Profile, posts: int, top: int = 25) -> None:
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out).strip_dirs()
    stats.sort_stats("cumulative").print_stats(top)
    stats.sort_stats("tottime").print_stats(top)
    print(f"  cProfile of {posts} requests (times are totals over all of them):")
    print("\n".join("    " + line for line in out.getvalue().splitlines() if line.strip()))


def web_shape(text: str) -> tuple[int, int]:
    """'3x4' -> (3 workers, 4 threads)."""
    workers, _, threads = text.partition("x")
    if not (workers.isdigit() and threads.isdigit() and int(workers) > 0 and int(threads) > 0):
        raise SystemExit(f"--web-shapes: {text!r} is not WORKERSxTHREADS, e.g. 3x4")
    return int(workers), int(threads)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--posts", type=int, default=3000, help="requests measured (3000)")
    parser.add_argument("--nodes", type=int, default=300, help="nodes posting in turn (300)")
    parser.add_argument("--redis-db", type=int, default=7, help="scratch Redis db (flushed!)")
    parser.add_argument("--shape", default="post,bulk", help="post, now, bulk (post,bulk)")
    parser.add_argument(
        "--web-workers", type=int, default=3, help="gunicorn workers (3, as run-site.sh)"
    )
    parser.add_argument(
        "--web-threads", type=int, default=4, help="threads a worker (4, as run-site.sh)"
    )
    parser.add_argument(
        "--web-shapes",
        default="",
        metavar="WxT,...",
        help="serve with each of these gunicorn shapes in turn, e.g. 3x4,2x4,3x1 (T=1: gunicorn's"
        " sync worker); instead of --web-workers/--web-threads",
    )
    parser.add_argument("--no-served", action="store_true", help="in-process only")
    parser.add_argument("--profile", action="store_true", help="cProfile the in-process posts")
    parser.add_argument(
        "--drain",
        type=int,
        default=0,
        metavar="ROUNDS",
        help="also the drain's CPU a request: ROUNDS posts of every node, each drained",
    )
    parser.add_argument(
        "--drain-pass",
        default="5,300",
        help="nodes a drain's pass finds, one request each (5,300: 1,000 req/s, a backlog)",
    )
    parser.add_argument(
        "--tables-only",
        action="store_true",
        help="only time reading the whole-site tables (keys, feed files) for --nodes nodes",
    )
    args = parser.parse_args()
    web_shapes = [(args.web_workers, args.web_threads)]
    if args.web_shapes:
        web_shapes = [web_shape(text) for text in args.web_shapes.split(",")]

    from bench import scratch_site

    redis_url = f"redis://127.0.0.1:6379/{args.redis_db}"
    base = scratch_site.start(
        "bms-bench-ingest-cpu-",
        redis_url,
        LOG_LEVEL="WARNING",
        # The throttle's count runs as in production (in the append's script), at a rate no
        # bench reaches: the emonhub captures replayed in a loop are one gateway key.
        BMS_THROTTLE_INGEST="100000000/minute",
    )
    from core.redis import get_redis

    get_redis().flushdb()
    try:
        nodes = make_site(args.nodes)
        if args.tables_only:
            reads = table_reads()
            print(
                f"{args.nodes} nodes, 5 inputs each: reading a process's tables, CPU: "
                + ", ".join(f"{k} {v:.1f} ms" for k, v in reads.items())
            )
            return
        shapes = {
            "post": lambda: post_requests(nodes, int(time.time())),
            "now": lambda: post_requests(nodes, None),
            "bulk": bulk_requests,
        }
        print(
            f"CPU per ingest request, {args.posts} requests a shape; {args.nodes} nodes; "
            "served by gunicorn "
            + " / ".join(f"{w} workers x {t} threads" for w, t in web_shapes)
            + ", a new connection each"
        )
        for shape in args.shape.split(","):
            requests = shapes[shape]()
            got = in_process(requests, args.posts, args.profile)
            line = (
                f"{shape}: in-process {got['cpu_ms']:.3f} ms CPU a request "
                f"(wall {got['wall_ms']:.3f}; cold, caches dropped: {got['cold_cpu_ms']:.3f}; "
                f"the node's own entries dropped: {got['node_cold_cpu_ms']:.3f})"
            )
            print(line)
            for workers, threads in [] if args.no_served else web_shapes:
                web = served(requests, args.posts, workers, threads)
                print(
                    f"  served, {workers} x {threads}"
                    f"{' (sync worker)' if threads == 1 else ''}: {web['cpu_ms']:.3f} ms of "
                    f"gunicorn's CPU a request (wall {web['wall_ms']:.3f}): at most "
                    f"{2000 / web['cpu_ms']:,.0f} req/s on 2 cores for the web alone"
                )
            if "profile" in got:
                print_profile(got["profile"], args.posts)
        if args.drain:
            get_redis().flushdb()  # the streams the shapes above left
            for per_pass in [int(n) for n in args.drain_pass.split(",")]:
                got = drained(nodes, args.drain, per_pass, args.profile)
                print(
                    f"drain: {got['cpu_ms']:.3f} ms CPU a request ({got['requests']} requests, "
                    f"{per_pass} nodes a pass, one request each): at most "
                    f"{1000 / got['cpu_ms']:,.0f} req/s for one drain process"
                )
                if "profile" in got:
                    print_profile(got["profile"], got["requests"])
    finally:
        get_redis().flushdb()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
