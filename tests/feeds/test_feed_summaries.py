"""Summaries beside each feed (feeds/store/summaries.py): a summarised read answers what the
raw path answers, on random data with gaps, through both engines and with buffered points; a
write into the past, an append, a prepend, a copy over the .dat or a crash mid-write never leaves
a summary that is served wrong; and the raw path's memory does not follow the range.
"""

from __future__ import annotations

import os
import shutil
import tracemalloc

import numpy as np
import pytest

from feeds.emoncms import read as emoncms_read
from feeds.store import mapped, phpfina, summaries

START = 1_600_000_000  # a multiple of 10
SUPER = summaries.SUPER_SLOTS


def make_feed(directory, values, feed_id=1, interval=10, start=START):
    (directory / f"{feed_id}.meta").write_bytes(phpfina.pack_meta(interval, start))
    (directory / f"{feed_id}.dat").write_bytes(np.asarray(values, "<f4").tobytes())


def gappy(rng, n, scale=1.0):
    """Noise around 100 with 5 % of slots lost, and outages from one slot to a day."""
    values = rng.normal(100, 30, n) * scale
    values[rng.random(n) < 0.05] = np.nan
    for at in rng.integers(0, n, 30):
        values[at : at + int(rng.choice([1, 15, 17, 255, 4097, 8640]))] = np.nan
    return values.astype("<f4")


def raw_and_summarised(directory, feed_id=1):
    """The feed as a read sees it without its summary, and with it."""
    raw = phpfina.open_view(directory, feed_id)
    summaries.build(directory, feed_id)
    summarised = phpfina.open_view(directory, feed_id)
    assert raw.summary is None and summarised.summary is not None
    return raw, summarised


def assert_same(got, want):
    assert np.array_equal(np.isnan(got), np.isnan(want))
    has = ~np.isnan(want)
    # The same sums added in another order: equal to float64 rounding.
    np.testing.assert_allclose(got[has], want[has], rtol=1e-12)


def reference_means(values, bounds):
    out = []
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        seg = values[max(lo, 0) : max(min(hi, len(values)), 0)].astype(np.float64)
        seg = seg[~np.isnan(seg)]
        out.append(seg.mean() if len(seg) else np.nan)
    return np.array(out)


@pytest.mark.parametrize("seed", range(4))
def test_a_summarised_average_equals_the_raw_one_on_random_windows(tmp_path, seed):
    rng = np.random.default_rng(seed)
    n = 40 * SUPER + int(rng.integers(0, SUPER))  # and a tail no superblock covers
    scale = 10.0 ** rng.uniform(-3, 4, n) if seed % 2 else 1.0  # values of every magnitude
    values = gappy(rng, n, scale)
    make_feed(tmp_path, values)
    raw, summarised = raw_and_summarised(tmp_path)
    for _ in range(60):
        m = int(rng.integers(1, 300))
        bounds = np.sort(rng.integers(-500, n + 500, m + 1))
        want = phpfina.window_values(raw, bounds, "average")
        assert_same(phpfina.window_values(summarised, bounds, "average"), want)
        assert_same(want, reference_means(values, bounds))


def test_windows_on_block_edges_and_inside_one_block_are_exact(tmp_path):
    values = gappy(np.random.default_rng(9), 8 * SUPER)
    make_feed(tmp_path, values)
    raw, summarised = raw_and_summarised(tmp_path)
    for bounds in ([0, SUPER, 2 * SUPER], [16, 32, 48, 256], [1, 15], [4095, 4097],
                   [0, 8 * SUPER], [17, 17, 17, 300], [SUPER - 1, 3 * SUPER + 1]):  # fmt: skip
        bounds = np.asarray(bounds)
        assert_same(phpfina.window_values(summarised, bounds, "average"),
                    phpfina.window_values(raw, bounds, "average"))  # fmt: skip


def test_both_engines_answer_the_same_with_and_without_the_summary(tmp_path):
    rng = np.random.default_rng(4)
    n = 200 * SUPER  # 95 days of 10 s slots
    make_feed(tmp_path, gappy(rng, n))
    end = START + 10 * n
    cases = [(START - 3600, end + 3600, 8000), (START + 12_345, end - 777, 31_537),
             (START + 5, START + 86_400 * 30, 3599), (START, end, 86_400)]  # fmt: skip
    want = {}
    for label in ("raw", "summarised"):
        if label == "summarised":
            summaries.build(tmp_path, 1)
        for s, e, interval in cases:
            req = emoncms_read.Request(s, e, interval, average=True)
            got = (
                emoncms_read.read(tmp_path, 1, req)[1],
                phpfina.read(tmp_path, 1, s, e, interval, average=True),
            )
            if label == "raw":
                want[(s, e, interval)] = got
            else:
                assert_same(got[0], want[(s, e, interval)][0])
                ours = np.array([np.nan if v is None else v for _t, v in got[1]])
                theirs = np.array(
                    [np.nan if v is None else v for _t, v in want[(s, e, interval)][1]]
                )
                assert_same(ours, theirs)


