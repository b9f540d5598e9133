"""log_to_feed_join: the straight line over a gap is visible to reads before the commit, the
same as after it (wave-1 reads showed the gap until the commit)."""

from __future__ import annotations

import pytest

from feeds.models import Feed
from feeds.store import service

pytestmark = pytest.mark.django_db

T0 = 1_000_000


@pytest.fixture(autouse=True)
def _no_backfill_bound(settings):
    # These tests write synthetic times (1970, 2001) and commit with a far later `now`: the
    # backfill bound (a new feed starts at most BMS_FEED_MAX_BACKFILL_DAYS before now) would
    # refuse them. It has its own tests in test_padding_bounds.py.
    settings.BMS_FEED_MAX_BACKFILL_DAYS = 100_000


@pytest.fixture
def feed(feed_dir):
    return Feed.objects.create(name="energy", interval=10)


def join(feed_id: int, t: int, value: float) -> None:
    service.get_buffer().add([(feed_id, t, value, True)])


def reads(feed_id: int) -> list:
    return [
        service.read(feed_id, T0 - 20, T0 + 400, 10),
        service.read(feed_id, T0 + 100, T0 + 150, 10),  # inside a gap, no buffered point in it
        service.read(feed_id, T0, T0 + 400, 60, average=True),
        service.read(feed_id, T0, T0 + 400, 60, delta=True),
    ]


def test_a_joined_gap_reads_the_same_before_and_after_the_commit(feed, redis_client):
    join(feed.id, T0, 1.0)
    join(feed.id, T0 + 200, 3.0)  # 19 empty slots before it: a straight line 1 -> 3
    service.log_points([(feed.id, T0 + 250, 9.0)])  # no join: its gap stays empty
    join(feed.id, T0 + 300, 4.0)
    before = reads(feed.id)
    assert [v for _t, v in before[0][2:23]] == pytest.approx([1.0 + 0.1 * i for i in range(21)])
    assert before[0][26][1] is None and before[0][27][1] == 9.0  # T0+240, T0+250
    assert before[1][0][1] == pytest.approx(2.0)
    service.commit_all(now=2_000_000_000)
    assert_same(reads(feed.id), before)


def assert_same(after: list, before: list) -> None:
    """Slot values exactly; window averages to float32 precision (summed in another order)."""
    for got, want in zip(after, before, strict=True):
        assert [t for t, _v in got] == [t for t, _v in want]
        assert [v for _t, v in got] == [pytest.approx(v, rel=1e-6) if v else v for _t, v in want]
    assert after[0] == before[0] and after[1] == before[1]


def test_a_join_continues_from_the_committed_file(feed, redis_client):
    join(feed.id, T0, 10.0)
    service.commit_all(now=2_000_000_000)
    join(feed.id, T0 + 100, 20.0)
    before = reads(feed.id)
    assert before[0][7][1] == pytest.approx(15.0)  # T0+50, half way along the line
    service.commit_all(now=2_000_000_000)
    assert_same(reads(feed.id), before)


def test_a_join_rewriting_committed_slots_fills_nothing(feed, redis_client):
    service.log_points([(feed.id, T0 + 10 * i, float(i)) for i in range(20)])
    service.commit_all(now=2_000_000_000)
    join(feed.id, T0 + 50, 100.0)  # inside the file: rewritten in place, as the commit does
    before = reads(feed.id)
    assert before[0][7][1] == 100.0
    service.commit_all(now=2_000_000_000)
    assert_same(reads(feed.id), before)
