"""Property tests of the PHPFina engine (feeds/store/phpfina.py), on real files in a temp directory.

Writes: any block of (time, value, join) is split into written and refused points, nothing
raised; every accepted point reads back as its float32 (last arrival wins per slot), and the
files stay well-formed (16-byte meta, whole floats). Reads: any start/end/interval/flags give
points or a documented FeedError (BadReadRequest, TooManyPoints), never another exception.
"""

from __future__ import annotations

import math
import tempfile
from collections import Counter

import numpy as np
from hypothesis import given, note
from hypothesis import strategies as st

from feeds.store import phpfina
from tests.fuzz.profiles import FUZZ

NOW = 1_750_000_000
BASE = NOW - 86_400
intervals = st.sampled_from([1, 5, 10, 60, 3600])
# Mostly near BASE (so points land in the file), with far-off and out-of-range times mixed in.
times = st.one_of(
    st.integers(BASE - 600, BASE + 7200),
    st.integers(-(2**40), 2**40),
    st.sampled_from([0, -1, 2**32 - 1, 2**32, NOW + 3599, NOW + 3601]),
)
values = st.one_of(
    st.floats(width=32, allow_nan=False, allow_infinity=False),
    st.floats(),  # NaN, inf, beyond float32
)
points = st.lists(st.tuples(times, values, st.booleans()), max_size=40)


def _always_refused(t: int, v: float) -> bool:
    with np.errstate(over="ignore"):
        as_f32 = np.float32(v) if math.isfinite(v) else np.float32("nan")
    return not np.isfinite(as_f32) or not 0 <= t <= 0xFFFFFFFF or t > NOW + phpfina.MAX_FUTURE_S


def _expected(interval: int, start_time: int, accepted: list[tuple[int, float]]) -> dict:
    out: dict[int, np.float32] = {}
    for t, v in accepted:  # arrival order: the last one for a slot wins
        out[(t - start_time) // interval] = np.float32(v)
    return out


@FUZZ
@given(intervals, st.lists(points, min_size=1, max_size=3))
def test_writes_account_for_every_point_and_read_back(interval, blocks):
    note(f"interval={interval} blocks={blocks}")
    with tempfile.TemporaryDirectory() as directory:
        accepted: list[tuple[int, float]] = []
        for block in blocks:
            t, v, j = zip(*block, strict=True) if block else ((), (), ())
            report = phpfina.write_points(directory, 1, interval, t, v, j, now=NOW, fsync=False)
            refused = Counter(r[0] for r in report.refused)
            assert sum(refused.values()) <= len(block)
            meta = phpfina.read_meta(directory, 1)
            # Points the engine must refuse whatever the file holds consume their time first.
            for pt, pv, _ in block:
                if _always_refused(pt, pv):
                    assert refused[pt] > 0, f"t={pt} v={pv} was not refused"
                    refused[pt] -= 1
            # What is left was refused for its slot: before start_time (reported per point) or
            # past the padding limit (reported once per slot, with the time of the point that
            # won the slot), so a refusal covers every point of that slot.
            lost_slots = set()
            if meta is not None:
                lost_slots = {
                    (t - meta.start_time) // meta.interval for t, n in refused.items() if n > 0
                }
            for pt, pv, _ in block:
                if _always_refused(pt, pv):
                    continue
                assert meta is not None
                if pt < meta.start_time or (pt - meta.start_time) // meta.interval in lost_slots:
                    continue
                accepted.append((pt, pv))
        meta = phpfina.read_meta(directory, 1)
        if meta is None:
            assert not accepted
            return
        data = np.array(phpfina.open_data(directory, 1))
        assert (phpfina.meta_path(directory, 1).stat().st_size) == phpfina.META_SIZE
        for slot, value in _expected(meta.interval, meta.start_time, accepted).items():
            assert data[slot] == value, (slot, data[slot], value)


@FUZZ
@given(
    intervals,
    st.lists(st.tuples(st.integers(BASE, BASE + 3600), st.floats(-1e6, 1e6)), max_size=30),
    st.integers(-(2**33), 2**33),
    st.integers(-(2**33), 2**33),
    st.one_of(
        st.integers(-5, 10**7), st.sampled_from(["daily", "weekly", "monthly", "hourly", ""])
    ),
    st.booleans(),
    st.booleans(),
    st.booleans(),
    st.sampled_from(["UTC", "Europe/London", "America/St_Johns", "Nowhere/City", "Europe"]),
    st.booleans(),
)
def test_reads_return_points_or_a_documented_error(
    interval, pts, start, end, read_interval, average, delta, skipmissing, tz, with_overlay
):
    with tempfile.TemporaryDirectory() as directory:
        if pts:
            t, v = zip(*pts, strict=True)
            phpfina.write_points(directory, 1, interval, t, v, now=NOW, fsync=False)
        overlay = None
        if with_overlay:
            overlay = (np.array([BASE + 4000, BASE + 10]), np.array([1.5, 2.5]))
        try:
            result = phpfina.read(
                directory, 1, start, end, read_interval, average=average, delta=delta,
                skipmissing=skipmissing, timezone=tz, max_points=5000, feed_interval=interval,
                overlay=overlay,
            )  # fmt: skip
        except (phpfina.BadReadRequest, phpfina.TooManyPoints):
            return
        assert len(result) <= 5000 + 2
        for t_ms, value in result:
            assert isinstance(t_ms, int)
            assert value is None or math.isfinite(value)


@FUZZ
@given(st.binary(max_size=40), st.binary(max_size=64))
def test_corrupt_files_are_reported_as_corrupt(meta_bytes, dat_bytes):
    with tempfile.TemporaryDirectory() as directory:
        phpfina.meta_path(directory, 7).write_bytes(meta_bytes)
        phpfina.dat_path(directory, 7).write_bytes(dat_bytes)
        try:
            meta = phpfina.check_files(
                phpfina.meta_path(directory, 7), phpfina.dat_path(directory, 7)
            )
        except phpfina.CorruptFeed:
            assert len(meta_bytes) != 16 or len(dat_bytes) % 4 or meta_bytes[8:12] == b"\0" * 4
            return
        assert meta.interval >= 1
        # A valid pair reads without error over its whole span.
        end = meta.start_time + meta.interval * (len(dat_bytes) // 4)
        try:
            phpfina.read(directory, 7, meta.start_time, end, meta.interval, max_points=100)
        except phpfina.TooManyPoints:
            pass
