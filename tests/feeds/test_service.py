"""feeds.store.service: the contract other apps use, with the real Redis and database."""

from __future__ import annotations

import math

import numpy as np
import pytest

from feeds.models import Feed
from feeds.store import phpfina, service

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_backfill_bound(settings):
    # These tests write synthetic times (1970, 2001) and commit with a far later `now`: the
    # backfill bound (a new feed starts at most BMS_FEED_MAX_BACKFILL_DAYS before now) would
    # refuse them. It has its own tests in test_padding_bounds.py.
    settings.BMS_FEED_MAX_BACKFILL_DAYS = 100_000


@pytest.fixture
def feed(feed_dir):
    return Feed.objects.create(name="power", interval=10)


def test_log_points_then_read_sees_them_before_the_commit(feed, redis_client):
    service.log_points([(feed.id, 1000, 1.5), (feed.id, 1010, 2.5)])
    assert service.read(feed.id, 1000, 1010, 10) == [[1_000_000, 1.5], [1_010_000, 2.5]]
    assert service.last_value(feed.id) == (1010, 2.5)
    assert service.last_values([feed.id, 999]) == {feed.id: (1010, 2.5)}


def test_commit_all_moves_the_buffer_to_the_files_and_reads_stay_the_same(feed, redis_client):
    service.log_points([(feed.id, 1000 + 10 * i, float(i)) for i in range(30)])
    before = service.read(feed.id, 1000, 1290, 60, average=True)
    result = service.commit_all(now=2_000_000_000)
    assert result["points"] == 30 and result["feeds"] == 1
    assert service.read(feed.id, 1000, 1290, 60, average=True) == before
    assert np.fromfile(service.feed_dir() / f"{feed.id}.dat", "<f4").tolist() == [
        float(i) for i in range(30)
    ]


def test_commit_all_with_nothing_buffered_does_nothing(feed, redis_client):
    assert service.commit_all()["points"] == 0


@pytest.mark.parametrize("bad", [(1, 1000, math.nan), (1, 1000, math.inf), (1, -5, 1.0)])
def test_log_points_refuses_a_bad_point_and_buffers_nothing_of_the_call(feed, redis_client, bad):
    with pytest.raises(phpfina.InvalidValue):
        service.log_points([(feed.id, 1000, 1.0), (feed.id, *bad[1:])])
    assert service.last_value(feed.id) is None
    assert redis_client.keys("feeds:buf:*") == []


def test_too_many_points_is_a_feed_error(feed, redis_client, settings):
    settings.BMS_FEED_MAX_POINTS = 50
    service.log_points([(feed.id, 1000, 1.0)])
    with pytest.raises(phpfina.TooManyPoints):
        service.read(feed.id, 0, 10 * 60, 10)


def test_process_inputs_logs_scaled_values_and_kwh(feed_dir, redis_client):
    power = Feed.objects.create(name="p", interval=10)
    kwh = Feed.objects.create(name="kwh", interval=10)
    steps = [
        {"process": "scale", "arg": 2.0},
        {"process": "log_to_feed", "feed": power.id},
        {"process": "power_to_kwh", "feed": kwh.id},
    ]
    service.process_inputs([("n1:ct1", steps, 1000 + 60 * i, 500.0) for i in range(61)])
    assert service.last_value(power.id) == (4600, 1000.0)
    # 1000 W for 3600 s
    assert service.last_value(kwh.id) == (4600, pytest.approx(1.0))
    service.commit_all(now=2_000_000_000)
    assert service.read(kwh.id, 4600, 4600, 10) == [[4_600_000, pytest.approx(1.0)]]


def test_a_feed_whose_first_points_arrive_during_a_commit_keeps_them(feed, redis_client):
    """Its points arrive (an ingest task on the other worker slot) after commit_all looked up
    the dirty feeds' intervals and before the commit ran: it has no files yet and is not among
    the intervals, and was taken for a deleted feed, its points dropped ("no such feed")."""
    from django.db import connection

    new = Feed.objects.create(name="new", interval=10)
    service.log_points([(feed.id, 1000, 1.0)])

    def first_points_during_the_lookup(execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        if "feeds_feed" in sql and not redis_client.sismember("feeds:dirty", new.id):
            service.log_points([(new.id, 1000, 7.0)])
        return result

    with connection.execute_wrapper(first_points_during_the_lookup):
        first = service.commit_all(now=2_000_000_000)
    assert first["dropped"] == {} and first["feeds"] == 1
    assert service.read(new.id, 1000, 1000, 10) == [[1_000_000, 7.0]]  # still buffered
    assert service.commit_all(now=2_000_000_000)["points"] == 1
    assert np.fromfile(service.feed_dir() / f"{new.id}.dat", "<f4").tolist() == [7.0]
