"""Feed store benchmark. Prints its figures; see docs/BENCHMARKS.md "Feed store".

  1. read:   1000 averaged points across 1 and 10 years of 10 s data (3,153,600 slots a year,
             1 % lost), in-process (the emoncms engine feeds/emoncms/read.py and the API engine
             feeds.store.phpfina.read) and through /feed/data.json (Django test client, anonymous,
             public feed, full middleware and DRF stack), without and with the feed's summary
             (feeds/store/summaries.py), and served by gunicorn (one worker: its CPU and page
             faults a read), beside a one-pass numpy sum over the .dat measured in the same run. Target: about 1 ms in-process, a few ms served, at any range.
  1b. many: a read of 1, 3, 10 and 50 feeds at once (ids=), the last 5 minutes of 10 s data
             with the newest points in the write buffer, through the test client and served.
  2. commit: buffer -> files throughput, Redis read + parse + pwrite + fsync + trim.
             Target >= 1,000,000 values/s.
  2a. scale: 10 s of 1 s data (10 points a feed, files already there) committed for 100, 1,000
             and 10,000 feeds, write-only (sync=False) and syncing (sync=True) with an fsync a
             file and with one syncfs a batch (BMS_FEED_SYNC_BY), beside an open + pwrite + close
             floor (and open + pwrite + fsync + close) over as many files of the same size,
             measured in the same run; CPU of the process and of the whole machine (the
             journal's kernel threads). Target: 10,000 feeds < 1 s write-only.
  2b. shards: the same commit split over 1, 2 and 4 shard writers (feeds/store/shards.py), each a
             process of its own under its own lock, as one worker per shard queue runs it:
             wall time from the start of the first to the end of the last.
  3. load:   bytes dirtied per second (/proc/self/io write_bytes) committing the seed's workload
             (25 feeds at 60 s, 20 feeds at 10 s) in simulated time, at commit intervals of
             1 s, 60 s, 5 min, 30 min. Targets <= 5.95, 3.2, 0.77, 0.14 kB/s. Each commit
             fsyncs when BMS_FEED_SYNC_INTERVAL (default 60 s) has passed since the last sync,
             as feeds.store.service.commit_all does; 1 s commits are also shown with a sync every
             commit and every 30 s (the kernel's own writeback age, vm.dirty_expire_centisecs).

Scratch data dir, SQLite file and the Redis db given by --redis-db (flushed!).

    .venv/bin/python bench/feeds.py [--redis-db 11] [--repeat 50] [--years 1 10] [--only read]
"""

from __future__ import annotations

import argparse
import http.client
import os
import resource
import socket
import statistics
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import scratch_site  # noqa: E402  (bench/, the script's own folder)

YEAR_SLOTS = 365 * 86400 // 10  # 3,153,600
START = 1_704_067_200  # 2024-01-01 00:00 UTC


def write_bytes() -> int:
    with open("/proc/self/io") as fh:
        for line in fh:
            if line.startswith("write_bytes:"):
                return int(line.split()[1])
    raise RuntimeError("no write_bytes in /proc/self/io")


def year_of_data(gappy: bool, seed: int = 1) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(YEAR_SLOTS)
    data = (2000 + 1500 * np.sin(t * 2 * np.pi / 8640) + rng.normal(0, 50, YEAR_SLOTS)).astype(
        "<f4"
    )
    for a in rng.integers(0, YEAR_SLOTS - 5000, 20):  # 20 outages of up to ~14 h
        data[a : a + rng.integers(10, 5000)] = np.nan
    if gappy:  # and 1 % of readings lost at random: every window has a gap
        data[rng.random(YEAR_SLOTS) < 0.01] = np.nan
    return data


def median_ms(fn, repeat: int) -> tuple[float, float, float, float]:
    """Median and p95 wall milliseconds of `fn`, its median CPU milliseconds (what it costs
    whatever else the machine runs: this machine is shared) and minor page faults of a call."""
    fn()  # warm the page cache and imports
    times, cpu, faults = [], [], []
    for _ in range(repeat):
        f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        c0 = time.process_time()
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
        cpu.append((time.process_time() - c0) * 1000)
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
    times.sort()
    return (statistics.median(times), times[int(len(times) * 0.95) - 1],
            statistics.median(cpu), statistics.median(faults))  # fmt: skip


