"""The points of one read are bounded in all, not only per feed, for callers without a staff
role (second red-team round, #25): `ids=` of 9 public feeds at 20,000 points each cost 0.35 s of
CPU and 4 MB per anonymous request. BMS_FEED_MAX_POINTS now bounds the sum over the feeds of
/feed/data.json and /api/v1/feeds/data for them (a 400 naming `interval`, emoncms-shaped on
/feed/); staff keep the per-feed bound. The bound is set small here so that the test reads
little; the counts are asserted, never a duration."""

from __future__ import annotations

import pytest
from django.test import Client

from feeds.models import Feed
from feeds.store import service

pytestmark = pytest.mark.django_db
NOW = 1_700_000_000  # reads do not clip to the wall clock: a fixed time
BOUND = 100
EMONCMS = "/feed/data.json?ids={ids}&start={start}&end={end}&interval=10"
API = "/api/v1/feeds/data?ids={ids}&start={start}&end={end}&interval=10"


@pytest.fixture
def feeds(feed_dir, redis_client, settings) -> list[Feed]:
    settings.BMS_FEED_MAX_POINTS = BOUND
    made = [Feed.objects.create(name=f"pv-{i}", interval=10, public=True) for i in range(3)]
    service.log_points([(f.id, NOW - 400 + 10 * j, float(j)) for f in made for j in range(5)])
    service.commit_all(now=NOW)
    return made


def _url(template: str, feeds: list[Feed], points_each: int) -> str:
    """A window of exactly `points_each` points of each feed (10 s apart)."""
    ids = ",".join(str(f.id) for f in feeds)
    start = NOW - 10 * points_each
    return template.format(ids=ids, start=start, end=start + 10 * (points_each - 1))


def _points(body, template: str) -> list[int]:
    return [len(s["data"]) for s in body]


@pytest.mark.parametrize("template", [EMONCMS, API])
def test_anonymous_reads_are_bounded_in_all_at_the_bound(feeds, template):
    two = feeds[:2]
    at_bound = Client().get(_url(template, two, BOUND // 2))
    assert at_bound.status_code == 200, at_bound.content
    assert _points(at_bound.json(), template) == [BOUND // 2, BOUND // 2]
    over = Client().get(_url(template, two, BOUND // 2 + 1))
    assert over.status_code == 400, over.content
    body = over.json()
    message = str(body)
    assert f"over {BOUND} points in all for the 2 feeds" in message
    assert body["success"] is False and "interval" in body["fields"]
    # each feed alone is within the bound: the per-feed bound is unchanged
    for feed in two:
        assert Client().get(_url(template, [feed], BOUND // 2 + 1)).status_code == 200


@pytest.mark.parametrize("template", [EMONCMS, API])
def test_skipmissing_does_not_let_empty_windows_through_uncounted(feeds, template):
    """Almost every window is empty (5 points written): the windows computed are charged."""
    url = _url(template, feeds[:2], BOUND // 2 + 1) + "&skipmissing=1"
    assert Client().get(url).status_code == 400
    ok = Client().get(_url(template, feeds[:2], BOUND // 2) + "&skipmissing=1")
    assert ok.status_code == 200
    assert _points(ok.json(), template) == [5, 5]  # only the recorded ones are answered


@pytest.mark.parametrize("template", [EMONCMS, API])
def test_staff_keep_the_per_feed_bound(feeds, viewer, template):
    client = Client()
    client.force_login(viewer)
    response = client.get(_url(template, feeds, BOUND))  # 3 x the bound in all
    assert response.status_code == 200, response.content
    assert _points(response.json(), template) == [BOUND] * 3
    # and over it per feed they are refused as before
    assert client.get(_url(template, feeds, BOUND + 1)).status_code == 400


def test_a_csv_keeps_its_own_whole_file_bound(feeds, settings):
    """csv=1 is bounded by BMS_FEED_MAX_CSV_ROWS over the whole file, as before."""
    settings.BMS_FEED_MAX_CSV_ROWS = BOUND
    response = Client().get(_url(EMONCMS, feeds[:2], BOUND // 2) + "&csv=1")
    assert response.status_code == 200
    assert Client().get(_url(EMONCMS, feeds[:2], BOUND // 2 + 1) + "&csv=1").status_code == 400


def test_the_api_refuses_before_reading_any_feed(feeds, monkeypatch):
    """The refusal costs no read: the windows asked are counted from the feeds' intervals."""
    reads: list[int] = []
    real = service.read

    def counted(feed_id, *args, **kwargs):
        reads.append(feed_id)
        return real(feed_id, *args, **kwargs)

    monkeypatch.setattr(service, "read", counted)
    assert Client().get(_url(API, feeds[:2], BOUND // 2 + 1)).status_code == 400
    assert reads == []
    assert Client().get(_url(API, feeds[:2], BOUND // 2)).status_code == 200
    assert reads == [feeds[0].id, feeds[1].id]
