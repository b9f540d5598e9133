"""Memory footprint of the whole stack, started by scripts/run-site.sh as the README starts it.

Runs the script on a free port with a scratch data dir, SQLite file and Redis db (flushed), so
it never meets a running site; BMS_SKIP_SETUP=1 (the venv is used as it is). Then prints, per
process, RSS and PSS from /proc/<pid>/smaps_rollup (PSS shares each page among the processes
that map it, so PSS adds up to what the stack costs the machine; RSS counts shared pages in
every process):
  1. idle: after --settle seconds with the demo site running, nothing posting;
  2. under load: --nodes nodes posting --values values every --interval seconds (300 × 5
     every 10 s = 30 requests/s, the issue's 300-node site) to /input/post for --load-seconds;
     each process at its largest PSS seen while posting (sampled every 2 s).
Then stops the script (SIGTERM, as Ctrl-C) and waits for every process it started.
Redis is not counted: it is the machine's, shared with everything else here. The totals are
given with and without the demo simulator (it stands in for the plant and the nodes).

    .venv/bin/python bench/footprint.py [--settle 40] [--load-seconds 60] [--nodes 300]
                                        [--set BMS_SMALL_BOX=1 ...]
"""

from __future__ import annotations

import argparse
import http.client
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlencode

from ingest import free_port, process_tree  # bench/, the script's own folder

ROOT = Path(__file__).resolve().parent.parent
BANNER = "Open BMS is running."


def memory_kb(pid: int) -> tuple[int, int] | None:
    """(RSS, PSS) in kB from smaps_rollup; None once the process is gone."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return None
    fields = {}
    for line in text.splitlines()[1:]:
        name, _, rest = line.partition(":")
        fields[name] = int(rest.split()[0])
    return fields.get("Rss", 0), fields.get("Pss", 0)


def role(pid: int, parent_of: dict[int, int], top: int) -> str:
    """A name for the process from its command line and place in the tree."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return "gone"
    line = " ".join(argv)
    if pid == top:
        return "run-site.sh (bash)"
    child = parent_of.get(pid) != top  # forked by one of the script's own processes
    if "bms.worker_group" in line:
        return group_role(pid, argv, parent_of, top)
    if "gunicorn" in line:
        return "web: gunicorn worker" if child else "web: gunicorn master"
    if " beat" in line:
        return "beat"
    if "celery" in line and " worker" in line:
        queues = argv[argv.index("-Q") + 1] if "-Q" in argv else "?"
        beat = " + beat thread" if b"BMS_BEAT_THREAD=1" in environ(pid) else ""
        return f"worker {queues}: " + ("pool child" if child else "main" + beat)
    if "simulate_site" in line:
        return "demo simulator"
    if role(parent_of.get(pid, 0), parent_of, top) == "demo simulator":
        return "demo simulator: child"
    return os.path.basename(argv[0]) or "?"


def group_role(pid: int, argv: list[str], parent_of: dict[int, int], top: int) -> str:
    """bms/worker_group.py: the parent, the workers it forked (in the order of its command
    line's groups) and their pool children all carry the parent's command line."""
    if parent_of.get(pid) == top:
        return "worker group: parent"
    parent = parent_of.get(pid, 0)
    if parent_of.get(parent) != top:  # a pool child of one of the workers
        name = group_role(parent, argv, parent_of, top)
        if name.startswith("web"):
            return "web: gunicorn worker"
        return name.replace("main + beat thread", "main").replace("main", "pool child")
    siblings = sorted(p for p, q in parent_of.items() if q == parent)
    words = argv[argv.index("bms.worker_group") + 1 :]
    options = " ".join(words).split(" -- ")[siblings.index(pid)].split()
    if "gunicorn" in options:
        return "web: gunicorn master"
    queues = options[options.index("-Q") + 1] if "-Q" in options else "?"
    beat = " + beat thread" if "BMS_BEAT_THREAD=1" in options else ""
    return f"worker {queues}: main{beat}"


