"""The commit talks to Redis a batch of feeds at a time (issue #29): its round trips do not grow
with the feeds, and one read's reply stays within its bounds (BATCH_FEEDS, BATCH_BYTES plus one
block). Real Redis; the two scripts are wrapped only to count their calls and measure replies."""

from __future__ import annotations

import numpy as np
import pytest

from feeds.store import buffer as buffer_module
from feeds.store.buffer import RECORD_SIZE, FeedBuffer

NOW = 2_000_000_000


def counted(buffer: FeedBuffer) -> dict[str, list]:
    """Wrap the buffer's read and settle scripts: each call's reply (reads) or feeds (settles)."""
    calls: dict[str, list] = {"read": [], "settle": []}
    read, settle = buffer._read, buffer._settle

    def counting_read(**kw):
        reply = read(**kw)
        calls["read"].append(reply)
        return reply

    def counting_settle(**kw):
        calls["settle"].append(len(kw["keys"]) - 5)
        return settle(**kw)

    buffer._read, buffer._settle = counting_read, counting_settle
    return calls


def fill(buffer: FeedBuffer, feeds: int, points: int) -> None:
    buffer.add([(f, 1000 + 10 * i, float(f + i), False)
                for f in range(1, feeds + 1) for i in range(points)])  # fmt: skip


def test_a_commit_of_many_feeds_reads_and_settles_them_in_one_round_trip_each(buffer, feed_dir):
    fill(buffer, 200, 10)
    calls = counted(buffer)
    report = buffer.commit(feed_dir, dict.fromkeys(range(1, 201), 10), now=NOW)
    assert (report.feeds, report.points) == (200, 2000)
    assert (len(calls["read"]), calls["settle"]) == (1, [200])
    assert buffer.dirty_feeds() == [] and buffer.redis.keys("feeds:buf:*") == []
    assert np.fromfile(feed_dir / "200.dat", "<f4").tolist() == [200.0 + i for i in range(10)]


def test_more_feeds_than_a_batch_take_one_read_and_one_settle_a_batch(
    buffer, feed_dir, monkeypatch
):
    monkeypatch.setattr(buffer_module, "BATCH_FEEDS", 3)
    fill(buffer, 10, 2)
    calls = counted(buffer)
    buffer.commit(feed_dir, dict.fromkeys(range(1, 11), 10), now=NOW, sync=False)
    assert [len(r) for r in calls["read"]] == [3, 3, 3, 1]
    assert calls["settle"] == [3, 3, 3, 1]
    assert [buffer.written_offset(f) for f in range(1, 11)] == [2 * RECORD_SIZE] * 10


@pytest.mark.parametrize("batch_records", [1, 7, 8, 9])
def test_one_read_stops_once_its_blocks_reach_the_batch_bytes(
    buffer, feed_dir, monkeypatch, batch_records
):
    """8 records a feed: a read takes feeds until their blocks reach the bound, so a reply
    holds at most the bound plus one block, and always at least one feed (no commit stalls)."""
    monkeypatch.setattr(buffer_module, "BATCH_BYTES", batch_records * RECORD_SIZE)
    fill(buffer, 6, 8)
    calls = counted(buffer)
    buffer.commit(feed_dir, dict.fromkeys(range(1, 7), 10), now=NOW, block_records=8)
    block = 8 * RECORD_SIZE
    sizes = [sum(len(chunk) for _, _, chunk in reply) for reply in calls["read"]]
    assert all(0 < s <= batch_records * RECORD_SIZE + block for s in sizes), sizes
    assert sum(len(r) for r in calls["read"]) == 6  # each feed read once
    expected_per_read = -(-batch_records // 8)  # feeds until the bound is reached
    assert [len(r) for r in calls["read"]] == [expected_per_read] * (6 // expected_per_read) + (
        [6 % expected_per_read] if 6 % expected_per_read else []
    )
    assert buffer.redis.keys("feeds:buf:*") == []
    for f in range(1, 7):
        assert np.fromfile(feed_dir / f"{f}.dat", "<f4").tolist() == [f + i for i in range(8)]
