"""A feed's last value read from its PHPFina file, for when Redis has none.

Redis holds the newest point of each feed written since Redis last started (feeds/store/buffer.py's
`last` hash). An imported feed, or any feed after Redis lost its data, has none there; emoncms
then reads the engine's last value (feed_model.php get_timevalue -> PHPFina lastvalue) and so
do we, so a kWh total continues from the file instead of starting again from zero. No Django.
"""

from __future__ import annotations

import os

import numpy as np

from feeds.store import (
    phpfina,  # How far back from the end of a file we look for a value that is not a gap (NaN): 64 Ki
)

# slots, 256 KiB read at most; a feed silent for longer than that has no usable last value.
MAX_SCAN_SLOTS = 65_536


def file_last_value(directory: str | os.PathLike, feed_id: int) -> tuple[int, float] | None:
    """(slot time, value) of the newest finite value in the file, or None."""
    try:
        meta, data = phpfina.open_feed(directory, feed_id)
    except phpfina.FeedError:
        return None  # a corrupt file has no trustworthy last value; reads report it
    if meta is None or len(data) == 0:
        return None
    lo = max(0, len(data) - MAX_SCAN_SLOTS)
    tail = data[lo:]
    finite = np.flatnonzero(np.isfinite(tail))
    if finite.size == 0:
        return None
    j = int(finite[-1])
    return meta.start_time + (lo + j) * meta.interval, float(tail[j])
