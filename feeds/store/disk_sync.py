"""Making a commit's writes durable before its points leave Redis: an fsync per feed file, or
one `syncfs` of the feed directory's filesystem per batch of feeds.

A commit that syncs writes a batch of up to BATCH_FEEDS files (feeds/store/buffer.py), and only
then trims their points from Redis. An fsync per file costs the machine about 0.12-0.15 ms of
CPU a file, most of it ext4's journal commit that each fsync forces (10,000 files: 1.2-1.5
CPU-seconds, against 0.22 for the same writes and one syncfs; docs/BENCHMARKS.md): at 50,000
feeds that was a third of a core for half of every minute. `syncfs` writes every dirty page and
inode of the filesystem and commits the journal once, so a file written before it is on disk
when it returns, as after its own fsync.

Errors: Linux reports a writeback error to `syncfs` (since 5.8) if it happened after the
descriptor it is given was opened, or was not yet reported to anyone. The directory is
therefore opened before the batch's first write, and a failed sync is taken to have lost every
file of the batch: their written offsets are forgotten, so the next commit writes them again
(the pages may be gone, as after a failed fsync).

The cost: `syncfs` also writes out what other programs left dirty on the same filesystem (a
database's files, logs), so on a disk shared with busy writers one sync can take longer. Such a
site sets BMS_FEED_SYNC_BY=file (docs/FEEDS.md). Where the C library has no `syncfs` (not
Linux), `filesystem` falls back to an fsync per file.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
from collections.abc import Callable

from feeds.store import phpfina

BY_FILE = "file"
BY_FILESYSTEM = "filesystem"
MODES = (BY_FILE, BY_FILESYSTEM)


class SyncFailed(OSError):
    """A sync failed: `feeds`' writes since their last sync may be lost."""

    def __init__(self, feeds: list[int], cause: OSError) -> None:
        super().__init__(cause.errno, f"sync of {len(feeds)} feed file(s) failed: {cause}")
        self.feeds = feeds


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


def syncfs_available() -> bool:
    return _syncfs is not None


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
        self.fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        self.pending: list[int] = []

    def written(self, feed_id: int) -> None:
        self.pending.append(feed_id)

    def sync(self) -> None:
        if not self.pending:
            return
        feeds, self.pending = self.pending, []
        if _syncfs(self.fd) != 0:
            code = ctypes.get_errno()
            raise SyncFailed(feeds, OSError(code, os.strerror(code)))

    def close(self) -> None:
        os.close(self.fd)


def opener(mode: str) -> Callable[[str | os.PathLike], PerFile | WholeFilesystem]:
    """What a commit syncs with, for BMS_FEED_SYNC_BY's value."""
    if mode not in MODES:
        raise ValueError(f"unknown sync mode {mode!r}: one of {', '.join(MODES)}")
    if mode == BY_FILESYSTEM and syncfs_available():
        return WholeFilesystem
    return PerFile
