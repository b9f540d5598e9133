"""Per-thread scratch buffers for reading a feed's slots, reused from read to read.

A read used to allocate float64 temporaries the size of the slots it reduced; glibc maps
blocks that large afresh and the kernel zeroes every page on first touch, so a gunicorn worker
took 39,000 minor page faults for one 10-year read (about 60 % of its time, issue #29). Reads
now copy each chunk of slots into these buffers instead: memory follows the chunk size
(phpfina.READ_CHUNK_SLOTS), paid once per thread, never the range asked.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

_local = threading.local()


@dataclass
class Buffers:
    values: np.ndarray  # float64: the slots, NaN zeroed for sums (exact: a float32 in float64)
    marks: np.ndarray  # bool: which slots are NaN
    index: np.ndarray  # int32: slot indices (the last recorded slot) or counts
    arange: np.ndarray  # int32: 0, 1, 2, ... (read-only by convention)

    @property
    def size(self) -> int:
        return len(self.values)


def buffers(n: int) -> Buffers:
    """This thread's buffers, at least n + 1 elements each (one spare for reduceat's end)."""
    have: Buffers | None = getattr(_local, "buffers", None)
    if have is None or have.size < n + 1:
        size = max(n + 1, 2 * have.size if have is not None else 0)
        have = Buffers(
            values=np.empty(size, dtype=np.float64),
            marks=np.empty(size, dtype=bool),
            index=np.empty(size, dtype=np.int32),
            arange=np.arange(size, dtype=np.int32),
        )
        _local.buffers = have
    return have
