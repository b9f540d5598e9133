"""Requests set aside by the drain (#26): a staff page and API listing them, newest first and
paged; engineers retry one (back onto its node's stream, drained into its feed) or discard one
(after a confirmation), each kept in the node's admin history; viewers only look; bad input
is a 400 naming the field. Real Redis, real drain."""

from __future__ import annotations

import json

import pytest
from django.contrib.admin.models import LogEntry
from django.test import Client

from feeds.models import Feed
from feeds.store import service
from sensors.ingest import aside_review, set_aside, stream
from sensors.ingest.drain import drain_shard
from sensors.models import Node, Sensor

T0 = 1_700_000_000


def _login(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def node(db) -> Node:
    node = Node(name="stuck-tx", node_id=41)
    node.set_new_key()
    node.save()
    feed = Feed.objects.create(name="stuck power", tag="t", interval=10)
    Sensor.objects.create(
        node=node, key="p", processes=[{"process": "log_to_feed", "feed": feed.pk}]
    )
    return node


def set_aside_one(client, node: Node, t: int = T0, why: str = "WRONGTYPE state") -> str:
    """A request set aside by the drain's own code; its entry id."""
    set_aside.move_aside(client, node.pk, [f"{t}000-0"], [[t, {"p": 100.0}]], RuntimeError(why))
    return client.xrevrange(set_aside.ASIDE_PREFIX + str(node.pk), count=1)[0][0].decode()


def _feed_points(node: Node) -> list[tuple[int, float]]:
    feed = Node.objects.get(pk=node.pk).sensors.get(key="p").processes[0]["feed"]
    pending = service.get_buffer().pending(feed)
    return list(zip(pending["t"].tolist(), pending["v"].tolist(), strict=True))


def test_the_page_lists_each_request_with_node_time_error_and_rows(node, redis_client, viewer):
    set_aside_one(redis_client, node, why="WRONGTYPE Operation against a key")
    html = _login(viewer).get("/staff/inputs/set-aside/").content.decode()
    assert "1 set aside" in html and "stuck-tx" in html
    assert "WRONGTYPE Operation against a key" in html and "1 rows, 1 values" in html
    assert "Retry</button>" not in html and "Discard" not in html  # a viewer only looks


def test_an_engineer_retries_one_and_it_is_drained_into_its_feed_and_audited(
    node, redis_client, engineer
):
    entry = set_aside_one(redis_client, node)
    client = _login(engineer)
    page = client.get("/staff/inputs/set-aside/").content.decode()
    assert f"/staff/inputs/set-aside/{node.pk}/{entry}/retry" in page
    r = client.post(f"/staff/inputs/set-aside/{node.pk}/{entry}/retry")
    assert r.status_code == 302
    assert "Nothing set aside." in client.get("/staff/inputs/set-aside/").content.decode()
    assert redis_client.zscore(set_aside.INDEX_KEY, str(node.pk)) is None
    drain_shard(stream.shard_of(node.pk))
    assert _feed_points(node) == [(T0, 100.0)]
    (logged,) = LogEntry.objects.filter(object_id=str(node.pk))
    assert logged.user == engineer and f"Retried request {entry} set aside (1 rows" in str(
        logged.get_change_message()
    )
    # A second click: it is gone, said so, nothing posted twice.
    r = client.post(f"/staff/inputs/set-aside/{node.pk}/{entry}/retry", follow=True)
    assert "no longer set aside" in r.content.decode()
    assert redis_client.xlen(stream.stream_key(node.pk)) == 0


def test_discard_asks_first_then_is_gone_for_good_and_audited(node, redis_client, engineer):
    entry = set_aside_one(redis_client, node)
    client = _login(engineer)
    url = f"/staff/inputs/set-aside/{node.pk}/{entry}/discard"
    confirm = client.get(url).content.decode()
    assert "Discard for good" in confirm and "stuck-tx" in confirm
    assert redis_client.xlen(set_aside.ASIDE_PREFIX + str(node.pk)) == 1  # asking changes nothing
    r = client.post(url)  # without the confirmation
    assert r.status_code == 400 and r.json()["field"] == "confirm"
    assert redis_client.xlen(set_aside.ASIDE_PREFIX + str(node.pk)) == 1
    assert client.post(url, {"confirm": "yes"}).status_code == 302
    assert redis_client.xlen(set_aside.ASIDE_PREFIX + str(node.pk)) == 0
    assert redis_client.xlen(stream.stream_key(node.pk)) == 0  # not posted
    (logged,) = LogEntry.objects.filter(object_id=str(node.pk))
    assert f"Discarded request {entry}" in str(logged.get_change_message())


def test_a_viewer_cannot_retry_or_discard_even_by_hand(node, redis_client, viewer, booker):
    entry = set_aside_one(redis_client, node)
    for user in (viewer, booker):
        client = _login(user)
        assert client.post(f"/staff/inputs/set-aside/{node.pk}/{entry}/retry").status_code == 403
        discard = f"/staff/inputs/set-aside/{node.pk}/{entry}/discard"
        assert client.post(discard, {"confirm": "yes"}).status_code == 403
    assert redis_client.xlen(set_aside.ASIDE_PREFIX + str(node.pk)) == 1


def test_pages_are_newest_first_and_bounded(node, redis_client, viewer):
    count = aside_review.PAGE_SIZE + 3
    for i in range(count):
        set_aside_one(redis_client, node, t=T0 + i, why=f"error number {i:03d}")
    client = _login(viewer)
    first = client.get("/staff/inputs/set-aside/").content.decode()
    assert f"{count} set aside" in first and "Page 1 of 2" in first
    assert "error number 022" in first and "error number 002" not in first
    second = client.get("/staff/inputs/set-aside/?page=2").content.decode()
    assert "error number 002" in second and "error number 003" not in second
    at_bound = client.get(f"/staff/inputs/set-aside/?page={aside_review.MAX_PAGE}")
    assert at_bound.status_code == 200
    for bad in (str(aside_review.MAX_PAGE + 1), "0", "-1", "x", "1e3"):
        r = client.get(f"/staff/inputs/set-aside/?page={bad}")
        assert r.status_code == 400 and r.json()["field"] == "page", bad


def test_a_bad_entry_id_is_a_400_naming_it(node, redis_client, engineer):
    client = _login(engineer)
    for bad in ("x", "1-", "-1", "1-2-3", "9" * 50 + "-0"):
        r = client.post(f"/staff/inputs/set-aside/{node.pk}/{bad}/retry")
        assert r.status_code == 400 and r.json()["field"] == "entry", bad


def test_a_deleted_nodes_requests_go_with_it(
    node, redis_client, viewer, django_capture_on_commit_callbacks
):
    set_aside_one(redis_client, node)
    with django_capture_on_commit_callbacks(execute=True):  # removed once the delete commits
        node.delete()
    assert redis_client.exists(set_aside.ASIDE_PREFIX + str(node.pk)) == 0
    assert "Nothing set aside." in _login(viewer).get("/staff/inputs/set-aside/").content.decode()


def test_the_api_lists_retries_and_discards_as_the_page(
    node, redis_client, engineer_api, viewer_api
):
    first = set_aside_one(redis_client, node, t=T0)
    second = set_aside_one(redis_client, node, t=T0 + 10)
    listed = viewer_api.get("/api/v1/set-aside").json()
    assert listed["count"] == 2 and [r["entry"] for r in listed["results"]] == [second, first]
    assert listed["results"][0] | {"at": 0} == {
        "node": node.pk, "node_name": "stuck-tx", "entry": second, "at": 0,
        "error": "RuntimeError: WRONGTYPE state", "rows": 1, "values": 1,
        "requests": [f"{T0 + 10}000-0"],
    }  # fmt: skip
    assert viewer_api.post(f"/api/v1/set-aside/{node.pk}/{first}/retry").status_code == 403
    r = viewer_api.get("/api/v1/set-aside?page=0")
    assert r.status_code == 400 and "page" in r.json()["fields"]
    assert engineer_api.post(f"/api/v1/set-aside/{node.pk}/{first}/retry").status_code == 200
    assert engineer_api.post(f"/api/v1/set-aside/{node.pk}/{first}/retry").status_code == 404
    r = engineer_api.post(f"/api/v1/set-aside/{node.pk}/{second}/discard", {}, format="json")
    assert r.status_code == 400 and "confirm" in r.json()["fields"]
    r = engineer_api.post(
        f"/api/v1/set-aside/{node.pk}/{second}/discard", {"confirm": True}, format="json"
    )
    assert r.status_code == 200 and r.json()["entry"] == second
    assert viewer_api.get("/api/v1/set-aside").json()["count"] == 0
    rows = [json.loads(f[b"r"]) for _, f in redis_client.xrange(stream.stream_key(node.pk))]
    assert rows == [[[T0, {"p": 100.0}]]]  # the retried one only
    assert LogEntry.objects.filter(object_id=str(node.pk)).count() == 2