def numpy_floor(path: Path) -> float:
    """One numpy pass over the .dat as a read would open it: map the file, sum it."""
    return float(np.memmap(path, dtype="<f4", mode="r").sum())


class Gunicorn:
    """The site under gunicorn as scripts/run-site.sh starts it, one worker (so its page faults
    and CPU are one process's), on a free port; reads timed from a keep-alive client."""

    def __init__(self) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        gunicorn = Path(sys.executable).parent / "gunicorn"
        self.proc = subprocess.Popen(
            [str(gunicorn), "-c", "python:bms.gunicorn_conf", "bms.wsgi:application",
             "--bind", f"127.0.0.1:{self.port}", "--workers", "1", "--threads", "4",
             "--timeout", "60", "--log-level", "warning"],
            cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)),
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while True:
            try:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
                self.conn.request("GET", "/healthz", headers={"Host": "localhost"})
                self.conn.getresponse().read()
                break
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("gunicorn did not start") from None
                time.sleep(0.3)
        children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text()
        self.worker = int(children.split()[0])

    def worker_counters(self) -> tuple[int, float]:
        """The worker's minor page faults and CPU seconds so far (/proc/<pid>/stat)."""
        fields = Path(f"/proc/{self.worker}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[7]), (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def get(self, url: str) -> bytes:
        self.conn.request("GET", url, headers={"Host": "localhost"})
        response = self.conn.getresponse()
        body = response.read()
        assert response.status == 200, (response.status, body[:200])
        return body

    def time(self, url: str, repeat: int) -> tuple[float, float, float, float]:
        """Median and p95 wall ms, the worker's CPU ms and minor faults a read (means)."""
        self.conn.close()  # gunicorn closes a connection idle for 2 s: a fresh one
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        self.get(url)
        faults0, cpu0 = self.worker_counters()
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            self.get(url)
            times.append((time.perf_counter() - t0) * 1000)
        faults1, cpu1 = self.worker_counters()
        times.sort()
        return (statistics.median(times), times[int(len(times) * 0.95) - 1],
                (cpu1 - cpu0) * 1000 / repeat, (faults1 - faults0) / repeat)  # fmt: skip

    def stop(self) -> None:
        self.conn.close()
        self.proc.terminate()
        self.proc.wait(timeout=30)


def bench_read(
    feed_dir: Path, repeat: int, server: Gunicorn, years: tuple[int, ...] = (1, 10)
) -> None:
    from django.test import Client

    from feeds.emoncms import read as emoncms_read
    from feeds.models import Feed
    from feeds.store import phpfina, summaries

    client = Client()
    print(f"\n1. read: 1000 averaged points over 1 and 10 years of 10 s data, 20 outages a year "
          f"+ 1 % of readings lost at random; {os.cpu_count()} cores, load "
          f"{os.getloadavg()[0]:.1f}; wall median (p95), CPU median, minor page faults a read")  # fmt: skip
    for n_years in years:
        feed = Feed.objects.create(name=f"{n_years} years", interval=10, public=True)
        dat = feed_dir / f"{feed.id}.dat"
        (feed_dir / f"{feed.id}.meta").write_bytes(phpfina.pack_meta(10, START))
        with open(dat, "wb") as fh:
            for k in range(n_years):
                fh.write(year_of_data(True, seed=1 + k).tobytes())
        end = START + n_years * YEAR_SLOTS * 10 - 10
        interval = (end - START) // 1000
        url = f"/feed/data.json?id={feed.id}&start={START}&end={end}&interval={interval}&average=1"
        req = emoncms_read.Request(START, end, interval, average=True)

        def emoncms_engine(f=feed, r=req):
            return emoncms_read.read(feed_dir, f.id, r)

        def api_engine(f=feed, e=end, i=interval):
            return phpfina.read(feed_dir, f.id, START, e, i, average=True)

        def served(u=url):
            response = client.get(u)
            assert response.status_code == 200, response
            return response

        floor = median_ms(lambda p=dat: numpy_floor(p), repeat)
        print(f"   {n_years:2d} year(s), {n_years * YEAR_SLOTS:,} slots; one-pass numpy sum over "
              f"the .dat (floor): {floor[0]:.2f} ms ({floor[1]:.2f}), CPU {floor[2]:.2f} ms, "
              f"{floor[3]:.0f} faults")  # fmt: skip
        for label in ("raw path (no summary)", "with summaries"):
            if label.startswith("raw"):
                summaries.remove(feed_dir, feed.id)
            else:
                t0 = time.perf_counter()
                summaries.build(feed_dir, feed.id)
                built = time.perf_counter() - t0
                size = sum(p.stat().st_size for p in summaries.paths(feed_dir, feed.id))
                print(
                    f"      summary built in {built:.2f} s: {size / 1e6:.1f} MB beside a "
                    f"{dat.stat().st_size / 1e6:.1f} MB .dat ({size / dat.stat().st_size:.1%})"
                )
            assert len(served().json()) == len(emoncms_engine()[0]) == 1001
            for name, fn in (("in-process, emoncms engine (feeds/emoncms/read.py)", emoncms_engine),
                             ("in-process, API engine (phpfina.read)", api_engine),
                             ("served, /feed/data.json (Django test client)", served)):  # fmt: skip
                med, p95, cpu, faults = median_ms(fn, repeat)
                print(f"      {label:22s} {name:52s} {med:7.2f} ms ({p95:.2f}), CPU {cpu:.2f} ms, "
                      f"{faults:.0f} faults")  # fmt: skip
            med, p95, cpu, faults = server.time(url, repeat)
            print(f"      {label:22s} {'served by gunicorn (1 worker; its CPU and faults)':52s} "
                  f"{med:7.2f} ms ({p95:.2f}), CPU {cpu:.2f} ms, {faults:.0f} faults")  # fmt: skip
            tracemalloc.start()  # what one read allocates beyond the thread's reused buffers
            emoncms_engine()
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            print(
                f"      {label:22s} peak allocation of one emoncms-engine read: {peak / 1e6:.2f} MB"
            )


def bench_read_many(
    repeat: int, server: Gunicorn, counts: tuple[int, ...] = (1, 3, 10, 50)
) -> None:
    """A dashboard's read: several feeds at once (`ids=`), a few minutes of 10 s data each, the
    newest points still in the write buffer, as a chart of live feeds asks."""
    from django.test import Client

    from feeds.models import Feed
    from feeds.store import service

    now = int(time.time())
    feeds = [
        Feed.objects.create(name=f"live {i}", interval=10, public=True) for i in range(max(counts))
    ]
    service.log_points([(f.id, now - 300 + 10 * j, float(j)) for f in feeds for j in range(24)])
    service.commit_all(now=now)
    service.log_points([(f.id, now - 60 + 10 * j, float(j)) for f in feeds for j in range(6)])
    client = Client()
    print(f"\n1b. many: /feed/data.json?ids= of N public feeds, the last 5 min at 10 s (31 points "
          f"each, the newest 6 in the write buffer); load {os.getloadavg()[0]:.1f}; wall median "
          f"(p95), CPU median a read")  # fmt: skip
    for n in counts:
        ids = ",".join(str(f.id) for f in feeds[:n])
        url = f"/feed/data.json?ids={ids}&start={now - 300}&end={now}&interval=10"

        def test_client(u=url):
            response = client.get(u)
            assert response.status_code == 200, response
            return response

        med, p95, cpu, _ = median_ms(test_client, repeat)
        print(f"   {n:3d} feed(s): Django test client {med:6.2f} ms ({p95:.2f}), CPU {cpu:.2f} ms "
              f"({cpu / n:.2f} a feed)")  # fmt: skip
        med, p95, cpu, _ = server.time(url, repeat)
        print(f"   {n:3d} feed(s): served by gunicorn {med:6.2f} ms ({p95:.2f}), its CPU "
              f"{cpu:.2f} ms ({cpu / n:.2f} a feed)")  # fmt: skip


def bench_commit(redis_client, base: Path) -> None:
    from feeds.store.buffer import FeedBuffer

    buffer = FeedBuffer(redis_client)
    print("\n2. commit throughput, buffer -> files (fsync'd)")
    # joined: power_to_kwh's points every 20 s on a 10 s feed, each drawing a one-slot line
    # (phpfina.join_lines, in arrival order), one in 50 sent late after a later one.
    for feeds, per_feed, joined in ((20, 100_000, False), (2000, 1_000, False),
                                    (20, 100_000, True)):  # fmt: skip
        directory = base / f"commit-{feeds}-{joined}"
        directory.mkdir()
        redis_client.flushdb()
        pipe = redis_client.pipeline(transaction=False)
        for feed_id in range(1, feeds + 1):
            step = 20 if joined else 10
            rows = [(feed_id, START + step * i, float(i % 1000), joined) for i in range(per_feed)]
            if joined:
                for i in range(50, per_feed, 50):
                    rows[i - 1], rows[i] = rows[i], rows[i - 1]
            buffer.add(rows, pipe)
        pipe.execute()
        total = feeds * per_feed
        t0 = time.perf_counter()
        report = buffer.commit(directory, dict.fromkeys(range(1, feeds + 1), 10), now=2e9)
        seconds = time.perf_counter() - t0
        assert report.points == total and not redis_client.keys("feeds:buf:*"), report
        kind = " joined, 20 s, 2% late" if joined else ""
        print(f"   {feeds:5d} feeds x {per_feed:7,d} values{kind} = {total:,}: {seconds:.3f} s "
              f"= {total / seconds:,.0f} values/s")  # fmt: skip


def _scale_floor(directory: Path, feeds: int, payload: bytes, fsync: bool) -> float:
    """Seconds to append `payload` to `feeds` existing files with open + pwrite (+ fsync) +
    close each: what any commit of one block per PHPFina file must at least do."""
    t0 = time.perf_counter()
    for feed_id in range(1, feeds + 1):
        path = directory / f"{feed_id}.dat"
        fd = os.open(path, os.O_RDWR)
        try:
            os.pwrite(fd, payload, os.fstat(fd).st_size)
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
    return time.perf_counter() - t0


def bench_commit_scale(redis_client, base: Path, sizes: tuple[int, ...]) -> None:
    from feeds.store.buffer import FeedBuffer

    buffer = FeedBuffer(redis_client)
    per_feed = 10  # 10 s of data at 1 s
    print(
        f"\n2a. commit of {per_feed} s of 1 s data per feed (files exist), {os.cpu_count()} cores, "
        f"load {os.getloadavg()[0]:.1f}"
    )
    for feeds in sizes:
        directory = base / f"scale-{feeds}"
        floor_dir = base / f"scale-floor-{feeds}"
        directory.mkdir()
        floor_dir.mkdir()
        redis_client.flushdb()
        intervals = dict.fromkeys(range(1, feeds + 1), 1)
        t = START

        def fill(t: int, feeds: int = feeds) -> None:
            pipe = redis_client.pipeline(transaction=False)
            for feed_id in range(1, feeds + 1):
                buffer.add([(feed_id, t + i, float(i), False) for i in range(per_feed)], pipe)
            pipe.execute()

        fill(t)  # the files are created here: steady state is measured, not creation
        buffer.commit(directory, intervals, now=START + 3600)
        for feed_id in range(1, feeds + 1):
            (floor_dir / f"{feed_id}.dat").write_bytes(b"\0" * 4 * per_feed)
        figures = {}
        # sync=True twice: an fsync a file, then one syncfs a batch (feeds/store/disk_sync.py).
        for label, sync, sync_by in CASES:
            buffer.sync_by = sync_by
            t += per_feed
            fill(t)
            os.sync()  # nothing left dirty from the fill or the case before
            t0, cpu0, machine0 = time.perf_counter(), time.process_time(), _machine_cpu_s()
            report = buffer.commit(directory, intervals, now=START + 3600, sync=sync)
            seconds, cpu = time.perf_counter() - t0, time.process_time() - cpu0
            machine = _machine_cpu_s() - machine0
            assert report.points == feeds * per_feed and not report.refused, report
            buffer.commit(directory, intervals, now=START + 3600)  # sync what was only written
            floor = _scale_floor(floor_dir, feeds, b"\0" * 4 * per_feed, fsync=sync)
            figures[label] = (seconds, cpu, machine, floor)
        assert not redis_client.keys("feeds:buf:*")
        for label, (seconds, cpu, machine, floor) in figures.items():
            print(f"   {feeds:6,d} feeds, {label}: {seconds:.3f} s ({seconds / feeds * 1e6:.0f} us a "
                  f"feed, CPU {cpu:.3f} s, the machine's {machine:.3f} s); floor {floor:.3f} s "
                  f"({floor / feeds * 1e6:.0f} us a feed); ratio {seconds / floor:.1f}x")  # fmt: skip


# (label, sync, sync_by) of the scale cases; the floor of both syncing cases is an fsync a file.
CASES = [
    ("write-only", False, "filesystem"),
    ("with fsync a file", True, "file"),
    ("with syncfs a batch", True, "filesystem"),
]


def _machine_cpu_s() -> float:
    """CPU seconds the whole machine has spent busy (every core, /proc/stat): an fsync's cost is
    partly in kernel threads (the journal's), not in the calling process."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return (sum(fields) - idle) / os.sysconf("SC_CLK_TCK")


def _commit_one_shard(url: str, shard: int, shards: int, directory: str, feeds: int) -> int:
    """One shard's writer in its own process: its own Redis connection, lock and directory."""
    import redis

    from feeds.store.buffer import FeedBuffer

    buffer = FeedBuffer(redis.Redis.from_url(url), shard=shard, shards=shards)
    report = buffer.commit(directory, dict.fromkeys(range(1, feeds + 1), 10), now=2e9)
    assert not report.skipped
    return report.points


def bench_sharded_commit(redis_client, base: Path, url: str) -> None:
    import multiprocessing

    from feeds.store.buffer import FeedBuffer

    buffer = FeedBuffer(redis_client)
    cores = os.cpu_count()
    print(
        f"\n2b. sharded commit: one process per shard, {cores} cores, load {os.getloadavg()[0]:.1f}"
    )
    context = multiprocessing.get_context("spawn")  # a clean process, as a worker would be
    for feeds, per_feed in ((20, 100_000), (2000, 1_000)):
        for shards in (1, 2, 4):
            dirs = [base / f"sharded-{feeds}-{shards}" / f"shard-{k}" for k in range(shards)]
            for d in dirs:
                d.mkdir(parents=True)
            redis_client.flushdb()
            pipe = redis_client.pipeline(transaction=False)
            for feed_id in range(1, feeds + 1):
                rows = [(feed_id, START + 10 * i, float(i % 1000), False) for i in range(per_feed)]
                buffer.add(rows, pipe)
            pipe.execute()
            total = feeds * per_feed
            with context.Pool(shards) as pool:
                pool.apply(os.getpid)  # start the processes before the clock
                t0 = time.perf_counter()
                done = pool.starmap(
                    _commit_one_shard,
                    [(url, k, shards, str(dirs[k]), feeds) for k in range(shards)],
                )
                seconds = time.perf_counter() - t0
            assert sum(done) == total and not redis_client.keys("feeds:buf:*"), done
            print(f"   {feeds:5d} feeds x {per_feed:7,d} values, {shards} shard(s): "
                  f"{seconds:.3f} s = {total / seconds:,.0f} values/s")  # fmt: skip


def bench_write_load(redis_client, base: Path) -> None:
    from feeds.store.buffer import FeedBuffer

    buffer = FeedBuffer(redis_client)
    intervals = {i: 60 for i in range(1, 26)} | {i: 10 for i in range(26, 46)}
    print("\n3. write load: 25 feeds at 60 s + 20 feeds at 10 s, simulated time")
    # (commit interval, sync interval, target); a sync interval at or below the commit
    # interval means every commit syncs. 60 s is BMS_FEED_SYNC_INTERVAL's default.
    cases = [(1, 60, 5.95), (1, 30, 5.95), (1, 1, None), (60, 60, 3.2), (300, 60, 0.77),
             (1800, 60, 0.14)]  # fmt: skip
    for commit_every, sync_every, target in cases:
        directory = base / f"load-{commit_every}-{sync_every}"
        directory.mkdir()
        redis_client.flushdb()
        duration = max(1200, 24 * commit_every)  # simulated seconds measured
        t = START
        # A day of history first, so files exist and we measure steady state, not creation.
        warm = [(f, START - 86400 + s, 1.0, False) for f, iv in intervals.items()
                for s in range(0, 86400, iv)]  # fmt: skip
        buffer.add(warm)
        buffer.commit(directory, intervals, now=t)
        before = write_bytes()
        commits = syncs = 0
        last_sync = t
        while t < START + duration:
            nxt = t + commit_every
            rows = [(f, s, 20.0 + s % 7, False) for f, iv in intervals.items()
                    for s in range(-(-t // iv) * iv, nxt, iv)]  # fmt: skip
            if rows:
                buffer.add(rows)
            sync = nxt - last_sync >= sync_every
            buffer.commit(directory, intervals, now=nxt, sync=sync)
            commits += 1
            if sync:
                syncs += 1
                last_sync = nxt
            t = nxt
        buffer.commit(directory, intervals, now=t, sync=True)  # nothing may stay behind
        assert not redis_client.keys("feeds:buf:*")
        rate = (write_bytes() - before) / duration / 1000
        if target is None:  # the floor without deferred sync: one page per point
            verdict = "(for comparison: BMS_FEED_SYNC_INTERVAL=0)"
        else:
            verdict = f"(target <= {target}) " + ("ok" if rate <= target else "over target")
        print(f"   commit every {commit_every:4d} s, sync every {max(commit_every, sync_every):4d} s: "
              f"{commits:5d} commits, {syncs:5d} syncs over {duration:,} simulated s: "
              f"{rate:6.2f} kB/s written {verdict}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--redis-db", type=int, default=11, help="Redis db to use (flushed)")
    parser.add_argument("--repeat", type=int, default=50, help="reads timed per case")
    parser.add_argument("--years", type=int, nargs="+", default=[1, 10], help="read ranges")
    parser.add_argument(
        "--only",
        choices=["read", "many", "commit", "scale", "shards", "load"],
        help="run one part (read includes many)",
    )
    parser.add_argument(
        "--scale", default="100,1000,10000", help="feed counts for part 2a (comma-separated)"
    )
    args = parser.parse_args()

    # The scratch data dir is on the same disk as var/ (a tmpfs would count no writes).
    base = scratch_site.start(
        "bench-feeds-", f"redis://127.0.0.1:6379/{args.redis_db}", parent=ROOT / "var"
    )
    from django.conf import settings

    from core.redis import get_redis

    redis_client = get_redis()
    redis_client.flushdb()
    print(f"data dir {base}; Redis db {args.redis_db}; numpy {np.__version__}")
    try:
        if args.only in (None, "read", "many"):
            server = Gunicorn()
            try:
                if args.only in (None, "read"):
                    bench_read(Path(settings.BMS_FEED_DIR), args.repeat, server, tuple(args.years))
                bench_read_many(args.repeat, server)
            finally:
                server.stop()
        if args.only in (None, "commit"):
            bench_commit(redis_client, base)
        if args.only in (None, "scale"):
            sizes = tuple(int(n) for n in args.scale.split(","))
            bench_commit_scale(redis_client, base, sizes)
        if args.only in (None, "shards"):
            bench_sharded_commit(redis_client, base, settings.REDIS_URL)
        if args.only in (None, "load"):
            bench_write_load(redis_client, base)
    finally:
        redis_client.flushdb()
        import shutil

        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
