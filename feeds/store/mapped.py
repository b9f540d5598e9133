"""Files mapped once per process and kept: a feed's .dat and its summary levels.

Mapping a file afresh for every read made the kernel fault in every page the read touched,
again each time (a 10-year summarised read touches a few thousand scattered pages: ~3 ms of
faults for ~1 ms of work). A mapping kept here is faulted once; it stays valid while the file
keeps its inode, size, mtime and ctime (the key): a write, a growth or a replacement changes the
key, so the next read maps the file again and the old mapping is dropped. The pages are the
page cache's, shared by every process that maps them, not memory of ours.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict

import numpy as np

# Files kept mapped per process, least recently read dropped first. Each mapping holds a file
# descriptor (Python's mmap keeps one), so this also bounds the descriptors it holds.
MAX_MAPPINGS = 128

_lock = threading.Lock()
_maps: OrderedDict[tuple, np.ndarray] = OrderedDict()
_key_of: dict[str, tuple] = {}  # path -> its current key, so an old version is dropped at once


def file_array(path: str | os.PathLike, dtype: np.dtype) -> tuple[np.ndarray, os.stat_result]:
    """The file as a read-only array of `dtype` and the stat it was mapped at (opened first,
    then stat'ed, so the two are the same file even if it is replaced meanwhile); the cached
    mapping when the file has not changed since. FileNotFoundError when it is not there."""
    name = os.fspath(path)
    with open(name, "rb") as fh:
        st = os.fstat(fh.fileno())
        key = (name, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, np.dtype(dtype).str)
        with _lock:
            hit = _maps.get(key)
            if hit is not None:
                _maps.move_to_end(key)
                return hit, st
        count = st.st_size // np.dtype(dtype).itemsize
        if count == 0:
            return np.empty(0, dtype=dtype), st
        array = np.memmap(fh, dtype=dtype, mode="r", shape=(count,))
    with _lock:
        old = _key_of.pop(name, None)
        if old is not None:
            _maps.pop(old, None)
        _maps[key] = array
        _key_of[name] = key
        while len(_maps) > MAX_MAPPINGS:
            gone, _ = _maps.popitem(last=False)
            if _key_of.get(gone[0]) == gone:
                del _key_of[gone[0]]
    return array, st


def forget(path: str | os.PathLike) -> None:
    """Drop the mapping of a file (removed, or to be replaced)."""
    with _lock:
        key = _key_of.pop(os.fspath(path), None)
        if key is not None:
            _maps.pop(key, None)
