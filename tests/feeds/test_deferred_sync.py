"""Writing without syncing: commits between syncs write the files but keep points in Redis.

A point may leave Redis only once its file is fsync'd. These tests check each way that could
go wrong: a rewrite of what is already written, an offset that outlives a reboot (page cache
lost), a failed fsync or syncfs (Linux drops the failed pages), and the sync schedule.
"""

from __future__ import annotations

import ctypes
import errno
import os
import time
from pathlib import Path

import numpy as np
import pytest

from feeds.store import buffer as buffer_module
from feeds.store import disk_sync, phpfina, service
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


def _fail_fsync(monkeypatch) -> None:
    def failing_fsync(fd: int) -> None:  # what a dying disk returns to fsync
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(phpfina.os, "fsync", failing_fsync)


def _fail_syncfs(monkeypatch) -> None:
    def failing_syncfs(fd: int) -> int:  # what a dying disk returns to syncfs, as libc does
        ctypes.set_errno(errno.EIO)
        return -1

    monkeypatch.setattr(disk_sync, "_syncfs", failing_syncfs)


@pytest.mark.parametrize(
    "sync_by, fail",
    [(disk_sync.BY_FILE, _fail_fsync), (disk_sync.BY_FILESYSTEM, _fail_syncfs)],
)
def test_a_failed_sync_keeps_the_points_and_forgets_the_offset(
    buffer, feed_dir, redis_client, monkeypatch, sync_by, fail
):
    buffer.sync_by = sync_by
    buffer.add([(1, 1000, 1.0, False), (2, 1000, 5.0, False)])
    buffer.commit(feed_dir, {1: 10, 2: 10}, now=NOW, sync=False)
    fail(monkeypatch)
    with pytest.raises(OSError, match="Input/output error"):
        buffer.commit(feed_dir, {1: 10, 2: 10}, now=NOW, sync=True)
    assert len(buffer.pending(1)) == 1  # still in Redis
    assert buffer.written_offset(1) == 0  # and to be written again: the pages may be lost
    assert redis_client.get(buffer.lock_key) is None
    # The other feed: a sync of the filesystem failed for the whole batch; an fsync stopped
    # the commit at the first feed, so the second was neither synced nor trimmed either.
    assert len(buffer.pending(2)) == 1
    assert buffer.written_offset(2) == (0 if sync_by == disk_sync.BY_FILESYSTEM else RECORD_SIZE)
    monkeypatch.undo()
    (feed_dir / "1.dat").write_bytes(b"")  # the lost page
    buffer.commit(feed_dir, {1: 10, 2: 10}, now=NOW, sync=True)
    assert values(feed_dir) == [1.0]
    assert values(feed_dir, 2) == [5.0]
    assert buffer.dirty_feeds() == []


def test_a_filesystem_sync_is_one_syncfs_a_batch_and_no_fsync(buffer, feed_dir, monkeypatch):
    fsyncs, syncfs_calls = [], []
    real_syncfs = disk_sync._syncfs
    monkeypatch.setattr(phpfina.os, "fsync", fsyncs.append)

    def counted_syncfs(fd: int) -> int:
        syncfs_calls.append(fd)
        return real_syncfs(fd)  # the real call: the test also proves it works here

    monkeypatch.setattr(disk_sync, "_syncfs", counted_syncfs)
    monkeypatch.setattr(buffer_module, "BATCH_FEEDS", 3)
    feeds = range(1, 8)  # 7 feeds: batches of 3, 3 and 1
    buffer.add([(f, 1000, float(f), False) for f in feeds])
    buffer.commit(feed_dir, dict.fromkeys(feeds, 10), now=NOW, sync=True)
    # Creating a feed's files fsyncs them and their directory (phpfina, once per feed); each
    # commit after that appends to them:
    fsyncs.clear()
    syncfs_calls.clear()
    buffer.add([(f, 1010, float(f) + 0.5, False) for f in feeds])
    report = buffer.commit(feed_dir, dict.fromkeys(feeds, 10), now=NOW, sync=True)
    assert (report.points, report.synced) == (7, True)
    assert len(syncfs_calls) == 3 and fsyncs == []
    assert [values(feed_dir, f) for f in feeds] == [[float(f), f + 0.5] for f in feeds]
    assert buffer.dirty_feeds() == []


def test_the_sync_mode_comes_from_the_settings(settings):
    settings.BMS_FEED_SYNC_BY = disk_sync.BY_FILE
    assert service.get_buffer().sync_by == "file"
    settings.BMS_FEED_SYNC_BY = disk_sync.BY_FILESYSTEM
    assert service.get_buffer().sync_by == "filesystem"
    with pytest.raises(ValueError, match="unknown sync mode 'sometimes'"):
        disk_sync.opener("sometimes")


