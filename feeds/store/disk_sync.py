"""Making a commit's writes durable before its points leave Redis: an fsync per feed file, or
one `syncfs` of the feed directory's filesystem per batch of feeds.

A commit that syncs writes a batch of up to BATCH_FEEDS files (feeds/store/buffer.py), and only
then trims their points from Redis. An fsync commits ext4's journal each time: 10,000 appends
fsync'd one by one cost the machine 1.2-1.5 CPU-seconds, one `syncfs` after them 0.22 (a
standalone check); a commit of 10,000 feeds, writes included, 2.7 against 1.1
(docs/BENCHMARKS.md). `syncfs` writes every dirty page and inode of the filesystem and commits
the journal once, so a file written before it is on disk when it returns, as after its own
fsync.

Errors. Linux reports a writeback error to `syncfs` since 5.8 (before, it returns 0 whatever
happened: there `filesystem` falls back to an fsync a file). It reports an error to a
descriptor if the error happened after the descriptor was opened, or was not yet reported to
anyone. So the directory is opened before the commit's first write, and:
- a failed sync forgets the written offsets of every feed of every shard (the buffer's
  `_durable`), not only the batch's: the error is the filesystem's, and once reported it is
  not reported again to a descriptor opened later, so pages of another feed (written by an
  earlier commit without sync) or of another shard on the same filesystem may be the lost
  ones. The next commits write every record still in Redis again.
- a feed file on another filesystem than its directory (a symlinked .dat) gets its own fsync.
Left open: another program's `syncfs` of the same filesystem (`sync -f`) can take the report of
an error in pages written before a commit began; with `file`, only an fsync of that file can.

The cost: `syncfs` also writes out what other programs left dirty on the same filesystem (a
database's files, logs), so on a disk shared with busy writers one sync can take longer. Such a
site, or one whose feed directory is on a stacked filesystem (overlayfs without a volume, where
the lower filesystem's errors may not reach the overlay's `syncfs`), sets BMS_FEED_SYNC_BY=file
(docs/FEEDS.md). Where the C library has no `syncfs` (not Linux), `filesystem` falls back to an
fsync per file.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import re
from collections.abc import Callable

from feeds.store import phpfina

BY_FILE = "file"
BY_FILESYSTEM = "filesystem"
MODES = (BY_FILE, BY_FILESYSTEM)


class SyncFailed(OSError):
    """A sync failed: `feeds`' writes since their last sync may be lost, and with
    `whole_filesystem` any feed's on that filesystem (module docstring)."""

    def __init__(self, feeds: list[int], cause: OSError, whole_filesystem: bool = False) -> None:
        super().__init__(cause.errno, f"sync of {len(feeds)} feed file(s) failed: {cause}")
        self.feeds = feeds
        self.whole_filesystem = whole_filesystem


def _load_syncfs() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name, use_errno=True)
        call = libc.syncfs
    except (OSError, AttributeError):  # no C library by that name, or no syncfs in it
        return None
    call.argtypes = [ctypes.c_int]
    call.restype = ctypes.c_int
    return call


_syncfs = _load_syncfs()


def _reports_writeback_errors(release: str) -> bool:
    """Whether this kernel's syncfs reports writeback errors (Linux 5.8 and later)."""
    found = re.match(r"(\d+)\.(\d+)", release)
    return found is not None and (int(found[1]), int(found[2])) >= (5, 8)


def syncfs_available() -> bool:
    return _syncfs is not None and _reports_writeback_errors(os.uname().release)


class PerFile:
    """An fsync of each feed's .dat as soon as it is written (`written`); `sync` has nothing
    left to do."""

    def __init__(self, directory: str | os.PathLike) -> None:
        self.directory = directory

    def written(self, feed_id: int) -> None:
        try:
            phpfina.sync_data(self.directory, feed_id)
        except OSError as exc:
            raise SyncFailed([feed_id], exc) from exc

    def sync(self) -> None:
        return None

    def close(self) -> None:
        return None


class WholeFilesystem:
    """The feeds written since the last `sync`, made durable together by one `syncfs` of the
    directory's filesystem. Open it before the first write it is to cover (see the module
    docstring: errors are reported against the descriptor opened here)."""

    def __init__(self, directory: str | os.PathLike) -> None:
        if _syncfs is None:
            raise OSError(errno.ENOSYS, "syncfs is not available here")
        os.makedirs(directory, exist_ok=True)  # as the first write would (phpfina.create)
        self.directory = directory
        self.fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        self.device = os.fstat(self.fd).st_dev
        self.pending: list[int] = []

    def written(self, feed_id: int) -> None:
        try:
            device = os.stat(phpfina.dat_path(self.directory, feed_id)).st_dev
        except FileNotFoundError:
            return  # deleted since: nothing of it to keep
        if device == self.device:
            self.pending.append(feed_id)
        else:  # a .dat on another filesystem (symlinked): the directory's syncfs misses it
            PerFile(self.directory).written(feed_id)

    def sync(self) -> None:
        if not self.pending:
            return
        feeds, self.pending = self.pending, []
        if _syncfs(self.fd) != 0:
            code = ctypes.get_errno()
            raise SyncFailed(feeds, OSError(code, os.strerror(code)), whole_filesystem=True)

    def close(self) -> None:
        os.close(self.fd)


def opener(mode: str) -> Callable[[str | os.PathLike], PerFile | WholeFilesystem]:
    """What a commit syncs with, for BMS_FEED_SYNC_BY's value."""
    if mode not in MODES:
        raise ValueError(f"unknown sync mode {mode!r}: one of {', '.join(MODES)}")
    if mode == BY_FILESYSTEM and syncfs_available():
        return WholeFilesystem
    return PerFile