def environ(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return b""


def sample(top: int) -> dict[int, tuple[str, int, int]]:
    """pid -> (role, RSS kB, PSS kB) for every process of the stack right now."""
    pids = process_tree(top)
    parent_of = {}
    for pid in pids:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            parent_of[pid] = int(stat[1])
        except OSError:
            continue
    rows = {}
    for pid in pids:
        mem = memory_kb(pid)
        if mem is not None:
            rows[pid] = (role(pid, parent_of, top), *mem)
    return rows


def print_table(title: str, rows: dict[int, tuple[str, int, int]]) -> tuple[int, int]:
    print(f"\n{title}")
    print(f"  {'process':<34} {'pid':>8} {'RSS MB':>8} {'PSS MB':>8}")
    for pid, (name, rss, pss) in sorted(rows.items(), key=lambda r: (r[1][0], r[0])):
        print(f"  {name:<34} {pid:>8} {rss / 1024:>8.1f} {pss / 1024:>8.1f}")
    rss = sum(r[1] for r in rows.values())
    pss = sum(r[2] for r in rows.values())
    site = [r for r in rows.values() if not r[0].startswith(("demo", "run-site"))]
    print(f"  {'total, ' + str(len(rows)) + ' processes':<34} {'':>8} "
          f"{rss / 1024:>8.1f} {pss / 1024:>8.1f}")  # fmt: skip
    # The demo simulator stands in for the plant and the nodes; a real site does not run it.
    print(f"  {'the site without the demo, ' + str(len(site)):<34} {'':>8} "
          f"{sum(r[1] for r in site) / 1024:>8.1f} {sum(r[2] for r in site) / 1024:>8.1f}")  # fmt: skip
    return rss, pss


class Poster:
    """`nodes` nodes, each posting `values` values every `interval` s, spread evenly over the
    interval, from a few threads on keep-alive connections (each thread its share of nodes)."""

    def __init__(self, port: int, keys: list[tuple[str, str]], values: int, interval: float):
        self.port, self.keys, self.values, self.interval = port, keys, values, interval
        self.sent = self.failed = 0
        self.first_failure = ""
        self.lock = threading.Lock()
        self.stop = threading.Event()

    def run(self, seconds: float, threads: int = 30) -> None:
        started = time.monotonic()
        workers = [
            threading.Thread(target=self._post, args=(k, threads, started, seconds), daemon=True)
            for k in range(threads)
        ]
        for w in workers:
            w.start()
        for w in workers:
            w.join()

    def _post(self, k: int, threads: int, started: float, seconds: float) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        mine = self.keys[k::threads]
        step = self.interval / max(1, len(self.keys))
        rounds = 0
        while time.monotonic() - started < seconds:
            for i, (name, key) in enumerate(mine):
                due = started + rounds * self.interval + (k + i * threads) * step
                time.sleep(max(0.0, due - time.monotonic()))
                data = {f"v{j}": round(20 + j + (rounds % 10) / 10, 1) for j in range(self.values)}
                query = urlencode({"node": name, "fulljson": str(data).replace("'", '"'),
                                   "apikey": key})  # fmt: skip
                answer = ""
                try:
                    conn.request("GET", f"/input/post?{query}")
                    response = conn.getresponse()
                    answer = f"{response.status} {response.read()[:200]!r}"
                except (OSError, http.client.HTTPException) as exc:
                    answer = repr(exc)
                    conn.close()
                    conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
                # emoncms answers "ok"; a fulljson post {"success": true}
                ok = answer in ("200 b'ok'", "200 b'{\"success\": true}'")
                with self.lock:
                    self.sent += 1
                    self.failed += not ok
                    self.first_failure = self.first_failure or ("" if ok else answer)
            rounds += 1


def make_nodes(env: dict, n: int) -> list[tuple[str, str]]:
    """n nodes in the site's database (through Django, as createnode does); (name, key)."""
    os.environ.update(env)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from sensors.models import Node

    keys = []
    for i in range(n):
        node = Node(name=f"load{i}", interval=10)
        keys.append((node.name, node.set_new_key()))
        node.save()
    return keys


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--settle", type=float, default=40, help="idle seconds before measuring")
    parser.add_argument("--load-seconds", type=float, default=60)
    parser.add_argument("--nodes", type=int, default=300)
    parser.add_argument("--values", type=int, default=5, help="values per post")
    parser.add_argument("--interval", type=float, default=10, help="seconds between a node's posts")
    parser.add_argument(
        "--redis-url",
        default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/14"),
        help="a Redis db of its own: it is flushed",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="environment for run-site.sh (a shape: --set BMS_SMALL_BOX=1)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the scratch dir (logs)")
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="bms-bench-footprint-"))
    port = free_port()
    env = dict(
        os.environ,
        BMS_SKIP_SETUP="1",
        BMS_PORT=str(port),
        BMS_DATA_DIR=str(scratch),
        STATIC_ROOT=str(scratch / "static"),
        DATABASE_URL=f"sqlite:///{scratch / 'db.sqlite3'}",
        REDIS_URL=args.redis_url,
        DJANGO_SETTINGS_MODULE="bms.settings",
    )
    env.pop("CELERY_BROKER_URL", None)
    for item in args.set:
        name, _, value = item.partition("=")
        env[name] = value
    from redis import Redis

    Redis.from_url(args.redis_url).flushdb()
    out = open(scratch / "run-site.out", "wb")
    site = subprocess.Popen(
        ["bash", str(ROOT / "scripts" / "run-site.sh")],
        cwd=ROOT,
        env=env,
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # a Ctrl-C at this terminal goes to the bench, not the site
    )
    out.close()
    try:
        deadline = time.monotonic() + 240
        while BANNER not in (scratch / "run-site.out").read_text(errors="replace"):
            if site.poll() is not None or time.monotonic() > deadline:
                sys.exit("run-site.sh did not come up:\n" + (scratch / "run-site.out").read_text())
            time.sleep(0.5)
        shape = " ".join(args.set) or "the defaults"
        print(f"run-site.sh up on port {port} ({shape}); idle for {args.settle:.0f} s")
        time.sleep(args.settle)
        idle = sample(site.pid)
        print_table("idle (the demo site running, nothing posting):", idle)

        keys = make_nodes(env, args.nodes)
        poster = Poster(port, keys, args.values, args.interval)
        load = threading.Thread(target=poster.run, args=(args.load_seconds,), daemon=True)
        started = time.monotonic()
        load.start()
        peak: dict[int, tuple[str, int, int]] = {}
        while load.is_alive():
            for pid, row in sample(site.pid).items():
                if pid not in peak or row[2] > peak[pid][2]:
                    peak[pid] = row
            time.sleep(2)
        elapsed = time.monotonic() - started
        print_table(
            f"under load ({args.nodes} nodes × {args.values} values every {args.interval:g} s: "
            f"{poster.sent / elapsed:.0f} posts/s for {elapsed:.0f} s, {poster.failed} failed; "
            "each process at its largest PSS):",
            peak,
        )
        if poster.failed:
            print(
                f"WARNING: {poster.failed} of {poster.sent} posts were not answered ok; "
                f"the first: {poster.first_failure}"
            )
    finally:
        stop(site, scratch)
        if args.keep:
            print(f"scratch dir kept: {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)


def stack_pids(scratch: Path) -> list[int]:
    """Every process started for this run: each carries the scratch dir in its environment
    (BMS_DATA_DIR), whatever became of its parent."""
    marker = str(scratch).encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if marker in (entry / "environ").read_bytes():
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def stop(site: subprocess.Popen, scratch: Path) -> None:
    """SIGTERM to the script (its trap stops everything it started, as Ctrl-C does); any
    process of this run still there after that is stopped by its pid."""
    if site.poll() is None:
        site.send_signal(signal.SIGTERM)
    try:
        site.wait(90)  # a start step in progress (migrate) finishes before the trap runs
    except subprocess.TimeoutExpired:
        site.kill()
        site.wait()
    for sig in (signal.SIGTERM, signal.SIGKILL):
        left = stack_pids(scratch)
        for pid in left:
            print(f"still running after the stop: {pid}; sending {sig.name}")
            os.kill(pid, sig)
        deadline = time.monotonic() + 20
        while left and time.monotonic() < deadline:
            time.sleep(0.5)
            left = stack_pids(scratch)
        if not left:
            return


if __name__ == "__main__":
    main()