def test_the_sync_mode_setting_refuses_an_unknown_value(monkeypatch):
    from django.core.exceptions import ImproperlyConfigured

    from core.env import env_choice

    monkeypatch.setenv("BMS_FEED_SYNC_BY", "Filesystem ")
    assert env_choice("BMS_FEED_SYNC_BY", "file", disk_sync.MODES) == "filesystem"
    monkeypatch.setenv("BMS_FEED_SYNC_BY", "never")
    with pytest.raises(ImproperlyConfigured, match="BMS_FEED_SYNC_BY='never' is not one of"):
        env_choice("BMS_FEED_SYNC_BY", "file", disk_sync.MODES)


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


def test_a_filesystem_sync_into_a_directory_not_made_yet(buffer, tmp_path):
    directory = tmp_path / "shard-3"  # a new shard's directory: its first commit makes it
    buffer.add([(1, 1000, 1.0, False)])
    report = buffer.commit(directory, {1: 10}, now=NOW, sync=True)
    assert (report.points, report.synced) == (1, True)
    assert values(directory) == [1.0]


def test_a_failed_syncfs_forgets_every_shards_written_offsets(redis_client, tmp_path, monkeypatch):
    """The error a syncfs reports is the filesystem's, reported once: the pages lost may be
    another shard's (the shards' directories share the filesystem by default), whose own next
    syncfs would then not hear of it. So every shard writes what Redis holds again."""
    shard0 = FeedBuffer(redis_client, shard=0, shards=2)
    shard1 = FeedBuffer(redis_client, shard=1, shards=2)
    shard0.add([(2, 1000, 2.0, False), (1, 1000, 1.0, False)])  # feed 2: shard 0; feed 1: shard 1
    shard0.commit(tmp_path / "shard-0", {2: 10}, now=NOW, sync=False)
    shard1.commit(tmp_path / "shard-1", {1: 10}, now=NOW, sync=False)
    assert shard1.written_offset(1) == RECORD_SIZE
    _fail_syncfs(monkeypatch)
    with pytest.raises(disk_sync.SyncFailed) as failed:
        shard0.commit(tmp_path / "shard-0", {2: 10}, now=NOW, sync=True)
    assert failed.value.whole_filesystem
    assert shard0.written_offset(2) == 0 and shard1.written_offset(1) == 0
    assert len(shard1.pending(1)) == 1 and len(shard0.pending(2)) == 1
    monkeypatch.undo()
    shard1.commit(tmp_path / "shard-1", {1: 10}, now=NOW, sync=True)
    assert values(tmp_path / "shard-1") == [1.0]


@pytest.mark.parametrize(
    "release, reports",
    [("6.18.0-1-amd64", True), ("5.8.0", True), ("5.10.0-28", True), ("5.4.0-150-generic", False),
     ("4.18.0-553.el8_10.x86_64", False), ("unknown", False)],
)  # fmt: skip
def test_syncfs_is_trusted_only_where_it_reports_writeback_errors(release, reports):
    assert disk_sync._reports_writeback_errors(release) is reports


def test_a_kernel_without_syncfs_errors_gets_an_fsync_a_file(monkeypatch):
    monkeypatch.setattr(
        disk_sync.os, "uname", lambda: os.uname_result(("Linux", "h", "5.4.0", "", "x"))
    )
    assert disk_sync.opener(disk_sync.BY_FILESYSTEM) is disk_sync.PerFile


def test_a_feed_file_on_another_filesystem_gets_its_own_fsync(buffer, feed_dir, monkeypatch):
    elsewhere = Path("/dev/shm")
    if not elsewhere.is_dir() or elsewhere.stat().st_dev == feed_dir.stat().st_dev:
        pytest.skip("no second filesystem (/dev/shm) to put a feed file on")
    buffer.add([(1, 1000, 1.0, False), (2, 1000, 2.0, False)])
    buffer.commit(feed_dir, {1: 10, 2: 10}, now=NOW, sync=True)
    moved = elsewhere / f"bms-test-{os.getpid()}-1.dat"
    try:
        moved.write_bytes((feed_dir / "1.dat").read_bytes())
        (feed_dir / "1.dat").unlink()
        (feed_dir / "1.dat").symlink_to(moved)
        fsynced = []
        real_fsync = os.fsync
        monkeypatch.setattr(phpfina.os, "fsync", lambda fd: (fsynced.append(fd), real_fsync(fd)))
        buffer.add([(1, 1010, 1.5, False), (2, 1010, 2.5, False)])
        buffer.commit(feed_dir, {1: 10, 2: 10}, now=NOW, sync=True)
        assert len(fsynced) == 1  # feed 1's file, elsewhere; feed 2's by the directory's syncfs
        assert np.fromfile(moved, "<f4").tolist() == [1.0, 1.5]
    finally:
        moved.unlink(missing_ok=True)