def test_buffered_points_are_merged_over_the_summary_as_the_commit_will_write_them(tmp_path):
    rng = np.random.default_rng(5)
    n = 30 * SUPER
    feeds, committed = tmp_path / "feeds", tmp_path / "committed"
    feeds.mkdir()
    make_feed(feeds, gappy(rng, n))
    summaries.build(feeds, 1)
    t = START + 10 * np.concatenate([rng.integers(0, n, 40), n + np.arange(0, 300, 7)])
    v = rng.normal(50, 5, len(t)).astype("<f4").astype(float)
    j = rng.random(len(t)) < 0.5
    view = phpfina.open_view(feeds, 1, overlay=(t, v, j))
    assert view.summary is not None
    bounds = np.sort(rng.integers(0, n + 400, 200))
    got = phpfina.window_values(view, bounds, "average")
    shutil.copytree(feeds, committed)
    phpfina.write_points(committed, 1, 10, t, v, j, now=START + 10 * n + 10**6, fsync=False)
    after = phpfina.open_view(committed, 1)
    assert after.summary is not None  # the write kept it
    assert_same(got, phpfina.window_values(after, bounds, "average"))


def summary_bytes(directory, feed_id=1):
    return [p.read_bytes()[summaries.HEADER_SIZE :] if p.suffix == ".sum" else p.read_bytes()
            for p in summaries.paths(directory, feed_id)]  # fmt: skip


def rebuilt_bytes(directory, tmp_path, feed_id=1):
    """What a summary built from nothing holds for the same .dat."""
    fresh = tmp_path / "fresh"
    shutil.rmtree(fresh, ignore_errors=True)
    fresh.mkdir()
    for suffix in (".meta", ".dat"):
        shutil.copy(directory / f"{feed_id}{suffix}", fresh / f"{feed_id}{suffix}")
    summaries.build(fresh, feed_id)
    return summary_bytes(fresh, feed_id)


def test_a_write_into_the_past_updates_the_blocks_it_touches(tmp_path):
    rng = np.random.default_rng(6)
    feeds = tmp_path / "feeds"
    feeds.mkdir()
    make_feed(feeds, gappy(rng, 20 * SUPER))
    summaries.build(feeds, 1)
    slots = np.sort(rng.choice(20 * SUPER, 500, replace=False))
    report = phpfina.write_points(feeds, 1, 10, START + 10 * slots, rng.normal(7, 1, 500),
                                  now=START + 10**8, fsync=False)  # fmt: skip
    assert report.written == 500
    assert phpfina.open_view(feeds, 1).summary is not None
    assert summary_bytes(feeds) == rebuilt_bytes(feeds, tmp_path)


def test_appends_extend_the_summary_over_each_superblock_they_complete(tmp_path):
    feeds = tmp_path / "feeds"
    feeds.mkdir()
    make_feed(feeds, gappy(np.random.default_rng(7), SUPER - 10))
    for k in range(3):  # live points, a commit at a time
        t = START + 10 * (SUPER - 10 + k * 3000 + np.arange(3000))
        phpfina.write_points(feeds, 1, 10, t, np.full(3000, 2.5), now=START + 10**8, fsync=False)
    view = phpfina.open_view(feeds, 1)
    assert view.summary.slots == 3 * SUPER  # 13,086 slots: three whole superblocks
    assert summary_bytes(feeds) == rebuilt_bytes(feeds, tmp_path)


def test_the_commits_in_place_append_keeps_the_summary_as_write_points_does(tmp_path):
    """phpfina.append_in_place (the commit's usual block, issue #29) bypasses write_points: it
    keeps the summary itself, so reads still use it (an append that changed only the .dat left
    a stamp that no longer matched: every read raw, every next write rebuilding from slot 0)."""
    feeds = tmp_path / "feeds"
    feeds.mkdir()
    make_feed(feeds, gappy(np.random.default_rng(12), SUPER - 10))
    for k in range(3):  # live points, a commit at a time, each the usual block
        t = START + 10 * (SUPER - 10 + k * 3000 + np.arange(3000))
        written = phpfina.append_in_place(
            feeds, 1, t.astype(np.uint32), np.full(3000, 2.5, "<f4"), now=START + 10**8
        )
        assert written == 3000
    view = phpfina.open_view(feeds, 1)
    assert view.summary is not None and view.summary.slots == 3 * SUPER
    assert summaries.matches_dat(feeds, 1) is True
    assert summary_bytes(feeds) == rebuilt_bytes(feeds, tmp_path)


