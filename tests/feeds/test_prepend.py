"""Late points before a feed's start_time: the pair is rebuilt with an earlier start (up to
MAX_PREPEND_S back: 5 years, at most emoncms's 15,768,000 padding slots), byte for byte PHPFina, and neither a crash nor a concurrent read ever pairs
a meta with the wrong .dat.

Bytes: 1.0f = 00 00 80 3f, 2.0f = 00 00 00 40, 3.0f = 00 00 40 40, quiet NaN = 00 00 c0 7f.
"""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest

from feeds.store import phpfina
from feeds.store.buffer import FeedBuffer

NOW = 2_000_000_000
ONE, TWO, THREE = (bytes.fromhex(h) for h in ("0000803f", "00000040", "00004040"))
NAN = bytes.fromhex("0000c07f")
START = 400_000_000  # far enough from 0 that MAX_PREPEND_S (5 years) before it is a valid time


def files(d, feed_id=1) -> tuple[bytes, bytes]:
    return (d / f"{feed_id}.meta").read_bytes(), (d / f"{feed_id}.dat").read_bytes()


def test_a_late_point_is_prepended_byte_for_byte(tmp_path):
    phpfina.write_points(tmp_path, 1, 10, [1000, 1010], [1.0, 2.0], now=NOW)
    # 975 is in the slot that starts at 970: three slots before 1000, two of them NaN
    phpfina.write(tmp_path, 1, 10, 975, 3.0, now=NOW)
    meta, dat = files(tmp_path)
    # uint32 0, 0, interval 10 = 0x0a, start 970 = 0x03ca
    assert meta == bytes.fromhex("00000000000000000a000000ca030000")
    assert dat == THREE + NAN + NAN + ONE + TWO
    assert sorted(p.name for p in tmp_path.iterdir()) == ["1.dat", "1.meta"]


def test_a_point_beyond_the_bound_is_refused_and_the_bound_itself_kept(tmp_path):
    phpfina.write(tmp_path, 1, 10, START, 1.0, now=NOW)
    with pytest.raises(phpfina.TimestampBeforeStart):
        phpfina.write(tmp_path, 1, 10, START - phpfina.MAX_PREPEND_S - 1, 2.0, now=NOW)
    assert files(tmp_path) == (phpfina.pack_meta(10, START), ONE)
    phpfina.write(tmp_path, 1, 10, START - phpfina.MAX_PREPEND_S, 2.0, now=NOW)
    slots = phpfina.max_prepend_slots(10)
    assert slots == phpfina.MAX_PADDING_SLOTS  # 5 years of 10 s slots: emoncms's padding bound
    meta, dat = files(tmp_path)
    assert meta == phpfina.pack_meta(10, START - phpfina.MAX_PREPEND_S)
    assert dat == TWO + NAN * (slots - 1) + ONE


def test_a_block_mixing_late_too_early_and_new_points(tmp_path):
    phpfina.write(tmp_path, 1, 10, START, 1.0, now=NOW)
    too_early = START - phpfina.MAX_PREPEND_S - 10
    report = phpfina.write_points(
        tmp_path, 1, 10, [too_early, START - 20, START + 10], [9.0, 3.0, 2.0], now=NOW
    )
    assert report.written == 2 and report.refused == [(too_early, phpfina.BEFORE_START)]
    assert files(tmp_path) == (phpfina.pack_meta(10, START - 20), THREE + NAN + ONE + TWO)


def test_data_after_the_prepend_is_unchanged_at_its_times(tmp_path):
    rng = np.random.default_rng(3)
    t = START + 10 * np.arange(5000)
    v = rng.normal(20, 5, len(t))
    v[rng.random(len(t)) < 0.1] = np.nan  # some gaps, refused as values: NaN slots stay NaN
    phpfina.write_points(tmp_path, 1, 10, t, v, now=NOW)
    before = phpfina.read(tmp_path, 1, START, START + 50_000, 10)
    averaged = phpfina.read(tmp_path, 1, START, START + 50_000, 600, average=True)
    phpfina.write(tmp_path, 1, 10, START - 86_400, 7.0, now=NOW)
    assert phpfina.read_meta(tmp_path, 1).start_time == START - 86_400
    assert phpfina.read(tmp_path, 1, START, START + 50_000, 10) == before
    # averages are summed in float32 along a path that depends on where the file starts
    after = phpfina.read(tmp_path, 1, START, START + 50_000, 600, average=True)
    assert [p[0] for p in after] == [p[0] for p in averaged]
    nan = float("nan")
    got = [nan if p[1] is None else p[1] for p in after]
    want = [nan if p[1] is None else p[1] for p in averaged]
    assert got == pytest.approx(want, rel=1e-6, nan_ok=True)
    assert phpfina.read(tmp_path, 1, START - 86_400, START - 86_400, 10) == [
        [(START - 86_400) * 1000, 7.0]
    ]


def test_buffered_late_points_read_the_same_before_and_after_the_commit(
    buffer: FeedBuffer, feed_dir
):
    phpfina.write_points(feed_dir, 1, 10, [START, START + 10], [1.0, 2.0], now=NOW)
    buffer.add([(1, START - 30, 3.0, False), (1, START + 20, 4.0, False)])

    def read():
        pending = buffer.pending(1)
        overlay = (pending["t"].astype(np.int64), pending["v"].astype(np.float64))
        return phpfina.read(feed_dir, 1, START - 60, START + 30, 10, overlay=overlay)

    before = read()
    assert [v for _t, v in before] == [None, None, None, 3.0, None, None, 1.0, 2.0, 4.0, None]
    buffer.commit(feed_dir, {1: 10}, now=NOW)
    assert read() == before


