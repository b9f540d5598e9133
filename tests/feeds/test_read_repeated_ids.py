"""A feed repeated in emoncms's `ids=` is answered at each of its positions, with that
position's `average=`/`delta=` flags, as emoncms's feed_controller.php does (a result per index
of `ids`). Found by a fresh-eyes check: repeats were dropped, and the per-feed flags then fell
on the wrong feeds (`ids=1,1,2&delta=0,0,1` read feed 2 without its delta)."""

from __future__ import annotations

import pytest
from django.test import Client

from feeds.models import Feed
from feeds.store import service

pytestmark = pytest.mark.django_db
NOW = 1_700_000_000  # reads do not clip to the wall clock: a fixed time
WINDOW = f"start={NOW - 600}&end={NOW - 60}&interval=60"


@pytest.fixture
def feeds(feed_dir, redis_client) -> tuple[Feed, Feed]:
    power = Feed.objects.create(name="power", interval=60, public=True)
    energy = Feed.objects.create(name="energy kWh", interval=60, public=True)
    service.log_points([(power.id, NOW - 600 + 60 * j, 100.0 + j) for j in range(10)])
    service.log_points([(energy.id, NOW - 600 + 60 * j, 5.0 * j) for j in range(10)])
    service.commit_all(now=NOW)
    return power, energy


def _get(query: str):
    response = Client().get(f"/feed/data.json?{query}&{WINDOW}")
    assert response.status_code == 200, response.content
    return response


def test_each_position_of_a_repeated_feed_is_answered_with_its_own_flags(feeds):
    power, energy = feeds
    body = _get(f"ids={power.id},{power.id},{energy.id}&delta=0,1,1").json()
    assert [s["feedid"] for s in body] == [power.id, power.id, energy.id]
    alone = {
        (f.id, d): _get(f"id={f.id}&delta={d}").json() for f in (power, energy) for d in (0, 1)
    }
    assert body[0]["data"] == alone[(power.id, 0)]
    assert body[1]["data"] == alone[(power.id, 1)]
    assert body[2]["data"] == alone[(energy.id, 1)]
    assert [v for _, v in body[2]["data"]][1:] == [5.0] * 8  # kWh used per minute, not the register


def test_a_repeated_feed_is_a_column_of_its_own_in_a_csv(feeds):
    power, energy = feeds
    text = b"".join(_get(f"ids={power.id},{energy.id},{power.id}&csv=1").streaming_content)
    rows = [line.split(",") for line in text.decode().strip().splitlines()]
    assert {len(row) for row in rows} == {4}  # time and three columns
    assert all(row[1] == row[3] for row in rows)


def test_repeats_count_against_the_bound_on_ids(feeds, settings):
    power, _ = feeds
    from feeds.web.query import MAX_IDS

    at_bound = _get("ids=" + ",".join([str(power.id)] * MAX_IDS)).json()
    assert len(at_bound) == MAX_IDS
    over = Client().get(
        "/feed/data.json?ids=" + ",".join([str(power.id)] * (MAX_IDS + 1)) + "&" + WINDOW
    )
    assert over.status_code == 400
    assert "ids" in str(over.json())


def test_our_api_answers_a_repeated_feed_once(feeds, viewer):
    """/api/v1/feeds/data has one set of flags for all its feeds: a repeat adds nothing."""
    power, energy = feeds
    client = Client()
    client.force_login(viewer)
    url = f"/api/v1/feeds/data?ids={power.id},{power.id},{energy.id}&{WINDOW}"
    body = client.get(url).json()
    assert [s["id"] for s in body] == [power.id, energy.id]
