"""PHPFina files byte for byte: vectors worked out by hand from the format.

meta = four little-endian uint32 (0, 0, interval, start_time); dat = little-endian float32
per slot. 1.0f = 00 00 80 3f, 2.0f = 00 00 00 40, 3.0f = 00 00 40 40, 4.0f = 00 00 80 40,
5.0f = 00 00 a0 40, quiet NaN = 00 00 c0 7f.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from feeds.store import phpfina

NOW = 2_000_000_000
ONE, TWO, THREE, FOUR, FIVE = (
    bytes.fromhex(h) for h in ("0000803f", "00000040", "00004040", "00008040", "0000a040")
)
NAN = bytes.fromhex("0000c07f")


def meta_bytes(d, feed_id=1):
    return (d / f"{feed_id}.meta").read_bytes()


def dat_bytes(d, feed_id=1):
    return (d / f"{feed_id}.dat").read_bytes()


def test_an_empty_feed_is_a_16_byte_meta_with_start_0_and_an_empty_dat(tmp_path):
    phpfina.create(tmp_path, 1, 10)
    assert meta_bytes(tmp_path) == bytes.fromhex("00000000000000000a00000000000000")
    assert dat_bytes(tmp_path) == b""


def test_first_write_sets_start_time_aligned_down_and_writes_slot_0(tmp_path):
    phpfina.write(tmp_path, 1, 10, 1_000_007, 1.0, now=NOW)
    # 1_000_000 = 0x000f4240
    assert meta_bytes(tmp_path) == bytes.fromhex("00000000000000000a00000040420f00")
    assert dat_bytes(tmp_path) == ONE


def test_a_write_inside_the_file_overwrites_its_slot_only(tmp_path):
    for i, v in enumerate([1.0, 2.0, 3.0]):
        phpfina.write(tmp_path, 1, 10, 1_000_000 + 10 * i, v, now=NOW)
    phpfina.write(tmp_path, 1, 10, 1_000_019, 5.0, now=NOW)  # slot 1
    assert dat_bytes(tmp_path) == ONE + FIVE + THREE
    assert meta_bytes(tmp_path)[12:] == (1_000_000).to_bytes(4, "little")


def test_a_write_past_the_end_pads_with_nan(tmp_path):
    phpfina.write(tmp_path, 1, 10, 1_000_000, 1.0, now=NOW)
    phpfina.write(tmp_path, 1, 10, 1_000_030, 4.0, now=NOW)
    assert dat_bytes(tmp_path) == ONE + NAN + NAN + FOUR


def test_a_join_write_fills_the_gap_linearly(tmp_path):
    phpfina.write(tmp_path, 1, 10, 1_000_000, 1.0, now=NOW)
    phpfina.write(tmp_path, 1, 10, 1_000_040, 5.0, join=True, now=NOW)
    assert dat_bytes(tmp_path) == ONE + TWO + THREE + FOUR + FIVE


def test_a_block_keeps_the_last_arrival_for_a_slot_and_sorts_slots(tmp_path):
    report = phpfina.write_points(
        tmp_path, 1, 10, [1_000_020, 1_000_000, 1_000_021, 1_000_001], [9.0, 1.0, 3.0, 2.0],
        now=NOW,
    )  # fmt: skip
    assert report.written == 2 and report.refused == []
    assert dat_bytes(tmp_path) == TWO + NAN + THREE


def test_a_future_join_point_then_late_ones_write_what_emoncms_writes_post_by_post(tmp_path):
    """emoncms's PHPFina writes each post as it comes: the future point (slot 4) draws its line
    from the file's last slot (1.0 at slot 0), and the late points after it are inside the
    file by then, so they overwrite their slots and draw nothing. Slot 3 stays on the line
    1 -> 5 (4.0); drawn over the block in slot order it was on 4 -> 5 (4.5)."""
    phpfina.write(tmp_path, 1, 10, 1_000_000, 1.0, now=NOW)
    phpfina.write_points(
        tmp_path, 1, 10, [1_000_040, 1_000_010, 1_000_020], [5.0, 4.0, 4.0], [True] * 3, now=NOW
    )
    assert dat_bytes(tmp_path) == ONE + FOUR + FOUR + FOUR + FIVE


def test_a_join_line_starts_from_the_last_slot_as_rewritten_before_the_point_came(tmp_path):
    """A point that rewrites the file's last slot before a join point arrives moves the line's
    start, as emoncms reads the last slot when the join point is written."""
    phpfina.write(tmp_path, 1, 10, 1_000_000, 1.0, now=NOW)
    phpfina.write_points(
        tmp_path, 1, 10, [1_000_000, 1_000_030], [3.0, 4.0], [False, True], now=NOW
    )
    assert dat_bytes(tmp_path) == THREE + bytes(np.array([10 / 3, 11 / 3], "<f4")) + FOUR


@pytest.mark.parametrize("seed", range(8))
def test_a_block_writes_the_file_its_points_write_one_at_a_time(tmp_path, seed):
    """However the points are grouped into commits, the file is the same (and so the same as
    emoncms's, which writes one post at a time): points in any order, joined or not."""
    rng = np.random.default_rng(seed)
    count = 40
    t = 1_000_000 + 10 * rng.integers(0, 60, count) + rng.integers(0, 10, count)
    t[0] = 1_000_000  # the first point fixes start_time both ways (no prepend here)
    v = rng.normal(10, 5, count).astype("<f4").astype(float)
    j = rng.random(count) < 0.6
    one, block = tmp_path / "one", tmp_path / "block"
    one.mkdir()
    block.mkdir()
    for ti, vi, ji in zip(t.tolist(), v.tolist(), j.tolist(), strict=True):
        phpfina.write_points(one, 1, 10, [ti], [vi], [ji], now=NOW)
    phpfina.write_points(block, 1, 10, t, v, j, now=NOW)
    assert meta_bytes(block) == meta_bytes(one)
    assert dat_bytes(block) == dat_bytes(one)
    assert j.any() and (np.diff(t) < 0).any()  # the draw has joins and late points


def test_the_meta_is_not_rewritten_after_the_first_write(tmp_path):
    phpfina.write(tmp_path, 1, 10, 1_000_000, 1.0, now=NOW)
    before = (tmp_path / "1.meta").stat().st_mtime_ns, (tmp_path / "1.meta").stat().st_ino
    phpfina.write(tmp_path, 1, 10, 1_000_100, 1.0, now=NOW)
    after = (tmp_path / "1.meta").stat().st_mtime_ns, (tmp_path / "1.meta").stat().st_ino
    assert before == after


def test_a_write_too_long_before_start_time_is_refused_and_changes_nothing(tmp_path):
    start = 400_000_000  # far enough from 0 that MAX_PREPEND_S (5 years) before it is a time
    phpfina.write(tmp_path, 1, 10, start, 1.0, now=NOW)
    with pytest.raises(phpfina.TimestampBeforeStart):
        phpfina.write(tmp_path, 1, 10, start - phpfina.MAX_PREPEND_S - 10, 2.0, now=NOW)
    assert dat_bytes(tmp_path) == ONE
    assert meta_bytes(tmp_path) == phpfina.pack_meta(10, start)


def test_a_gap_beyond_the_maximum_padding_is_refused(tmp_path):
    phpfina.write(tmp_path, 1, 1, 1_000_000, 1.0, now=NOW)
    far = 1_000_000 + phpfina.MAX_PADDING_SLOTS + 2
    with pytest.raises(phpfina.GapTooLarge):
        phpfina.write(tmp_path, 1, 1, far, 2.0, now=NOW)
    assert dat_bytes(tmp_path) == ONE
    # exactly the maximum padding is still accepted
    phpfina.write(tmp_path, 1, 1, far - 1, 2.0, now=NOW)
    assert len(dat_bytes(tmp_path)) == 4 * (phpfina.MAX_PADDING_SLOTS + 2)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, 1e39])
