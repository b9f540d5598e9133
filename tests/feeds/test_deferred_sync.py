"""Writing without syncing: commits between syncs write the files but keep points in Redis.

A point may leave Redis only once its file is fsync'd. These tests check each way that could
go wrong: a rewrite of what is already written, an offset that outlives a reboot (page cache
lost), a failed fsync (Linux drops the failed pages), and the sync schedule.
"""

from __future__ import annotations

import errno
import os
import time

import numpy as np
import pytest

from feeds.store import phpfina, service
from feeds.store.buffer import RECORD_SIZE, FeedBuffer, LockLost

NOW = 2_000_000_000


@pytest.fixture(autouse=True)
def _no_backfill_bound(settings):
    # These tests write synthetic times (1970, 2001) and commit with a far later `now`: the
    # backfill bound (a new feed starts at most BMS_FEED_MAX_BACKFILL_DAYS before now) would
    # refuse them. It has its own tests in test_padding_bounds.py.
    settings.BMS_FEED_MAX_BACKFILL_DAYS = 100_000


def values(feed_dir, feed_id: int = 1) -> list[float]:
    return np.fromfile(feed_dir / f"{feed_id}.dat", "<f4").tolist()


def test_a_commit_without_sync_writes_the_file_and_keeps_the_points(buffer, feed_dir):
    buffer.add([(1, 1000, 1.0, False), (1, 1010, 2.0, False)])
    report = buffer.commit(feed_dir, {1: 10}, now=NOW, sync=False)
    assert (report.points, report.synced) == (2, False)
    assert values(feed_dir) == [1.0, 2.0]  # in the file (page cache) for readers of the files
    assert len(buffer.pending(1)) == 2  # but still in Redis: not yet on disk for certain
    assert buffer.written_offset(1) == 2 * RECORD_SIZE
    assert buffer.dirty_feeds() == [1]


def test_a_second_commit_without_sync_writes_only_the_new_points(buffer, feed_dir):
    buffer.add([(1, 1000, 1.0, False)])
    buffer.commit(feed_dir, {1: 10}, now=NOW, sync=False)
    # Overwrite the slot behind the buffer's back: a rewrite of the first point would undo it.
    phpfina.write_points(feed_dir, 1, 10, [1000], [99.0], now=NOW)
    buffer.add([(1, 1010, 2.0, False)])
    report = buffer.commit(feed_dir, {1: 10}, now=NOW, sync=False)
    assert report.points == 1
    assert values(feed_dir) == [99.0, 2.0]
    assert buffer.written_offset(1) == 2 * RECORD_SIZE


def test_a_sync_fsyncs_and_trims_what_earlier_commits_wrote(buffer, feed_dir, redis_client):
    buffer.add([(1, 1000 + 10 * i, float(i), False) for i in range(5)])
    buffer.commit(feed_dir, {1: 10}, now=NOW, sync=False)
    report = buffer.commit(feed_dir, {1: 10}, now=NOW, sync=True)
    assert (report.points, report.synced) == (0, True)  # nothing new to write, only to sync
    assert values(feed_dir) == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert buffer.dirty_feeds() == [] and len(buffer.pending(1)) == 0
    assert redis_client.hlen(buffer.written_key) == 0


def test_a_sync_after_new_points_writes_them_and_trims_everything(buffer, feed_dir):
    buffer.add([(1, 1000, 1.0, False)])
    buffer.commit(feed_dir, {1: 10}, now=NOW, sync=False)
    buffer.add([(1, 1010, 2.0, False), (2, 500, 7.0, False)])
    report = buffer.commit(feed_dir, {1: 10, 2: 60}, now=NOW, sync=True)
    assert report.points == 2
    assert values(feed_dir) == [1.0, 2.0] and values(feed_dir, 2) == [7.0]
    assert buffer.dirty_feeds() == []


