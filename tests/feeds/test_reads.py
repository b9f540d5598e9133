"""Reads: raw, average, delta, skipmissing, calendar windows across DST, limits, overlay."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import numpy as np
import pytest

from feeds.store import phpfina

LONDON = ZoneInfo("Europe/London")


def make_feed(directory, feed_id, interval, start, values):
    (directory / f"{feed_id}.meta").write_bytes(phpfina.pack_meta(interval, start))
    (directory / f"{feed_id}.dat").write_bytes(np.asarray(values, "<f4").tobytes())


def values_of(points):
    return [v for _t, v in points]


def test_raw_read_returns_each_slot_with_null_for_missing(tmp_path):
    make_feed(tmp_path, 1, 10, 1000, [1, np.nan, 3])
    assert phpfina.read(tmp_path, 1, 1000, 1020, 10) == [
        [1_000_000, 1.0],
        [1_010_000, None],
        [1_020_000, 3.0],
    ]


def test_average_is_the_mean_of_the_non_nan_slots_null_when_none(tmp_path):
    make_feed(tmp_path, 1, 10, 0, [1, 2, 3, np.nan, np.nan, np.nan, 10, np.nan, 20])
    got = phpfina.read(tmp_path, 1, 0, 60, 30, average=True)
    assert got == [[0, 2.0], [30_000, None], [60_000, 15.0]]


def test_average_matches_a_plain_python_mean_on_random_gappy_data(tmp_path):
    rng = np.random.default_rng(3)
    data = rng.normal(100, 30, 50_000).astype("<f4")
    data[rng.random(50_000) < 0.2] = np.nan
    data[10_000:12_000] = np.nan  # whole windows empty
    make_feed(tmp_path, 1, 10, 0, data)
    got = phpfina.read(tmp_path, 1, -5000, 510_000, 1000, average=True)
    for t_ms, value in got:
        lo, hi = t_ms // 10_000, t_ms // 10_000 + 100
        window = [float(x) for x in data[max(lo, 0) : max(hi, 0)] if not np.isnan(x)]
        if window:
            assert value == pytest.approx(sum(window) / len(window), rel=1e-5)
        else:
            assert value is None


def test_requested_interval_rounds_to_whole_slots_and_start_aligns(tmp_path):
    make_feed(tmp_path, 1, 10, 0, range(100))
    got = phpfina.read(tmp_path, 1, 95, 200, 34, average=True)  # 34 s -> 30 s windows
    assert [t for t, _ in got] == [90_000, 120_000, 150_000, 180_000]
    assert values_of(got) == [10.0, 13.0, 16.0, 19.0]


def test_delta_gives_the_increase_of_a_cumulative_feed_per_window(tmp_path):
    make_feed(tmp_path, 1, 60, 0, [0, 1, 2, 3, np.nan, np.nan, 10, 11, 12, 13])
    got = phpfina.read(tmp_path, 1, 0, 539, 180, delta=True)
    # windows of 3 slots: last values 2, 3, 12; the window before 0 has none
    assert got == [[0, None], [180_000, 1.0], [360_000, 9.0]]


def test_skipmissing_leaves_out_empty_windows(tmp_path):
    make_feed(tmp_path, 1, 10, 1000, [1, np.nan, 3])
    assert phpfina.read(tmp_path, 1, 1000, 1030, 10, skipmissing=True) == [
        [1_000_000, 1.0],
        [1_020_000, 3.0],
    ]


def test_a_read_before_or_after_the_data_is_all_null(tmp_path):
    make_feed(tmp_path, 1, 10, 1000, [1, 2])
    assert values_of(phpfina.read(tmp_path, 1, 0, 20, 10, average=True)) == [None] * 3
    assert values_of(phpfina.read(tmp_path, 1, 5000, 5020, 10)) == [None] * 3


def test_more_points_than_allowed_is_refused(tmp_path):
    make_feed(tmp_path, 1, 10, 0, [1])
    with pytest.raises(phpfina.TooManyPoints, match="at most 100"):
        phpfina.read(tmp_path, 1, 0, 10 * 100, 10, max_points=100)
    assert len(phpfina.read(tmp_path, 1, 0, 10 * 99, 10, max_points=100)) == 100


def test_bad_interval_and_timezone_name_the_parameter(tmp_path):
    make_feed(tmp_path, 1, 10, 0, [1])
    with pytest.raises(phpfina.BadReadRequest) as exc:
        phpfina.read(tmp_path, 1, 0, 10, "hourly")
    assert exc.value.param == "interval"
    with pytest.raises(phpfina.BadReadRequest) as exc:
        phpfina.read(tmp_path, 1, 0, 86400, "daily", timezone="Mars/Olympus")
    assert exc.value.param == "timezone"
    with pytest.raises(phpfina.BadReadRequest) as exc:
        phpfina.read(tmp_path, 1, 10, 0, 10)
    assert exc.value.param == "end"


def ts(*args) -> int:
    return int(datetime(*args, tzinfo=LONDON).timestamp())


def test_daily_kwh_is_right_on_the_23_and_25_hour_days(tmp_path):
    # A cumulative kWh feed, 10 min slots, rising 1 kWh every hour of real time, from
    # 2024-03-30 00:00 to 2024-10-28 00:00 London time.
    start, end = ts(2024, 3, 30), ts(2024, 10, 28)
    slots = (end - start) // 600
    kwh = np.arange(slots + 1, dtype=np.float64) / 6.0  # 6 slots an hour
    make_feed(tmp_path, 1, 600, start, kwh)
    march = phpfina.read(tmp_path, 1, ts(2024, 3, 30), ts(2024, 4, 1) - 1, "daily",
                         delta=True, timezone="Europe/London")  # fmt: skip
    assert [t // 1000 for t, _ in march] == [ts(2024, 3, 30), ts(2024, 3, 31)]
    # 30 March: no day before it in the file -> null; 31 March lasted 23 hours
    assert march[0][1] is None
    assert march[1][1] == pytest.approx(23.0)
    october = phpfina.read(tmp_path, 1, ts(2024, 10, 26), ts(2024, 10, 27, 12), "daily",
                           delta=True, timezone="Europe/London")  # fmt: skip
    assert values_of(october) == [pytest.approx(24.0), pytest.approx(25.0)]


def test_daily_average_windows_follow_local_midnight(tmp_path):
    start = ts(2024, 3, 31)
    hours = np.repeat([1.0, 2.0], [23, 1])  # 23 local hours of 1, then the first hour of 1 April
    make_feed(tmp_path, 1, 3600, start, hours)
    got = phpfina.read(tmp_path, 1, start, start + 86399, "daily", average=True,
                       timezone="Europe/London")  # fmt: skip
    assert got == [[start * 1000, 1.0], [ts(2024, 4, 1) * 1000, 2.0]]


def test_weekly_and_monthly_windows_start_on_monday_and_the_first(tmp_path):
    make_feed(tmp_path, 1, 86400, ts(2024, 1, 1), np.ones(100))
    weeks = phpfina.read(tmp_path, 1, ts(2024, 1, 10), ts(2024, 1, 20), "weekly",
                         timezone="Europe/London")  # fmt: skip
    assert [t // 1000 for t, _ in weeks] == [ts(2024, 1, 8), ts(2024, 1, 15)]
    months = phpfina.read(tmp_path, 1, ts(2024, 1, 10), ts(2024, 3, 2), "monthly",
                          average=True, timezone="Europe/London")  # fmt: skip
    assert [t // 1000 for t, _ in months] == [ts(2024, 1, 1), ts(2024, 2, 1), ts(2024, 3, 1)]
    assert values_of(months) == [1.0, 1.0, 1.0]


def test_overlay_points_are_merged_last_arrival_wins(tmp_path):
    make_feed(tmp_path, 1, 10, 1000, [1, 2, 3])
    overlay = (np.array([1010, 1040, 1041]), np.array([7.0, 8.0, 9.0]))
    got = phpfina.read(tmp_path, 1, 1000, 1050, 10, overlay=overlay)
    assert values_of(got) == [1.0, 7.0, 3.0, None, 9.0, None]
    avg = phpfina.read(tmp_path, 1, 1000, 1050, 20, average=True, overlay=overlay)
    assert values_of(avg) == [4.0, 3.0, 9.0]  # (1+7)/2, 3 alone, 9 alone


def test_overlay_alone_reads_for_a_feed_without_files(tmp_path):
    overlay = (np.array([1005, 1025]), np.array([1.0, 3.0]))
    got = phpfina.read(tmp_path, 9, 1000, 1020, 10, feed_interval=10, overlay=overlay)
    assert got == [[1_000_000, 1.0], [1_010_000, None], [1_020_000, 3.0]]
    assert phpfina.read(tmp_path, 9, 1000, 1020, 10) == []
