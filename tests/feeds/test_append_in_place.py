"""phpfina.append_in_place, the commit's fast path for the usual block (issue #29), writes exactly
what write_points writes, and declines every block that write_points would treat otherwise."""

from __future__ import annotations

import math

import numpy as np
import pytest

from feeds.store import phpfina

NOW = 2_000_000_000
START = 1_000_000


def existing_feed(directory, feed_id: int = 1, interval: int = 10, slots: int = 5) -> None:
    times = START + interval * np.arange(slots)
    phpfina.write_points(
        directory, feed_id, interval, times, np.arange(slots, dtype=float), now=NOW
    )


def block(first_slot: int, count: int, interval: int = 10, jitter: int = 0):
    t = (START + interval * (first_slot + np.arange(count)) + jitter).astype(np.uint32)
    return t, (np.arange(count) + 0.5).astype(np.float32)


def test_the_next_slots_in_order_are_written_as_write_points_writes_them(tmp_path):
    fast, general = tmp_path / "fast", tmp_path / "general"
    for d in (fast, general):
        existing_feed(d)
    t, v = block(5, 10, jitter=7)  # anywhere inside each slot
    assert phpfina.append_in_place(fast, 1, t, v, now=NOW) == 10
    report = phpfina.write_points(general, 1, 10, t, v, now=NOW, data_fsync=False)
    assert (report.written, report.refused) == (10, [])
    for name in ("1.dat", "1.meta"):
        assert (fast / name).read_bytes() == (general / name).read_bytes()


@pytest.mark.parametrize(
    "why, make",
    [
        ("a gap before the first point", lambda: block(6, 3)),
        ("a gap between points", lambda: (np.array([START + 50, START + 70], np.uint32),
                                          np.ones(2, np.float32))),
        ("two points in one slot", lambda: (np.array([START + 50, START + 51], np.uint32),
                                            np.ones(2, np.float32))),
        ("out of order", lambda: (np.array([START + 60, START + 50], np.uint32),
                                  np.ones(2, np.float32))),
        ("a rewrite inside the file", lambda: block(3, 2)),
        ("before the start", lambda: block(-2, 2)),
        ("a NaN", lambda: (block(5, 2)[0], np.array([1.0, math.nan], np.float32))),
        ("an infinity", lambda: (block(5, 2)[0], np.array([math.inf, 1.0], np.float32))),
        ("more than an hour ahead", lambda: block(5, 2)),
    ],
)  # fmt: skip
def test_any_other_block_is_left_to_write_points(tmp_path, why, make):
    existing_feed(tmp_path)
    before = (tmp_path / "1.dat").read_bytes()
    t, v = make()
    now = int(t.max()) - phpfina.MAX_FUTURE_S - 1 if why == "more than an hour ahead" else NOW
    assert phpfina.append_in_place(tmp_path, 1, t, v, now=now) is None, why
    assert (tmp_path / "1.dat").read_bytes() == before  # nothing written


def test_a_feed_without_files_or_data_or_with_a_prepend_to_finish_is_left_to_write_points(
    tmp_path,
):
    t, v = block(0, 2)
    assert phpfina.append_in_place(tmp_path, 1, t, v, now=NOW) is None  # no files
    phpfina.create(tmp_path, 1, 10)
    assert phpfina.append_in_place(tmp_path, 1, t, v, now=NOW) is None  # empty: fixes its start
    existing_feed(tmp_path, 2)
    (tmp_path / "2.meta.tmp").write_bytes(phpfina.pack_meta(10, START - 100))
    t, v = block(5, 2)
    assert phpfina.append_in_place(tmp_path, 2, t, v, now=NOW) is None  # _recover's turn


def test_random_blocks_give_the_same_files_by_either_path(tmp_path):
    """Blocks of every kind in turn: the fast path where it accepts, write_points otherwise,
    against write_points alone."""
    rng = np.random.default_rng(29)
    fast, general = tmp_path / "fast", tmp_path / "general"
    for d in (fast, general):
        existing_feed(d, slots=3)
    end = 3
    accepted = 0
    for _ in range(200):
        first = end + int(rng.choice([0, 0, 0, 1, 5, -2]))
        count = int(rng.integers(1, 6))
        t = (START + 10 * (first + np.arange(count)) + rng.integers(0, 10, count)).astype(np.uint32)
        if rng.random() < 0.1:
            t = t[::-1].copy()
        v = rng.normal(20, 5, count).astype(np.float32)
        written = phpfina.append_in_place(fast, 1, t, v, now=NOW)
        if written is None:
            phpfina.write_points(fast, 1, 10, t, v, now=NOW, data_fsync=False)
        else:
            accepted += 1
        phpfina.write_points(general, 1, 10, t, v, now=NOW, data_fsync=False)
        end = phpfina.npoints(general, 1)
        assert (fast / "1.dat").read_bytes() == (general / "1.dat").read_bytes()
    assert (fast / "1.meta").read_bytes() == (general / "1.meta").read_bytes()
    assert 50 < accepted < 200  # both paths were taken
