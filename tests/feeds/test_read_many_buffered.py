"""A read of several feeds fetches their buffered (not yet committed) points a group of feeds
per Redis round trip (service.overlays, issue #29): a 50-feed /feed/data.json made 50 round
trips, about half its CPU. Each feed must still get its own buffered points, across the groups'
edges, merged with its file as a read of that feed alone merges them; and no more than
OVERLAY_GROUP feeds' buffers are fetched at once, none after a refused feed."""

from __future__ import annotations

import pytest
from django.test import Client

from feeds.models import Feed
from feeds.store import service
from feeds.store.buffer import FeedBuffer

pytestmark = pytest.mark.django_db
NOW = 1_700_000_000  # reads do not clip to the wall clock: a fixed time
EMONCMS = "/feed/data.json?ids={ids}&start={start}&end={end}&interval=10"
API = "/api/v1/feeds/data?ids={ids}&start={start}&end={end}&interval=10"
FEEDS = service.OVERLAY_GROUP * 2 + 3  # three groups, the last one short


@pytest.fixture
def feeds(feed_dir, redis_client) -> list[Feed]:
    made = [Feed.objects.create(name=f"f-{i}", interval=10, public=True) for i in range(FEEDS)]
    # In each file: two points; then in the buffer only: a third point and a new value for the
    # second slot (the buffer wins over the file, as in emoncms's own merge).
    service.log_points(
        [(f.id, NOW - 40 + 10 * j, 1000.0 * i + j) for i, f in enumerate(made) for j in range(2)]
    )
    service.commit_all(now=NOW)
    service.log_points([(f.id, NOW - 30, 1000.0 * i + 50) for i, f in enumerate(made)])
    service.log_points([(f.id, NOW - 20, 1000.0 * i + 2) for i, f in enumerate(made)])
    return made


@pytest.fixture
def fetched(monkeypatch) -> list[list[int]]:
    """The feeds of each pending_many round trip, the real call made."""
    calls: list[list[int]] = []
    real = FeedBuffer.pending_many

    def counting(self, feed_ids):
        calls.append(list(feed_ids))
        return real(self, feed_ids)

    monkeypatch.setattr(FeedBuffer, "pending_many", counting)
    return calls


def _expected(i: int) -> list[float]:
    return [1000.0 * i, 1000.0 * i + 50, 1000.0 * i + 2]


@pytest.mark.parametrize("template", [EMONCMS, API])
def test_each_feed_gets_its_own_buffered_points_in_groups(feeds, fetched, template):
    ids = ",".join(str(f.id) for f in feeds)
    response = Client().get(template.format(ids=ids, start=NOW - 40, end=NOW - 20))
    assert response.status_code == 200, response.content
    body = response.json()
    assert [s.get("feedid", s.get("id")) for s in body] == [f.id for f in feeds]  # emoncms's, ours
    assert [[v for _t, v in s["data"]] for s in body] == [_expected(i) for i in range(FEEDS)]
    # One round trip a group, each group at most OVERLAY_GROUP feeds, every feed once, in order.
    group = service.OVERLAY_GROUP
    assert [len(c) for c in fetched] == [group, group, FEEDS - 2 * group]
    assert [f for c in fetched for f in c] == [f.id for f in feeds]


@pytest.mark.parametrize("template", [EMONCMS, API])
def test_a_feed_read_alone_answers_the_same(feeds, template):
    ids = ",".join(str(f.id) for f in feeds)
    together = Client().get(template.format(ids=ids, start=NOW - 40, end=NOW - 20)).json()
    for feed, series in zip(feeds, together, strict=True):
        alone = Client().get(template.format(ids=feed.id, start=NOW - 40, end=NOW - 20)).json()
        assert alone == [series]


def test_no_group_is_fetched_after_a_refused_feed(feeds, fetched, settings):
    """A feed whose window is over the per-feed bound is refused (400 naming `interval`): the
    groups after it are never fetched."""
    settings.BMS_FEED_MAX_POINTS = 10
    big = Feed.objects.create(name="big", interval=1, public=True)
    ids = [f.id for f in feeds[:3]] + [big.id] + [f.id for f in feeds[3:]]
    url = EMONCMS.format(ids=",".join(map(str, ids)), start=NOW - 40, end=NOW - 20)
    response = Client().get(url.replace("interval=10", "interval=1"))
    assert response.status_code == 400, response.content
    assert "interval" in str(response.json())
    assert fetched == [ids[: service.OVERLAY_GROUP]]