def test_non_finite_values_are_refused_not_written(tmp_path, bad):
    phpfina.write(tmp_path, 1, 10, 1_000_000, 1.0, now=NOW)
    with pytest.raises(phpfina.InvalidValue):
        phpfina.write(tmp_path, 1, 10, 1_000_010, bad, now=NOW)
    assert dat_bytes(tmp_path) == ONE


def test_a_point_far_in_the_future_is_refused(tmp_path):
    with pytest.raises(phpfina.TimestampInFuture):
        phpfina.write(tmp_path, 1, 10, NOW + 2 * phpfina.MAX_FUTURE_S, 1.0, now=NOW)
    assert not (tmp_path / "1.dat").exists()


def test_refused_points_in_a_block_are_reported_and_the_rest_written(tmp_path):
    phpfina.write(tmp_path, 1, 10, 400_000_000, 1.0, now=NOW)
    too_early = 400_000_000 - phpfina.MAX_PREPEND_S - 10
    report = phpfina.write_points(
        tmp_path, 1, 10, [too_early, 400_000_010, 400_000_020], [5.0, math.nan, 3.0], now=NOW
    )
    assert report.written == 1
    assert sorted(t for t, _ in report.refused) == [too_early, 400_000_010]
    assert dat_bytes(tmp_path) == ONE + NAN + THREE


def test_an_existing_meta_interval_rules_over_the_one_passed(tmp_path):
    phpfina.write(tmp_path, 1, 60, 600, 1.0, now=NOW)
    phpfina.write(tmp_path, 1, 10, 660, 2.0, now=NOW)  # slot 1 of a 60 s feed
    assert dat_bytes(tmp_path) == ONE + TWO


def test_files_written_by_emoncms_style_packing_read_back(tmp_path):
    # As emoncms's PHP writes them: pack("I",0).pack("I",0).pack("I",$interval).pack("I",$start)
    # and pack("f",$value) per slot.
    (tmp_path / "5.meta").write_bytes(np.array([0, 0, 30, 900], "<u4").tobytes())
    (tmp_path / "5.dat").write_bytes(np.array([1.5, np.nan, 2.5], "<f4").tobytes())
    assert phpfina.read(tmp_path, 5, 900, 960, 30) == [
        [900_000, 1.5],
        [930_000, None],
        [960_000, 2.5],
    ]


@pytest.mark.parametrize(
    ("meta", "dat", "message"),
    [(b"\0" * 15, b"", "meta is 15 bytes"), (bytes(16), b"\0" * 6, "not a multiple of 4")],
)
def test_corrupt_files_are_named(tmp_path, meta, dat, message):
    (tmp_path / "3.meta").write_bytes(meta)
    (tmp_path / "3.dat").write_bytes(dat)
    with pytest.raises(phpfina.CorruptFeed, match=message):
        phpfina.check_files(tmp_path / "3.meta", tmp_path / "3.dat")
