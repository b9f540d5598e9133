"""The Redis write buffer against the real Redis: merge on read, commit, idempotence."""

from __future__ import annotations

import math
import threading

import numpy as np
import pytest

from feeds.store import phpfina
from feeds.store.buffer import FeedBuffer

NOW = 2_000_000_000


def test_buffered_points_are_readable_before_any_commit(buffer, feed_dir):
    buffer.add([(1, 1000, 1.0, False), (1, 1010, 2.0, False)])
    pending = buffer.pending(1)
    got = phpfina.read(feed_dir, 1, 1000, 1010, 10, feed_interval=10,
                       overlay=(pending["t"], pending["v"]))  # fmt: skip
    assert got == [[1_000_000, 1.0], [1_010_000, 2.0]]
    assert not (feed_dir / "1.dat").exists()


def test_commit_writes_the_files_and_empties_the_buffer(buffer, feed_dir, redis_client):
    buffer.add([(1, 1000, 1.0, False), (1, 1030, 4.0, False), (2, 500, 7.0, False)])
    report = buffer.commit(feed_dir, {1: 10, 2: 60}, now=NOW)
    assert (report.feeds, report.points) == (2, 3)
    assert np.fromfile(feed_dir / "1.dat", "<f4").tolist()[::3] == [1.0, 4.0]
    assert phpfina.read_meta(feed_dir, 2) == phpfina.Meta(interval=60, start_time=480)
    assert redis_client.keys("feeds:buf:*") == []
    assert buffer.dirty_feeds() == []


def test_committing_twice_writes_the_same_bytes(buffer, feed_dir, redis_client):
    buffer.add([(1, 1000 + 10 * i, float(i), i % 3 == 0) for i in range(0, 50, 2)])
    raw = redis_client.get("feeds:buf:1")
    buffer.commit(feed_dir, {1: 10}, now=NOW)
    first = (feed_dir / "1.dat").read_bytes(), (feed_dir / "1.meta").read_bytes()
    redis_client.set("feeds:buf:1", raw)  # as if the trim had never happened (a crash)
    redis_client.sadd("feeds:dirty", 1)
    buffer.commit(feed_dir, {1: 10}, now=NOW)
    assert ((feed_dir / "1.dat").read_bytes(), (feed_dir / "1.meta").read_bytes()) == first


def test_points_arriving_during_a_commit_stay_buffered(buffer, feed_dir):
    buffer.add([(1, 1000, 1.0, False)])
    other = FeedBuffer(buffer.redis)

    def arrive_mid_commit(feed_id, records):
        other.add([(1, 1010, 2.0, False)])

    buffer.commit_feed(feed_dir, 1, 10, now=NOW, after_write=arrive_mid_commit)
    assert buffer.pending(1)["t"].tolist() == [1010]
    assert buffer.dirty_feeds() == [1]
    buffer.commit(feed_dir, {1: 10}, now=NOW)
    assert np.fromfile(feed_dir / "1.dat", "<f4").tolist() == [1.0, 2.0]


def test_commit_goes_block_by_block(buffer, feed_dir):
    buffer.add([(1, 1000 + 10 * i, float(i), False) for i in range(25)])
    blocks = []
    buffer.commit_feed(feed_dir, 1, 10, now=NOW, block_records=10,
                       after_write=lambda f, n: blocks.append(n))  # fmt: skip
    assert blocks == [10, 10, 5]
    assert np.fromfile(feed_dir / "1.dat", "<f4").tolist() == [float(i) for i in range(25)]


def test_refused_points_are_reported_and_leave_the_buffer(buffer, feed_dir):
    start = 400_000_000  # far enough from 0 that MAX_PREPEND_S (5 years) before it is a time
    phpfina.write(feed_dir, 1, 10, start, 1.0, now=NOW)
    buffer.add([(1, start - phpfina.MAX_PREPEND_S - 10, 5.0, False), (1, start + 10, 2.0, False)])
    report = buffer.commit(feed_dir, {1: 10}, now=NOW)
    assert report.refused == {1: 1} and report.points == 1
    assert buffer.dirty_feeds() == []


def test_points_of_an_unknown_feed_are_dropped_and_reported(buffer, feed_dir):
    buffer.add([(77, 1000, 1.0, False)])
    report = buffer.commit(feed_dir, {}, now=NOW)
    assert report.dropped == {77: 1}
    assert buffer.dirty_feeds() == []
    assert not (feed_dir / "77.dat").exists()


def test_a_second_commit_while_one_runs_skips(buffer, feed_dir):
    buffer.add([(1, 1000, 1.0, False)])
    inner = {}

    def try_again(feed_id, records):
        inner["report"] = FeedBuffer(buffer.redis).commit(feed_dir, {1: 10}, now=NOW)

    buffer.commit(feed_dir, {1: 10}, now=NOW, after_write=try_again)
    assert inner["report"].skipped is True
    assert buffer.redis.get(buffer.lock_key) is None  # released afterwards


def test_last_value_keeps_the_newest_time_not_the_latest_arrival(buffer):
    buffer.add([(1, 2000, 5.0, False)])
    buffer.add([(1, 1000, 9.0, False)])  # late, older reading
    assert buffer.last_values([1, 2]) == {1: (2000, 5.0)}
    buffer.add([(1, 2000, 6.0, False)])  # same time again: the re-post wins
    assert buffer.last_values([1]) == {1: (2000, 6.0)}


def test_concurrent_adders_lose_nothing(redis_client, feed_dir):
    def post(offset):
        b = FeedBuffer(redis_client)
        for i in range(200):
            b.add([(1, 1000 + 10 * (offset + 2 * i), 1.0, False)])

    threads = [threading.Thread(target=post, args=(k,)) for k in (0, 1)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    FeedBuffer(redis_client).commit(feed_dir, {1: 10}, now=NOW)
    data = np.fromfile(feed_dir / "1.dat", "<f4")
    assert len(data) == 400 and not np.isnan(data).any()


@pytest.mark.parametrize("value", [math.nan, math.inf])
def test_a_bad_value_smuggled_into_the_buffer_is_refused_at_commit(buffer, feed_dir, value):
    buffer.add([(1, 1000, value, False), (1, 1010, 2.0, False)])
    report = buffer.commit(feed_dir, {1: 10}, now=NOW)
    assert report.refused == {1: 1}
    assert np.fromfile(feed_dir / "1.dat", "<f4").tolist() == [2.0]


def test_a_commit_that_lost_its_lock_does_not_trim(buffer, feed_dir):
    from feeds.store.buffer import LockLost

    buffer.add([(1, 1000 + 10 * i, 1.0, False) for i in range(20)])

    def lock_stolen(feed_id, records):
        buffer.redis.set(buffer.lock_key, "another-commit")

    with pytest.raises(LockLost):
        buffer.commit(feed_dir, {1: 10}, now=NOW, block_records=10, after_write=lock_stolen)
    # the block was written, but not trimmed: the commit holding the lock now will take it
    assert len(buffer.pending(1)) == 20
    assert buffer.redis.get(buffer.lock_key) == b"another-commit"  # not ours to delete
