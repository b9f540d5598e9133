"""A read's memory follows the points returned and the data that exists, never the
window's length. The attack: a huge interval with averaging over a feed that has buffered
points once allocated a NaN array over the whole window (1.7 GB, then 12 GB in all).

The merge of buffered points is sparse now, so each test here also checks it still gives what
the commit will write: a read before the commit equals the read after it.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import textwrap
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from feeds.store import phpfina

NOW = 1_700_000_000  # a multiple of 10
HUGE = 0xFFFFFFFF
# Far below what the old read took (1.7 GB for its first array) and far above what a bounded
# read needs (a few MB of numpy temporaries).
CAP_MB = 300
REPO = Path(__file__).resolve().parents[2]


def make_feed(directory, feed_id, interval, start, values):
    (directory / f"{feed_id}.meta").write_bytes(phpfina.pack_meta(interval, start))
    (directory / f"{feed_id}.dat").write_bytes(np.asarray(values, "<f4").tobytes())


def committed_read(tmp_path, overlay, *args, **kwargs):
    """What the read returns once the commit has written the overlay: the reference."""
    copy = tmp_path / "committed"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(tmp_path / "feeds", copy)
    t, v, j = overlay
    report = phpfina.write_points(copy, 1, 10, t, v, j, now=NOW + 10**6, fsync=False)
    assert report.written > 0
    return phpfina.read(copy, 1, *args, **kwargs)


def assert_same(got, want):
    assert [t for t, _ in got] == [t for t, _ in want]
    for (_, a), (_, b) in zip(got, want, strict=True):
        assert (a is None and b is None) or a == pytest.approx(b, rel=1e-6)


# (interval, average, delta): raw slots, averages, kWh deltas, calendar windows.
READS = [
    (10, False, False),
    (30, True, False),
    (70, False, True),
    (600, True, False),
    ("daily", True, False),
    ("daily", False, True),
    (HUGE, True, False),
    (HUGE, False, True),
]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("chunk", [None, 7])
@pytest.mark.parametrize("arrival", ["in time order", "shuffled"])
def test_buffered_points_read_as_the_commit_will_write_them(
    tmp_path, monkeypatch, seed, chunk, arrival
):
    """Shuffled: points past the end arrive out of order (a future-dated one, then late ones),
    so join lines are drawn as they arrive and late points land inside them."""
    # chunk 7: every window longer than 7 slots goes through the chunk-by-chunk reduction.
    if chunk is not None:
        monkeypatch.setattr(phpfina, "READ_CHUNK_SLOTS", chunk)
    rng = np.random.default_rng(seed)
    directory = tmp_path / "feeds"
    directory.mkdir()
    start = NOW - 20_000
    values = rng.normal(10, 3, 1500).astype("<f4")
    values[rng.random(1500) < 0.3] = np.nan
    make_feed(directory, 1, 10, start, values)
    # Points inside the file (rewrites), a few before it (a prepend), and past its end with
    # gaps, some of them joined.
    k = 60
    t = np.concatenate([
        start + 10 * rng.integers(0, 1500, k // 2),
        start - 10 * rng.integers(1, 50, 3),
        start + 15_000 + 10 * np.sort(rng.integers(0, 400, k // 2)),
    ])  # fmt: skip
    if arrival == "shuffled":
        t = rng.permutation(t)
    v = rng.normal(50, 5, len(t)).astype("<f4").astype(float)  # as the buffer stores them
    j = rng.random(len(t)) < 0.5
    overlay = (t, v, j)
    for interval, average, delta in READS:
        args = (start - 500, NOW, interval)
        kw = {"average": average, "delta": delta, "timezone": "Europe/London"}
        got = phpfina.read(directory, 1, *args, overlay=overlay, **kw)
        assert_same(got, committed_read(tmp_path, overlay, *args, **kw))


def test_a_huge_window_over_a_small_file_is_its_mean(tmp_path):
    make_feed(tmp_path, 1, 10, NOW - 100, [1.0, 2.0, 3.0, np.nan, 6.0])
    overlay = (np.array([NOW - 50, NOW - 80]), np.array([9.0, 4.0]))  # a new slot, a rewrite
    got = phpfina.read(tmp_path, 1, NOW - 60, NOW, HUGE, average=True, overlay=overlay)
    assert got == [[0, pytest.approx((1 + 2 + 4 + 9 + 6) / 5)]]


def test_a_calendar_read_of_too_many_windows_is_refused_before_building_them(tmp_path):
    make_feed(tmp_path, 1, 10, NOW, [1.0])
    with pytest.raises(phpfina.TooManyPoints):
        phpfina.read(tmp_path, 1, 0, HUGE, "daily", max_points=1000)


ATTACK = textwrap.dedent(
    """
    import json, resource, sys, time
    import numpy as np
    from feeds.store import phpfina
    directory, cap_mb, now = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    # A week of 10 s data, then the attack's read with points in the buffer, under a cap of
    # the address space now plus cap_mb.
    with open("/proc/self/status") as fh:
        vm = next(int(line.split()[1]) for line in fh if line.startswith("VmSize:"))
    limit = vm * 1024 + cap_mb * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))
    overlay = (np.array([now - 40, now - 20]), np.array([5.0, 7.0]), np.array([False, True]))
    try:
        out = phpfina.read(directory, 1, now - 60, now, 0xFFFFFFFF, average=True,
                           overlay=overlay)
    except MemoryError:
        out = "MemoryError"
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"out": out, "peak_kb": peak_kb}))
    """
)


def run_attack(directory: Path, cap_mb: int = CAP_MB) -> dict:
    result = subprocess.run(
        [sys.executable, "-c", ATTACK, str(directory), str(cap_mb), str(NOW)],
        capture_output=True, text=True, cwd=REPO, timeout=120, check=False,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_the_huge_interval_attack_stays_under_a_memory_cap(tmp_path):
    week = 7 * 8640
    make_feed(tmp_path, 1, 10, NOW - 10 * week, np.ones(week - 6))
    got = run_attack(tmp_path)
    # Six slots: 1.0 x (week - 6) from the file, then 5.0 at NOW-40, 7.0 at NOW-20 and the
    # joined line between them (6.0 at NOW-30); NOW-60 and NOW-50 stay empty.
    expected = (week - 6 + 5 + 6 + 7) / (week - 3)
    assert got["out"] == [[0, pytest.approx(expected)]]


@contextmanager
def address_space_cap(extra_mb: int = CAP_MB):
    """This process's address space capped at what it uses now plus `extra_mb`: a read that
    tries to allocate by the window's length fails with MemoryError instead of eating the host."""
    with open("/proc/self/status") as fh:
        vm_kb = next(int(line.split()[1]) for line in fh if line.startswith("VmSize:"))
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (vm_kb * 1024 + extra_mb * 2**20, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
