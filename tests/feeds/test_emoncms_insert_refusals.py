"""feed/insert.json and feed/post.json refuse, in the answer, what the commit would refuse
(issue #26: never `ok` and then dropped), by the one rule the commit applies
(feeds/store/phpfina.py plan_points), and deeply nested `data` is a 400 naming it, not a 500
(issue #25)."""

from __future__ import annotations

import json
from datetime import datetime
from zoneinfo import ZoneInfo

import numpy as np
import pytest
from rest_framework.test import APIClient

from core import api_tokens
from feeds.models import Feed
from feeds.store import phpfina, service

pytestmark = pytest.mark.django_db
T0 = int(datetime(2024, 7, 1, 12, tzinfo=ZoneInfo("Europe/London")).timestamp())
PATHS = ["/feed/insert.json", "/feed/post.json"]


@pytest.fixture
def feed(feed_dir, redis_client) -> Feed:
    """A 10 s feed whose file starts at T0 with six slots."""
    feed = Feed.objects.create(name="boiler", tag="plant", interval=10)
    (feed_dir / f"{feed.id}.meta").write_bytes(phpfina.pack_meta(10, T0))
    (feed_dir / f"{feed.id}.dat").write_bytes(np.arange(6, dtype="<f4").tobytes())
    return feed


@pytest.fixture
def key(engineer) -> str:
    return api_tokens.issue(engineer)[1]


def _pending(feed: Feed) -> list[int]:
    return [int(t) for t in service.get_buffer().pending(feed.id)["t"]]


def _refused(response, words: str) -> dict:
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["success"] is False and words in body["message"], body
    return body


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize("path", PATHS)
def test_data_nested_1000_deep_is_a_400_naming_data(feed, key, path):
    """json.loads raised RecursionError (no ValueError): a 500 on the old code."""
    for send in (
        lambda: APIClient().get(path, {"id": feed.id, "apikey": key, "data": _nested(1000)}),
        lambda: APIClient().post(f"{path}?id={feed.id}&apikey={key}", {"data": _nested(1000)}),
    ):
        body = _refused(send(), "nested deeper than")
        assert list(body["fields"]) == ["data"]
    assert _pending(feed) == []


def test_data_depth_at_the_bound(feed, key, settings):
    """BMS_JSON_MAX_DEPTH levels parse (then the point's shape is refused); one more does not."""
    depth = settings.BMS_JSON_MAX_DEPTH
    at = APIClient().get(
        "/feed/insert.json", {"id": feed.id, "apikey": key, "data": _nested(depth)}
    )
    _refused(at, "data[0]: must be [time, value]")
    over = _nested(depth + 1)
    _refused(
        APIClient().get("/feed/insert.json", {"id": feed.id, "apikey": key, "data": over}),
        f"nested deeper than {depth} levels",
    )


@pytest.mark.parametrize("path", PATHS)
def test_a_point_further_before_start_than_a_prepend_may_pad_is_refused_before_ok(feed, key, path):
    """Before: answered with its value, then `refused` at commit. Now: a 400 naming the time."""
    too_old = T0 - phpfina.MAX_PREPEND_S - 10
    response = APIClient().get(path, {"id": feed.id, "apikey": key, "time": too_old, "value": 1})
    body = _refused(response, f"time {too_old} {phpfina.BEFORE_START}")
    assert list(body["fields"]) == ["time"]
    assert _pending(feed) == []


def test_a_batch_with_one_unstorable_point_is_refused_whole_naming_it(feed, key):
    too_old = T0 - phpfina.MAX_PREPEND_S - 10
    data = json.dumps([[T0 + 60, 1.0], [too_old, 2.0]])
    response = APIClient().post(f"/feed/post.json?id={feed.id}&apikey={key}", {"data": data})
    body = _refused(response, f"data[1]: time {too_old} {phpfina.BEFORE_START}")
    assert list(body["fields"]) == ["data"]
    assert _pending(feed) == []


def test_the_earliest_point_a_prepend_may_pad_is_answered_and_committed(feed, key, feed_dir):
    """At the bound: accepted in the answer and kept by the commit (the same rule on both)."""
    earliest = T0 - phpfina.MAX_PREPEND_S
    response = APIClient().get(
        "/feed/insert.json", {"id": feed.id, "apikey": key, "time": earliest, "value": 7}
    )
    assert response.status_code == 200 and response.json() == 7.0
    result = service.commit_all(sync=True)
    assert result["refused"] == {}
    meta, data = phpfina.open_feed(feed_dir, feed.id)
    assert meta.start_time == earliest // 10 * 10 and data[0] == 7.0


def test_a_point_past_the_gap_bound_is_refused_before_ok(feed, key, settings):
    """BMS_FEED_MAX_GAP_SLOTS bounds the NaN padding after the file's end: past it the commit
    refuses the point, so the answer does; at it the point is answered and committed."""
    settings.BMS_FEED_MAX_GAP_SLOTS = 100
    end = T0 + 6 * 10  # the file's next slot
    at, over = end + 100 * 10, end + 101 * 10
    client = APIClient()
    _refused(
        client.get("/feed/insert.json", {"id": feed.id, "apikey": key, "time": over, "value": 1}),
        "gap of more than 100 slots",
    )
    assert _pending(feed) == []
    ok = client.get("/feed/insert.json", {"id": feed.id, "apikey": key, "time": at, "value": 1})
    assert ok.status_code == 200
    assert service.commit_all(sync=True)["refused"] == {}
    assert _pending(feed) == []


def test_plan_points_is_what_write_points_refuses(feed_dir):
    """The pure check and the write agree point for point (one rule, two callers)."""
    phpfina.create(feed_dir, 1, 10)
    phpfina.write_points(feed_dir, 1, 10, [T0], [1.0], now=T0)
    times = np.array([T0 - phpfina.MAX_PREPEND_S - 10, T0 - 100, T0 + 50, T0 + 10**8])
    meta, data = phpfina.open_feed(feed_dir, 1)
    plan = phpfina.plan_points(
        times, np.ones(4), np.zeros(4, bool), meta=meta, npoints=len(data), interval=10,
        now=T0 + 10**9, max_gap_slots=1000,
    )  # fmt: skip
    report = phpfina.write_points(
        feed_dir, 1, 10, times, np.ones(4), now=T0 + 10**9, max_gap_slots=1000
    )
    assert plan.refused == report.refused
    assert [t for t, _ in report.refused] == [times[0], times[3]]