def test_deferred_and_immediate_sync_write_the_same_bytes(redis_client, tmp_path):
    rows = [(f, 1000 + 10 * i, float(i % 13), i % 7 == 0) for f in (1, 2) for i in range(300)]
    files = {}
    for mode in ("immediate", "deferred"):
        redis_client.flushdb()
        directory = tmp_path / mode
        directory.mkdir()
        buffer = FeedBuffer(redis_client)
        for start in range(0, len(rows), 50):
            buffer.add(rows[start : start + 50])
            buffer.commit(directory, {1: 10, 2: 10}, now=NOW, sync=mode == "immediate")
        buffer.commit(directory, {1: 10, 2: 10}, now=NOW, sync=True)
        files[mode] = {p.name: p.read_bytes() for p in sorted(directory.iterdir())}
    assert files["immediate"] == files["deferred"]


def test_offsets_from_another_boot_are_discarded_and_the_points_written_again(
    buffer, feed_dir, redis_client
):
    buffer.add([(1, 1000, 1.0, False), (1, 1010, 2.0, False)])
    buffer.commit(feed_dir, {1: 10}, now=NOW, sync=False)
    # A power cut: the page cache never reached the disk (the file is empty again), and the
    # machine came back with a new boot id while Redis kept its AOF.
    (feed_dir / "1.dat").write_bytes(b"")
    redis_client.set(buffer.boot_key, "boot-before-the-power-cut")
    buffer.commit(feed_dir, {1: 10}, now=NOW, sync=True)
    assert values(feed_dir) == [1.0, 2.0]
    assert buffer.dirty_feeds() == []


def test_a_failed_fsync_keeps_the_points_and_forgets_the_offset(
    buffer, feed_dir, redis_client, monkeypatch
):
    buffer.add([(1, 1000, 1.0, False)])
    buffer.commit(feed_dir, {1: 10}, now=NOW, sync=False)

    def failing_fsync(fd: int) -> None:  # what a dying disk returns to fsync
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(phpfina.os, "fsync", failing_fsync)
    with pytest.raises(OSError):
        buffer.commit(feed_dir, {1: 10}, now=NOW, sync=True)
    assert len(buffer.pending(1)) == 1  # still in Redis
    assert buffer.written_offset(1) == 0  # and to be written again: the pages may be lost
    assert redis_client.get(buffer.lock_key) is None
    monkeypatch.undo()
    (feed_dir / "1.dat").write_bytes(b"")  # the lost page
    buffer.commit(feed_dir, {1: 10}, now=NOW, sync=True)
    assert values(feed_dir) == [1.0]
    assert buffer.dirty_feeds() == []


def test_a_commit_without_sync_that_lost_its_lock_marks_nothing(buffer, feed_dir):
    buffer.add([(1, 1000 + 10 * i, 1.0, False) for i in range(20)])

    def lock_stolen(feed_id, records):
        buffer.redis.set(buffer.lock_key, "another-commit")

    with pytest.raises(LockLost):
        buffer.commit(feed_dir, {1: 10}, now=NOW, sync=False, block_records=10,
                      after_write=lock_stolen)  # fmt: skip
    assert buffer.written_offset(1) == 10 * RECORD_SIZE  # the first block, marked before
    assert len(buffer.pending(1)) == 20


def test_sync_is_due_by_the_interval(buffer, feed_dir):
    assert buffer.sync_due(60)  # never synced
    assert buffer.sync_due(0)
    buffer.add([(1, 1000, 1.0, False)])
    buffer.commit(feed_dir, {1: 10}, now=NOW, sync=True)
    assert not buffer.sync_due(60)
    assert buffer.sync_due(60, now=time.time() + 61)
    assert buffer.sync_due(0)


@pytest.mark.django_db
def test_commit_all_syncs_once_per_sync_interval(settings, feed_dir, redis_client):
    from feeds.models import Feed

    feed = Feed.objects.create(name="t", interval=10)
    settings.BMS_FEED_SYNC_INTERVAL = 60
    buffer = service.get_buffer()
    buffer.add([(feed.pk, 1000, 1.0, False)])
    first = service.commit_all(now=NOW)
    assert first["synced"] is True and buffer.dirty_feeds() == []
    buffer.add([(feed.pk, 1010, 2.0, False)])
    second = service.commit_all(now=NOW)
    assert (second["synced"], second["points"]) == (False, 1)
    assert values(feed_dir, feed.pk) == [1.0, 2.0]
    assert buffer.dirty_feeds() == [feed.pk]  # waits in Redis for the next sync
    assert service.commit_all(now=NOW, sync=True)["synced"] is True
    assert buffer.dirty_feeds() == []
