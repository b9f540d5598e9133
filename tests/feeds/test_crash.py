"""A commit killed with SIGKILL part-way loses nothing: a real child process, real Redis.

The child commits the buffer; the parent kills it (-9) mid-commit, then commits again and
compares the files with a commit that was never interrupted.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from feeds.store import summaries
from feeds.store.buffer import FeedBuffer

ROOT = Path(__file__).resolve().parents[2]
NOW = 2_000_000_000

CHILD = textwrap.dedent(
    """
    import sys, time, redis
    from feeds.store.buffer import FeedBuffer
    host, port, db, directory, pause = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
    sync = sys.argv[6] == "sync"

    def after_write(feed_id, records):
        print(f"written {feed_id} {records}", flush=True)
        if pause == "pause":
            time.sleep(60)  # the parent kills us here: files written, Redis not yet trimmed

    buffer = FeedBuffer(redis.Redis(host=host, port=port, db=db))
    buffer.commit(directory, {1: 10, 2: 10}, now=NOW_S, block_records=50_000, sync=sync,
                  after_write=after_write)
    print("done", flush=True)
    """
).replace("NOW_S", str(NOW))


def fill(buffer: FeedBuffer) -> None:
    rng = np.random.default_rng(7)
    for feed_id in (1, 2):
        t = 1_000_000 + 10 * np.arange(200_000)
        v = rng.normal(50, 10, len(t))
        rows = [(feed_id, int(a), float(b), False) for a, b in zip(t, v, strict=True)]
        for i in range(0, len(rows), 50_000):
            buffer.add(rows[i : i + 50_000])


def start_child(redis_client, directory: Path, pause: str, sync: str = "sync") -> subprocess.Popen:
    kw = redis_client.connection_pool.connection_kwargs
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, kw.get("host", "127.0.0.1"), str(kw.get("port", 6379)),
         str(kw.get("db", 0)), str(directory), pause, sync],
        cwd=ROOT, stdout=subprocess.PIPE, text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )  # fmt: skip


def reference_files(redis_client, tmp_path: Path) -> dict[str, bytes]:
    """What an uninterrupted commit of the same buffer writes."""
    raw = {k: redis_client.get(k) for k in (b"feeds:buf:1", b"feeds:buf:2")}
    directory = tmp_path / "reference"
    directory.mkdir()
    FeedBuffer(redis_client).commit(directory, {1: 10, 2: 10}, now=NOW)
    for key, value in raw.items():  # put the buffer back for the real test
        redis_client.set(key, value)
    redis_client.sadd("feeds:dirty", 1, 2)
    return {p.name: p.read_bytes() for p in directory.iterdir()}


def finish_and_compare(redis_client, directory: Path, expected: dict[str, bytes]) -> None:
    # The killed commit's lock is still there; its holder is dead, so this commit takes it
    # over at once instead of waiting out its TTL (core/redis_lock.py).
    report = FeedBuffer(redis_client).commit(directory, {1: 10, 2: 10}, now=NOW)
    assert not report.skipped
    got = {p.name: p.read_bytes() for p in directory.iterdir() if not p.name.endswith(".tmp")}
    assert got.keys() == expected.keys()
    for name in expected:
        if ".sum" not in name:  # the summaries' stamps and progress follow the commits made
            assert got[name] == expected[name], name
    for feed_id in (1, 2):  # a summary a read would use holds what the .dat gives
        assert summaries.matches_dat(directory, feed_id) in (True, None), feed_id
    assert redis_client.keys("feeds:buf:*") == []


def killed_commit(redis_client, tmp_path: Path, pause: str, sync: str = "sync", delay: float = 0):
    """Buffer the test data, start a committing child, SIGKILL it `delay` s after it wrote its
    first block. Returns (buffer, feed directory, the files an uninterrupted commit writes,
    the child's first line)."""
    buffer = FeedBuffer(redis_client)
    fill(buffer)
    expected = reference_files(redis_client, tmp_path)
    directory = tmp_path / "feeds"
    directory.mkdir()
    child = start_child(redis_client, directory, pause, sync)
    try:
        line = child.stdout.readline()  # the first block is written: the commit is under way
        time.sleep(delay)  # a real pause: where in the commit the kill lands
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
    finally:
        if child.poll() is None:
            child.kill()
    return buffer, directory, expected, line


@pytest.mark.integration
def test_a_commit_killed_between_write_and_trim_loses_nothing(redis_client, tmp_path):
    buffer, directory, expected, line = killed_commit(redis_client, tmp_path, "pause")
    assert line.startswith("written 1 50000"), line
    # the block is on disk, but every record is still in Redis
    assert (directory / "1.dat").stat().st_size == 50_000 * 4
    assert redis_client.strlen("feeds:buf:1") == 200_000 * 9
    assert redis_client.ttl(buffer.lock_key) > 60  # the dead commit's lock, for its TTL...
    finish_and_compare(redis_client, directory, expected)  # ...unless taken over


@pytest.mark.integration
@pytest.mark.parametrize("delay", [0.05, 0.2, 0.5])
def test_a_commit_killed_at_any_moment_loses_nothing(redis_client, tmp_path, delay):
    _buffer, directory, expected, _ = killed_commit(redis_client, tmp_path, "run", delay=delay)
    finish_and_compare(redis_client, directory, expected)


@pytest.mark.integration
def test_a_commit_without_sync_killed_part_way_loses_nothing(redis_client, tmp_path):
    """Written to the page cache, marked written, then SIGKILL: the next sync makes it durable."""
    buffer, directory, expected, line = killed_commit(redis_client, tmp_path, "pause", "nosync")
    assert line.startswith("written 1 50000"), line
    # the first block is in the file and marked written; nothing left Redis
    assert buffer.written_offset(1) == 50_000 * 9
    assert redis_client.strlen("feeds:buf:1") == 200_000 * 9
    redis_client.delete(buffer.lock_key)
    finish_and_compare(redis_client, directory, expected)
    assert buffer.written_offset(1) == 0
