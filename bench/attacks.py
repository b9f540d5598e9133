"""The second red-team round's attacks replayed against the production shape (issue #25), with
a kiosk display's latency measured before and during each.

Starts a scratch site (SQLite file and data dir of its own, Redis db 1 or --redis-db, which it
flushes): a published kiosk display ("pv", a day of data on its feeds), a known node, and a gateway key of
its own for each phase that uses one; gunicorn as docker/entrypoint.sh runs it (`-c
python:bms.gunicorn_conf`, 3 workers x 4 threads, BMS_PRODUCTION, one trusted proxy);
Debian's nginx running the shipped
docker/nginx.conf (ports, paths and certificate replaced as tests/security/test_proxy.py does,
timeouts as shipped). No Celery worker: what an attack costs the web is its answer.

Then, each phase for --seconds, a kiosk client on 127.0.0.1 fetches /kiosk/pv/ and
/kiosk/pv/data.json through nginx every 0.2 s (keep-alive, as a browser), while an attacker
process runs --threads threads against nginx:

  baseline                  no attack
  gateway flood             POST /input/bulk with the gateway key, 2,500 rows each naming a node
                            name never seen before (the red team's flood)
  /api/schema/              GET, anonymous
  /healthz                  GET, anonymous
  cb=1 bomb, unknown key    POST /input/bulk.json?cb=1: a ~4-10 KB zlib body inflating to 4 MiB
  cb=1 bomb, throttled key  the same with the real gateway key, its allowance for the minute
                            spent first (the phase starts at a throttle window's start)
  baseline again            no attack, to see how the machine drifted

The attackers come from one address (127.0.0.2, `--sources one`: what nginx's per-address
limits are for) or each thread from its own (127.0.0.10+, `--sources each`), or both in turn.
The attacker process shares the 2 cores with the site, so it runs at nice 10 (a real one's
CPU is elsewhere; `--attacker-nice 0` to compete as an equal) and prints the CPU it used.
Every request has a timeout (kiosk 10 s, attack 15 s); an attacker counts each status, with
nginx's own 429/503 told apart from the application's. Printed per phase: requests sent and
their statuses, the kiosk's median/p95/max per URL, CPU seconds of gunicorn, nginx, Redis and
the attacker, the load average; and the verdicts "kiosk < 0.5 s" and "within 3x baseline"
(both on the p95 of the phase, against the first baseline). Figures only: nothing asserts.

    .venv/bin/python bench/attacks.py [--seconds 30] [--threads 12] [--sources one|each|both]
                                      [--only flood,...] [--redis-db 1]

Needs nginx (`apt-get install nginx-light`) and a Redis at 127.0.0.1:6379. About
(2 + 5 x sources) x (seconds + 5) s, plus up to a minute to reach a throttle window's start.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import resource
import shutil
import ssl
import statistics
import subprocess
import sys
import threading
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from ingest import cpu_seconds, free_port, process_tree  # noqa: E402  (bench/ingest.py)

REDIS_URL = "redis://127.0.0.1:6379/1"  # --redis-db: another engineer's run uses another db
KIOSK_PATHS = ("/kiosk/pv/", "/kiosk/pv/data.json")
KIOSK_EVERY_S = 0.2
KIOSK_TIMEOUT_S = 10.0
ATTACK_TIMEOUT_S = 15.0
LIMIT_S, LIMIT_RATIO = 0.5, 3.0  # the "Done when"
FLOOD_ROWS = 2500
ATTACKS = {
    "flood": "gateway flood (2,500 new names a request)",
    "schema": "GET /api/schema/",
    "healthz": "GET /healthz",
    "bomb-unknown": "cb=1 bomb, unknown key",
    "bomb-throttled": "cb=1 bomb, throttled gateway key",
}


# --- The attacker (a child process: its threads must not share the kiosk client's GIL) -----


def bomb_body() -> bytes:
    """emonhub's cb=1 shape, raw zlib(JSON rows), inflating to just under 4 MiB
    (bench/anonymous_cost.py's body)."""
    rows = b"[" + b"[0,99,1,2,3,4,5]," * (4 * 1_048_576 // 18 - 1) + b"[0,99,1]]"
    return zlib.compress(rows, 9)


def flood_body(thread: int, seq: int) -> bytes:
    """One request of the red team's flood: 2,500 rows, each naming a node never named before."""
    now = int(time.time())
    rows = [[now, f"f{thread:02d}r{seq:06d}n{i:04d}", 1] for i in range(FLOOD_ROWS)]
    return urlencode({"data": json.dumps(rows, separators=(",", ":")), "sentat": now}).encode()


def attack_request(kind: str, key: str, thread: int, seq: int, bomb: bytes) -> tuple:
    """(method, path, body, headers) of one attack request."""
    if kind == "flood":
        headers = {
            "Content-Type": "application/x-www-form-urlencoded",
            "Authorization": f"Bearer {key}",
        }
        return "POST", "/input/bulk", flood_body(thread, seq), headers
    if kind == "schema":
        return "GET", "/api/schema/", None, {}
    if kind == "healthz":
        return "GET", "/healthz", None, {}
    bomb_key = "f" * 32 if kind == "bomb-unknown" else key
    path = f"/input/bulk.json?cb=1&sentat={int(time.time())}"
    return "POST", path, bomb, {"Authorization": f"Bearer {bomb_key}"}


def status_label(status: int, body: bytes) -> str:
    """nginx's own refusals (its error page) apart from the application's answers."""
    return f"{status} nginx" if status >= 400 and b"<center>nginx</center>" in body else str(status)


def run_attacker(spec: dict) -> None:
    """Threads sending one kind of request until the end time; prints a JSON summary."""
    # A real attacker's CPU is on another machine: here it shares the server's cores, so it
    # runs below their priority (--attacker-nice) and its CPU time is printed.
    os.nice(spec["nice"])
    tls = ssl.create_default_context(cafile=spec["ca_file"])
    bomb = bomb_body() if spec["kind"].startswith("bomb") else b""
    counts: dict[str, int] = {}
    lock = threading.Lock()
    ready = threading.Barrier(spec["threads"] + 1)
    end = time.monotonic() + spec["seconds"]

    def count(label: str) -> None:
        with lock:
            counts[label] = counts.get(label, 0) + 1

    def attacker(i: int) -> None:
        source = spec["sources"][i % len(spec["sources"])]
        conn = None
        seq = 0
        ready.wait()
        while time.monotonic() < end:
            method, path, body, headers = attack_request(spec["kind"], spec["key"], i, seq, bomb)
            seq += 1
            if conn is None:
                conn = http.client.HTTPSConnection(
                    "127.0.0.1", spec["port"], context=tls, timeout=ATTACK_TIMEOUT_S,
                    source_address=(source, 0),
                )  # fmt: skip
            try:
                conn.request(method, path, body=body, headers=headers)
                response = conn.getresponse()
                count(status_label(response.status, response.read()))
                if response.getheader("Connection", "").lower() == "close":
                    conn.close()
                    conn = None
            except TimeoutError:
                count("timeout")
                conn.close()
                conn = None
            except (OSError, http.client.HTTPException):
                count("error")
                conn.close()
                conn = None
                time.sleep(0.05)
        if conn is not None:
            conn.close()

    threads = [threading.Thread(target=attacker, args=(i,)) for i in range(spec["threads"])]
    for thread in threads:
        thread.start()
    ready.wait()
    print("started", flush=True)
    for thread in threads:
        thread.join()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    summary = {"counts": counts, "cpu_s": usage.ru_utime + usage.ru_stime, "bomb": len(bomb)}
    print(json.dumps(summary), flush=True)


# --- The kiosk client --------------------------------------------------------------------


@dataclass
class Samples:
    seconds: dict[str, list[float]] = field(default_factory=lambda: {p: [] for p in KIOSK_PATHS})
    failed: dict[str, int] = field(default_factory=lambda: {p: 0 for p in KIOSK_PATHS})


def read_kiosk(port: int, tls: ssl.SSLContext, seconds: float) -> Samples:
    """Both kiosk URLs every KIOSK_EVERY_S for `seconds`, each on its own keep-alive
    connection; a tick that falls behind is skipped, not queued. A failure (no 200 within the
    timeout) is counted and recorded at the time it took."""
    out = Samples()
    conns: dict[str, http.client.HTTPSConnection | None] = {p: None for p in KIOSK_PATHS}
    end = time.monotonic() + seconds
    tick = time.monotonic()
    while tick < end:
        for path in KIOSK_PATHS:
            if conns[path] is None:
                conns[path] = http.client.HTTPSConnection(
                    "127.0.0.1", port, context=tls, timeout=KIOSK_TIMEOUT_S,
                    source_address=("127.0.0.1", 0),
                )  # fmt: skip
            started = time.perf_counter()
            try:
                conns[path].request("GET", path)
                response = conns[path].getresponse()
                response.read()
                ok = response.status == 200
            except (OSError, http.client.HTTPException):
                ok = False
                conns[path].close()
                conns[path] = None
            out.seconds[path].append(time.perf_counter() - started)
            out.failed[path] += not ok
        tick = max(tick + KIOSK_EVERY_S, time.monotonic())
        time.sleep(max(0.0, tick - time.monotonic()))
    for conn in conns.values():
        if conn is not None:
            conn.close()
    return out


def stats(values: list[float]) -> dict[str, float]:
    """Median, p95 (nearest rank) and max of a phase's latencies."""
    ordered = sorted(values)
    p95 = ordered[max(0, -(-len(ordered) * 95 // 100) - 1)]
    return {"n": len(ordered), "median": statistics.median(ordered), "p95": p95,
            "max": ordered[-1]}  # fmt: skip


# --- The site ------------------------------------------------------------------------------


def make_site() -> dict:
    """Scratch database and data dir, the "pv" display with a day of data, a gateway key and a
    known node of its site. Django runs in this process for this only."""
    import scratch_site

    base = scratch_site.start(
        "bms-attacks-", REDIS_URL, BMS_PRODUCTION="true", SECRET_KEY="attacks-" + "x" * 50,
        BMS_TRUSTED_PROXIES="1", LOG_LEVEL="WARNING", BMS_WATCHDOG_WATCH_BEAT="false",
    )  # fmt: skip
    from core.redis import get_redis
    from demo.displays import ensure_demo_displays
    from feeds.models import Feed
    from feeds.store import service
    from sensors.models import Node, Site

    get_redis().flushdb()
    site = Site.objects.create(name="Bench site", slug="bench", time_zone="Europe/London")
    power = Feed.objects.create(name="pv_power", tag="kiosk", unit="W", interval=60)
    kwh = Feed.objects.create(name="pv_kwh", tag="kiosk", unit="kWh", interval=60)
    now = int(time.time()) // 60 * 60
    start = now - 86_400
    service.log_points(
        point
        for t in range(start, now, 60)
        for point in ((power.id, t, 1000.0 + t % 3600 / 3.6), (kwh.id, t, (t - start) / 3600))
    )
    service.commit_all()
    ensure_demo_displays(site, {"pv_power": power, "pv_kwh": kwh})
    Node.objects.create(name="emonth", node_id=5, site=site)
    return {"base": base, "site": site}


def new_gateway_key(site) -> str:
    """A gateway key of its own for each phase that uses one, so no phase starts with an
    allowance an earlier phase spent (the throttle counts per key and fixed minute)."""
    from sensors.models import GatewayKey

    gateway = GatewayKey(site=site, name=f"emonpi-{GatewayKey.objects.count() + 1}")
    key = gateway.set_new_key()
    gateway.save()
    return key


class Services:
    """gunicorn and nginx for the scratch site; stopped by their own pids."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.procs: dict[str, subprocess.Popen] = {}

    def start(self) -> int:
        from tests.proxy_shape import DOCKER, gunicorn_args, proxy_conf, wait_for_port
        from tests.tls_certs import make_ca_and_server_cert

        nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        if not Path(nginx).exists():
            sys.exit("nginx is not installed: apt-get install nginx-light")
        upstream = free_port()
        env = dict(os.environ, ALLOWED_HOSTS="127.0.0.1,localhost")
        log = self.base / "gunicorn.log"
        self.procs["gunicorn"] = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-c", "python:bms.gunicorn_conf",
             "bms.wsgi:application", "--bind", f"127.0.0.1:{upstream}", *gunicorn_args(),
             "--access-logfile", str(self.base / "gunicorn-access.log")],
            cwd=ROOT, env=env, stdout=open(log, "ab"), stderr=subprocess.STDOUT,
        )  # fmt: skip
        wait_for_port(upstream, self.procs["gunicorn"], log)

        prefix = self.base / "nginx"
        prefix.mkdir()
        make_ca_and_server_cert(prefix)
        (prefix / "static").mkdir()
        https = free_port()
        conf = prefix / "nginx.conf"
        conf.write_text(proxy_conf(
            (DOCKER / "nginx.conf").read_text(), upstream_port=upstream, http_port=free_port(),
            https_port=https, cert_dir=prefix, static_dir=prefix / "static", prefix=prefix,
            timeout_s=None,
        ))  # fmt: skip
        command = [nginx, "-p", str(prefix), "-c", str(conf), "-e", str(prefix / "error.log")]
        subprocess.run([*command, "-t"], check=True, capture_output=True, timeout=30)
        self.procs["nginx"] = subprocess.Popen([*command, "-g", "daemon off;"])
        wait_for_port(https, self.procs["nginx"], prefix / "error.log")
        return https

    def stop(self) -> None:
        from tests.processes import stop_process

        for proc in reversed(self.procs.values()):
            stop_process(proc)


# --- The run -------------------------------------------------------------------------------


def cpu_now(services: Services, redis_pid: int) -> dict[str, float]:
    groups = {name: process_tree(proc.pid) for name, proc in services.procs.items()}
    if redis_pid:
        groups["redis"] = [redis_pid]
    return {name: cpu_seconds(pids) for name, pids in groups.items()}


def spend_allowance(port: int, tls: ssl.SSLContext, key: str) -> int:
    """Post one reading at a time with the gateway key from 12 addresses of their own until
    the application (not nginx) answers 429; the posts sent."""
    body = urlencode({"data": "[[0,5,1]]", "sentat": int(time.time())}).encode()
    headers = {"Content-Type": "application/x-www-form-urlencoded",
               "Authorization": f"Bearer {key}"}  # fmt: skip
    done = threading.Event()
    sent = []
    deadline = time.monotonic() + 30

    def poster(source: str) -> None:
        conn = http.client.HTTPSConnection("127.0.0.1", port, context=tls, timeout=10,
                                           source_address=(source, 0))  # fmt: skip
        while not done.is_set() and time.monotonic() < deadline:
            try:
                conn.request("POST", "/input/bulk", body=body, headers=headers)
                response = conn.getresponse()
                label = status_label(response.status, response.read())
            except (OSError, http.client.HTTPException):
                conn.close()
                continue
            sent.append(label)
            if label == "429":
                done.set()
            elif label == "429 nginx":
                time.sleep(0.05)
        conn.close()

    threads = [threading.Thread(target=poster, args=(f"127.0.0.{30 + i}",)) for i in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return len(sent)


def run_phase(name: str, kind: str | None, sources: list[str], args, ctx: dict) -> dict:
    """One phase: the attacker (if any) started, the kiosk read for the phase, both ended."""
    time.sleep(3)  # let the previous phase's requests finish
    spec = None
    key = new_gateway_key(ctx["site"]) if kind in ("flood", "bomb-throttled") else ""
    if kind == "bomb-throttled":
        # The throttle counts per fixed minute: start at a window's start, spend the key's
        # allowance, so the whole phase runs against a throttled key.
        wait = 60 - time.time() % 60 + 0.5
        print(f"   (waiting {wait:.0f} s for a throttle window's start)", flush=True)
        time.sleep(wait)
        spent = spend_allowance(ctx["port"], ctx["tls"], key)
        print(f"   (gateway key's allowance spent: {spent} one-reading posts)", flush=True)
        if time.time() % 60 + args.seconds > 59:
            print("   NOTE: the phase runs past the throttle window: later bombs are inflated")
    load = os.getloadavg()
    cpu_before = cpu_now(ctx["services"], ctx["redis_pid"])
    attacker = None
    if kind is not None:
        spec = dict(kind=kind, key=key, port=ctx["port"], ca_file=ctx["ca_file"],
                    threads=args.threads, seconds=args.seconds, sources=sources,
                    nice=args.attacker_nice)  # fmt: skip
        attacker = subprocess.Popen(
            [sys.executable, __file__, "--attacker", json.dumps(spec)],
            cwd=ROOT, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        if attacker.stdout.readline().strip() != "started":
            raise RuntimeError("the attacker did not start")
    samples = read_kiosk(ctx["port"], ctx["tls"], args.seconds)
    result = {"name": name, "kind": kind, "load": load, "samples": samples, "attack": None}
    if attacker is not None:
        try:
            out, _ = attacker.communicate(timeout=ATTACK_TIMEOUT_S + 30)
        except subprocess.TimeoutExpired:
            attacker.kill()
            out, _ = attacker.communicate()
        result["attack"] = json.loads(out.strip().splitlines()[-1]) if out.strip() else None
    cpu_after = cpu_now(ctx["services"], ctx["redis_pid"])
    result["cpu"] = {k: cpu_after[k] - cpu_before.get(k, 0.0) for k in cpu_after}
    if result["attack"]:
        result["cpu"]["attacker"] = result["attack"]["cpu_s"]
    return result


def report(result: dict, baseline: dict | None) -> None:
    load = " ".join(f"{x:.2f}" for x in result["load"])
    print(f"\n== {result['name']}  (load average before: {load})")
    attack = result["attack"]
    if attack:
        sent = sum(attack["counts"].values())
        counts = ", ".join(f"{k}: {v}" for k, v in sorted(attack["counts"].items()))
        size = f"; body {attack['bomb']:,} bytes" if attack["bomb"] else ""
        print(f"   attack: {sent:,} requests sent ({counts}){size}")
    cpu = ", ".join(f"{k} {v:.1f} s" for k, v in result["cpu"].items())
    print(f"   CPU during the phase: {cpu}")
    for path in KIOSK_PATHS:
        s = stats(result["samples"].seconds[path])
        failed = result["samples"].failed[path]
        line = (f"   kiosk {path:<20} n={s['n']:<4} median {s['median'] * 1000:6.0f} ms  "
                f"p95 {s['p95'] * 1000:6.0f} ms  max {s['max'] * 1000:6.0f} ms  "
                f"failed {failed}")  # fmt: skip
        print(line)
        if baseline is None:
            continue
        base = stats(baseline["samples"].seconds[path])
        ratio = s["p95"] / base["p95"] if base["p95"] else float("inf")
        under = s["p95"] < LIMIT_S and failed == 0
        within = ratio <= LIMIT_RATIO and failed == 0
        print(f"     kiosk < {LIMIT_S} s: {'yes' if under else 'NO'} (p95 {s['p95']:.3f} s)"
              f"; within {LIMIT_RATIO:g}x baseline: {'yes' if within else 'NO'} "
              f"(p95 {ratio:.1f}x)")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="each phase (default 30)")
    parser.add_argument("--threads", type=int, default=12, help="attacker threads (default 12)")
    parser.add_argument("--sources", choices=("one", "each", "both"), default="one",
                        help="attackers from one address, one each, or both in turn")  # fmt: skip
    parser.add_argument(
        "--attacker-nice",
        type=int,
        default=10,
        help="the attacker process's nice value (default 10: below the site)",
    )
    parser.add_argument("--only", help=f"some attacks only, comma-separated: {','.join(ATTACKS)}")
    parser.add_argument(
        "--redis-db", type=int, default=1, help="the Redis db it uses and flushes (default 1)"
    )
    parser.add_argument("--attacker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    global REDIS_URL
    REDIS_URL = f"redis://127.0.0.1:6379/{args.redis_db}"
    if args.attacker:
        run_attacker(json.loads(args.attacker))
        return
    if not 5 <= args.seconds <= 120 or not 1 <= args.threads <= 64:
        parser.error("--seconds 5..120, --threads 1..64")
    sys.stdout.reconfigure(line_buffering=True)  # each phase's figures as it ends

    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()}", flush=True)
    site = make_site()
    from core.redis import get_redis

    redis_pid = int(get_redis().info("server").get("process_id", 0))
    services = Services(site["base"])
    try:
        port = services.start()
        ca_file = str(site["base"] / "nginx" / "ca.pem")
        ctx = dict(services=services, port=port, site=site["site"], ca_file=ca_file,
                   tls=ssl.create_default_context(cafile=ca_file),
                   redis_pid=redis_pid if Path(f"/proc/{redis_pid}").exists() else 0)  # fmt: skip
        print(f"scratch site {site['base']}, nginx on 127.0.0.1:{port}", flush=True)
        read_kiosk(port, ctx["tls"], 3)  # warm every worker's caches
        baseline = run_phase("baseline", None, [], args, ctx)
        report(baseline, None)
        modes = {"one": ["one"], "each": ["each"], "both": ["one", "each"]}[args.sources]
        for mode in modes:
            sources = (["127.0.0.2"] if mode == "one"
                       else [f"127.0.0.{10 + i}" for i in range(args.threads)])  # fmt: skip
            where = "one address" if mode == "one" else f"{args.threads} addresses"
            for kind, label in ATTACKS.items():
                if args.only and kind not in args.only.split(","):
                    continue
                name = f"{label}, {args.threads} threads from {where}"
                report(run_phase(name, kind, sources, args, ctx), baseline)
        report(run_phase("baseline again", None, [], args, ctx), baseline)
        errors = (site["base"] / "gunicorn.log").read_text().count("Traceback")
        print(f"\ngunicorn log: {errors} tracebacks; load average at the end {os.getloadavg()}")
    finally:
        services.stop()
        get_redis().flushdb()
        shutil.rmtree(site["base"], ignore_errors=True)


if __name__ == "__main__":
    main()