def test_a_prepend_makes_the_summary_stale_until_writes_rebuild_it(tmp_path):
    rng = np.random.default_rng(8)
    feeds = tmp_path / "feeds"
    feeds.mkdir()
    values = gappy(rng, 10 * SUPER)
    make_feed(feeds, values)
    summaries.build(feeds, 1)
    phpfina.write_points(feeds, 1, 10, [START - 10 * 100], [1.0], now=START + 10**8, fsync=False)
    assert phpfina.read_meta(feeds, 1).start_time == START - 1000
    # The write that prepended also started the summary again from slot 0, for the new start.
    view = phpfina.open_view(feeds, 1)
    assert view.summary is not None and view.data[0] == 1.0
    bounds = np.arange(0, 10 * SUPER + 100, 997)
    want = reference_means(np.concatenate(([1.0], np.full(99, np.nan), values)), bounds)
    assert_same(phpfina.window_values(view, bounds, "average"), want)
    assert summary_bytes(feeds) == rebuilt_bytes(feeds, tmp_path)


def test_a_dat_copied_over_is_never_read_through_the_old_summary(tmp_path):
    rng = np.random.default_rng(10)
    make_feed(tmp_path, gappy(rng, 10 * SUPER))
    summaries.build(tmp_path, 1)
    other = tmp_path / "other.dat"
    other.write_bytes(np.full(10 * SUPER, 3.0, "<f4").tobytes())  # the same size
    shutil.copy(other, tmp_path / "1.dat")  # as an operator restoring a backup would
    view = phpfina.open_view(tmp_path, 1)
    assert view.summary is None
    assert np.all(phpfina.window_values(view, np.array([0, 5000, 10 * SUPER]), "average") == 3.0)


def test_a_crash_between_marking_and_finishing_leaves_the_summary_ignored(tmp_path):
    make_feed(tmp_path, np.ones(4 * SUPER))
    summaries.build(tmp_path, 1)
    meta = phpfina.read_meta(tmp_path, 1)
    updater = summaries.Updater.begin(tmp_path, 1, meta.interval, meta.start_time, 5)
    with open(tmp_path / "1.dat", "r+b") as fh:  # the .dat written, then the process dies
        fh.seek(5 * 4)
        fh.write(np.float32(100.0).tobytes())
    updater.abandon()
    view = phpfina.open_view(tmp_path, 1)
    assert view.summary is None
    assert phpfina.window_values(view, np.array([0, 16]), "average")[0] == pytest.approx(
        (15 + 100) / 16
    )
    # The next write starts the summary again and gets it right.
    phpfina.write_points(tmp_path, 1, 10, [START + 10 * 7], [1.0], now=START + 10**8, fsync=False)
    view = phpfina.open_view(tmp_path, 1)
    assert view.summary is not None
    assert phpfina.window_values(view, np.array([0, 16]), "average")[0] == pytest.approx(
        (15 + 100) / 16
    )


def test_a_feed_shorter_than_a_superblock_gets_no_summary_files(tmp_path):
    phpfina.write_points(tmp_path, 1, 10, START + 10 * np.arange(100), np.ones(100), now=2e9)
    assert not any(p.exists() for p in summaries.paths(tmp_path, 1))
    assert summaries.build(tmp_path, 1) == 0


def test_the_raw_path_holds_a_chunk_not_the_range(tmp_path, monkeypatch):
    # 4 M slots (16 MB of .dat, as 64 MB of float64) read with no summary: the allocations
    # of the read stay within the reused chunk buffers and the points returned.
    n = 1 << 22
    make_feed(tmp_path, gappy(np.random.default_rng(11), n))
    bounds = np.linspace(0, n, 1001).astype(np.int64)
    view = phpfina.open_view(tmp_path, 1)
    phpfina.window_values(view, bounds, "average")  # this thread's buffers, made once
    for mode in ("average", "last"):
        tracemalloc.start()
        phpfina.window_values(view, bounds, mode)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < 1 << 20, (mode, peak)  # under 1 MB, where the slots are 16 MB
    chunk = phpfina.READ_CHUNK_SLOTS
    buffers = phpfina.scratch.buffers(0)
    assert buffers.size <= 2 * (chunk + 1)


