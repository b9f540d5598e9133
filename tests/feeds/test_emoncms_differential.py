"""Differential test: /feed/data.json against the independent reference of the
emoncms semantics written in docs/FEEDS.md (tests/feeds/emoncms_reference.py), point for point,
on generated PHPFina files: averaged windows from an unaligned start, samples, limitinterval,
daily/weekly/monthly/annual across both DST days of two zones, delta with the last value.
"""

from __future__ import annotations

import math
import random
from datetime import datetime
from zoneinfo import ZoneInfo

import numpy as np
import pytest

from feeds.models import Feed
from feeds.store import phpfina, service
from tests.feeds import emoncms_reference as ref

pytestmark = pytest.mark.django_db
LONDON = ZoneInfo("Europe/London")
FEED_START = int(datetime(2023, 12, 20, tzinfo=LONDON).timestamp())  # a 60 s multiple
DAYS = 400


def _write_feed(directory, feed_id: int, interval: int, values: np.ndarray, start: int) -> None:
    (directory / f"{feed_id}.meta").write_bytes(phpfina.pack_meta(interval, start))
    (directory / f"{feed_id}.dat").write_bytes(values.astype("<f4").tobytes())


def _power(n: int, rng: np.random.Generator) -> np.ndarray:
    """A noisy power trace with NaN gaps of every length (a missing reading to a lost week)."""
    values = 1500 + np.cumsum(rng.normal(0, 40, n))
    for _ in range(n // 5000):
        at = int(rng.integers(0, n))
        values[at : at + int(rng.choice([1, 3, 60, 1440, 10080]))] = np.nan
    return values


def _kwh(n: int, rng: np.random.Generator) -> np.ndarray:
    values = np.cumsum(rng.uniform(0, 0.05, n)) + 12_000.0  # a cumulative meter
    for _ in range(n // 20_000):
        at = int(rng.integers(0, n))
        values[at : at + int(rng.choice([1, 30, 1500]))] = np.nan
    return values


@pytest.fixture
def files(feed_dir, redis_client):
    rng = np.random.default_rng(13)
    power = Feed.objects.create(name="power", interval=60)
    kwh = Feed.objects.create(name="kwh", interval=60)
    fast = Feed.objects.create(name="fast", interval=10)
    n = DAYS * 1440
    _write_feed(feed_dir, power.id, 60, _power(n, rng), FEED_START)
    _write_feed(feed_dir, kwh.id, 60, _kwh(n, rng), FEED_START)
    _write_feed(feed_dir, fast.id, 10, _power(30 * 8640, rng), FEED_START + 86_400 * 100)
    # The meter's last reading through the write path: the last value (Redis) and the file.
    last_t = FEED_START + n * 60 - 1800  # 23:30 of the file's last day
    service.log_points([(kwh.id, last_t, 99_999.0)])
    service.commit_all(now=last_t)
    return {"power": power, "kwh": kwh, "fast": fast}


def _ours(client, feed, **params) -> list:
    response = client.get("/feed/data.json", {"id": feed.id, "timeformat": "unix", **params})
    assert response.status_code == 200, response.content
    return response.json()


def _theirs(feed_dir, feed, **params) -> list:
    kwargs = {k: v for k, v in params.items() if k not in ("start", "end", "interval")}
    for flag in ("average", "delta", "skipmissing", "limitinterval"):
        if flag in kwargs:
            kwargs[flag] = bool(int(kwargs[flag]))
    if kwargs.get("delta"):
        last = service.last_value(feed.id)
        kwargs["last"] = last
    interval = params["interval"]
    interval = int(interval) if str(interval).isdigit() else interval
    return ref.data(ref.Feed(feed_dir, feed.id), int(params["start"]), int(params["end"]),
                    interval, **kwargs)  # fmt: skip


def _same(ours: list, theirs: list) -> None:
    assert [p[0] for p in ours] == [p[0] for p in theirs]
    for (t, a), (_, b) in zip(ours, theirs, strict=True):
        if a is None or b is None:
            assert a is None and b is None, (t, a, b)
        else:  # summation order differs (numpy pairs, the reference runs along): 1e-9
            assert math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9), (t, a, b)


def _check(client, feed_dir, feed, **params) -> list:
    ours = _ours(client, feed, **params)
    _same(ours, _theirs(feed_dir, feed, **params))
    return ours


def test_a_year_of_averages_starts_at_start_not_at_interval_multiples(engineer_api, files,
                                                                      feed_dir):  # fmt: skip
    start = FEED_START + 12_345  # not a multiple of anything useful
    end = start + 365 * 86_400
    interval = round((end - start) / 1000)
    ours = _check(engineer_api, feed_dir, files["power"], start=start, end=end,
                  interval=interval, average=1)  # fmt: skip
    assert len(ours) == 1001 and ours[0][0] == start and ours[1][0] == start + interval
    assert sum(v is not None for _, v in ours) > 600  # the gaps of a week leave nulls


@pytest.mark.parametrize(
    "params",
    [
        {"interval": 7},  # below the feed's: one slot each, no averaging
        {"interval": 10},  # the feed's own
        {"interval": 95, "average": 1},  # not a whole number of slots
        {"interval": 95, "average": 1, "limitinterval": 1},  # rounded to 100 s
        {"interval": 5, "limitinterval": 1},  # raised to the feed's 10 s
        {"interval": 600, "average": 1, "skipmissing": 1},
        {"interval": 3600, "delta": 1},
    ],
)
def test_fixed_intervals_match_the_reference(engineer_api, files, feed_dir, params):
    feed = files["fast"]
    start = FEED_START + 86_400 * 100 - 3_333  # begins before the file does
    _check(engineer_api, feed_dir, feed, start=start, end=start + 86_400, **params)


@pytest.mark.parametrize("timezone", ["Europe/London", "America/New_York"])
def test_daily_windows_across_both_dst_days_match_the_reference(engineer_api, files, feed_dir,
                                                                timezone):  # fmt: skip
    start = int(datetime(2024, 3, 1, 15, tzinfo=LONDON).timestamp())
    end = int(datetime(2024, 11, 20, tzinfo=LONDON).timestamp())
    ours = _check(engineer_api, feed_dir, files["power"], start=start, end=end,
                  interval="daily", average=1, timezone=timezone)  # fmt: skip
    lengths = {b[0] - a[0] for a, b in zip(ours, ours[1:], strict=False)}
    assert lengths == {23 * 3600, 86_400, 25 * 3600}  # both DST days are whole local days


@pytest.mark.parametrize("interval", ["daily", "weekly", "monthly", "annual"])
def test_delta_of_a_kwh_meter_per_calendar_window_matches_the_reference(engineer_api, files,
                                                                        feed_dir, interval):  # fmt: skip
    start = FEED_START + 3 * 86_400 + 500
    end = FEED_START + (DAYS - 1) * 86_400 + 1800  # the file's last day
    ours = _check(engineer_api, feed_dir, files["kwh"], start=start, end=end,
                  interval=interval, delta=1, timezone="Europe/London")  # fmt: skip
    assert ours[-1][1] is not None  # the current window closes on the feed's last value


@pytest.mark.parametrize("interval", ["weekly", "monthly", "annual"])
def test_calendar_averages_match_the_reference(engineer_api, files, feed_dir, interval):
    _check(engineer_api, feed_dir, files["power"], start=FEED_START + 5 * 86_400,
           end=FEED_START + DAYS * 86_400, interval=interval, average=1,
           timezone="Europe/London")  # fmt: skip


def test_random_requests_match_the_reference(engineer_api, files, feed_dir):
    rng = random.Random(1313)
    for _ in range(40):
        feed = files[rng.choice(["power", "kwh", "fast"])]
        start = FEED_START + rng.randrange(-86_400, DAYS * 86_400)
        params = {"start": start, "end": start + rng.randrange(3600, 40 * 86_400)}
        params["interval"] = rng.choice([60, 61, 300, 900, 3599, 86_400, "daily", "weekly"])
        if not isinstance(params["interval"], str):
            count = (params["end"] - start) // params["interval"]
            if count > 5000:
                params["interval"] = (params["end"] - start) // 5000 + 1
        for flag in ("average", "skipmissing", "limitinterval", "delta"):
            if rng.random() < 0.4:
                params[flag] = 1
        params["timezone"] = rng.choice(["Europe/London", "Australia/Sydney", "UTC"])
        _check(engineer_api, feed_dir, feed, **params)