def test_committing_the_same_late_records_again_writes_the_same_bytes(buffer, feed_dir):
    """Idempotence under redelivery or a crash before the trim: the records come again."""
    later = [(1, START + 10 * i, float(i), False) for i in range(100)]
    late = [(1, START - 600 + 10 * i, 100.0 + i, i % 7 == 0) for i in range(60)]
    buffer.add(later)
    buffer.commit(feed_dir, {1: 10}, now=NOW)
    buffer.add(late)
    buffer.commit(feed_dir, {1: 10}, now=NOW)
    once = files(feed_dir)
    assert once[0] == phpfina.pack_meta(10, START - 600)
    buffer.add(late + later)  # both batches redelivered
    buffer.commit(feed_dir, {1: 10}, now=NOW)
    assert files(feed_dir) == once
    data = np.frombuffer(once[1], "<f4")
    assert data.tolist() == [100.0 + i for i in range(60)] + [float(i) for i in range(100)]


# --- crash consistency --------------------------------------------------------------------


def half_built(d, new_start: int, new_dat: bytes) -> None:
    (d / "1.dat.tmp").write_bytes(new_dat)
    (d / "1.meta.tmp").write_bytes(phpfina.pack_meta(10, new_start))


def test_a_crash_before_the_switch_leaves_the_old_pair_and_the_next_write_cleans_up(tmp_path):
    phpfina.write(tmp_path, 1, 10, 1000, 1.0, now=NOW)
    half_built(tmp_path, 980, NAN + NAN)  # dat.tmp cut short by the crash
    meta, data = phpfina.open_feed(tmp_path, 1)
    assert meta == phpfina.Meta(10, 1000) and data.tolist() == [1.0]
    phpfina.write(tmp_path, 1, 10, 980, 2.0, now=NOW)  # the commit runs again
    assert files(tmp_path) == (phpfina.pack_meta(10, 980), TWO + NAN + ONE)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["1.dat", "1.meta"]


def test_a_crash_between_the_renames_is_read_right_and_finished_by_the_next_write(tmp_path):
    phpfina.write(tmp_path, 1, 10, 1000, 1.0, now=NOW)
    # the state after the .dat rename: new .dat, old .meta, new meta still in .meta.tmp
    (tmp_path / "1.dat").write_bytes(NAN + NAN + ONE)
    (tmp_path / "1.meta.tmp").write_bytes(phpfina.pack_meta(10, 980))
    meta, data = phpfina.open_feed(tmp_path, 1)
    assert meta == phpfina.Meta(10, 980)
    assert phpfina.read(tmp_path, 1, 1000, 1000, 10) == [[1_000_000, 1.0]]
    phpfina.write(tmp_path, 1, 10, 990, 2.0, now=NOW)
    assert files(tmp_path) == (phpfina.pack_meta(10, 980), NAN + TWO + ONE)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["1.dat", "1.meta"]


def test_a_stale_meta_tmp_older_than_the_data_is_ignored_and_removed(tmp_path):
    """The engine before prepends wrote its metas through <id>.meta.tmp too: a leftover of
    that, older than the .dat, must not be taken for a half-done switch."""
    (tmp_path / "1.meta.tmp").write_bytes(phpfina.pack_meta(10, 0))
    os.utime(tmp_path / "1.meta.tmp", ns=(1_000_000_000, 1_000_000_000))
    phpfina.write_points(tmp_path, 1, 10, [1000], [1.0], now=NOW)
    (tmp_path / "1.meta.tmp").write_bytes(phpfina.pack_meta(10, 0))  # left again, and old
    os.utime(tmp_path / "1.meta.tmp", ns=(1_000_000_000, 1_000_000_000))
    assert phpfina.open_feed(tmp_path, 1)[0] == phpfina.Meta(10, 1000)
    phpfina.write(tmp_path, 1, 10, 1010, 2.0, now=NOW)
    assert files(tmp_path) == (phpfina.pack_meta(10, 1000), ONE + TWO)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["1.dat", "1.meta"]


# --- a read racing a rebuild --------------------------------------------------------------


def test_reads_racing_rebuilds_always_see_a_matching_pair(tmp_path):
    """Each slot holds its own time's code, so a .dat paired with the wrong meta shows at once
    as values shifted by the prepended slots."""
    base = START

    def code(t):
        return (np.asarray(t, dtype=np.int64) - (base - 10_000_000)) / 10

    t = base + 10 * np.arange(200_000)  # 800 kB: each rebuild copies it
    phpfina.write_points(tmp_path, 1, 10, t, code(t), now=NOW, fsync=False)
    stop = threading.Event()
    checked = []
    errors = []

    def reader():
        while not stop.is_set():
            meta, data = phpfina.open_feed(tmp_path, 1)
            values = np.asarray(data[:50])
            times = meta.start_time + 10 * np.arange(len(values))
            known = ~np.isnan(values)
            if not np.array_equal(values[known], code(times[known]).astype(np.float32)):
                errors.append((meta, values[:5].tolist()))
            points = phpfina.read(tmp_path, 1, base - 500, base + 500, 10)
            got = [(pt // 1000, v) for pt, v in points if v is not None]
            if any(v != np.float32(code(pt)) for pt, v in got):
                errors.append(("read", got[:3]))
            checked.append(1)

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for th in threads:
        th.start()
    try:
        for k in range(1, 41):  # 40 rebuilds, each one slot earlier, every other one 2 slots
            late = base - 10 * (k + k // 2)
            phpfina.write(tmp_path, 1, 10, late, float(code(late)), now=NOW)
    finally:
        stop.set()
        for th in threads:
            th.join(timeout=30)
    assert errors == []
    assert len(checked) > 40
    assert phpfina.read_meta(tmp_path, 1).start_time == base - 10 * 60