@pytest.mark.django_db
def test_the_command_builds_every_feeds_summary_and_names_a_missing_id(feed_dir, redis_client):
    from io import StringIO

    from django.core.management import CommandError, call_command

    from feeds.models import Feed

    long_feed = Feed.objects.create(name="long", interval=10)
    short_feed = Feed.objects.create(name="short", interval=10)
    make_feed(feed_dir, gappy(np.random.default_rng(12), 5 * SUPER + 7), feed_id=long_feed.id)
    make_feed(feed_dir, np.ones(100), feed_id=short_feed.id)
    out = StringIO()
    call_command("build_feed_summaries", stdout=out)
    assert f"feed {long_feed.id}: 20,480 slots summarised" in out.getvalue()
    assert "1 feed(s) summarised" in out.getvalue()
    assert summaries.matches_dat(feed_dir, long_feed.id) is True
    assert not summaries.summary_path(feed_dir, short_feed.id).exists()
    with pytest.raises(CommandError, match="no feed with id 999999"):
        call_command("build_feed_summaries", "999999", stdout=StringIO())


def test_a_kept_mapping_never_hides_a_replaced_or_rewritten_dat(tmp_path):
    make_feed(tmp_path, np.ones(1000))
    assert phpfina.read(tmp_path, 1, START, START, 10) == [[START * 1000, 1.0]]
    replacement = tmp_path / "new.dat"
    replacement.write_bytes(np.full(1000, 2.0, "<f4").tobytes())  # same size, a new inode
    os.replace(replacement, tmp_path / "1.dat")
    assert phpfina.read(tmp_path, 1, START, START, 10) == [[START * 1000, 2.0]]
    phpfina.write_points(tmp_path, 1, 10, [START], [3.0], now=2e9, fsync=False)  # in place
    assert phpfina.read(tmp_path, 1, START, START, 10) == [[START * 1000, 3.0]]


def test_kept_mappings_and_their_descriptors_are_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(mapped, "MAX_MAPPINGS", 8)
    for feed_id in range(1, 31):
        make_feed(tmp_path, np.ones(10), feed_id=feed_id)
    before = len(os.listdir("/proc/self/fd"))
    for feed_id in range(1, 31):
        assert phpfina.read(tmp_path, feed_id, START, START, 10) == [[START * 1000, 1.0]]
    assert len(mapped._maps) <= 8
    assert len(os.listdir("/proc/self/fd")) - before <= 8


def test_a_summary_that_cannot_be_updated_never_fails_the_write_nor_is_trusted(
    tmp_path, monkeypatch
):
    make_feed(tmp_path, np.ones(4 * SUPER))
    summaries.build(tmp_path, 1)

    def full_disk(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(summaries.Updater, "_recompute", full_disk)
    report = phpfina.write_points(tmp_path, 1, 10, [START + 10 * 5], [9.0], now=2e9, fsync=False)
    assert report.written == 1 and phpfina.open_data(tmp_path, 1)[5] == 9.0
    assert summaries.matches_dat(tmp_path, 1) is None  # dirty: reads use the .dat

    monkeypatch.setattr(summaries.Updater, "begin", full_disk)
    report = phpfina.write_points(tmp_path, 1, 10, [START + 10 * 6], [8.0], now=2e9, fsync=False)
    assert report.written == 1 and phpfina.open_data(tmp_path, 1)[6] == 8.0
    assert not any(p.exists() for p in summaries.paths(tmp_path, 1))  # dropped, not trusted
    view = phpfina.open_view(tmp_path, 1)
    assert phpfina.window_values(view, np.array([0, 16]), "average")[0] == pytest.approx(31 / 16)


def test_a_read_in_flight_keeps_its_summary_while_a_write_starts_it_again(tmp_path):
    values = gappy(np.random.default_rng(13), 8 * SUPER)
    make_feed(tmp_path, values)
    summaries.build(tmp_path, 1)
    view = phpfina.open_view(tmp_path, 1)  # a read has mapped the summary...
    assert view.summary is not None
    # ...when a prepend rebuilds the .dat and the write starts the summary again.
    phpfina.write_points(tmp_path, 1, 10, [START - 10 * SUPER], [1.0], now=2e9, fsync=False)
    assert phpfina.read_meta(tmp_path, 1).start_time == START - 10 * SUPER
    bounds = np.array([0, 3 * SUPER + 5, 8 * SUPER])
    # The read in flight finishes on what it mapped (no SIGBUS from a truncated file).
    assert_same(phpfina.window_values(view, bounds, "average"), reference_means(values, bounds))
