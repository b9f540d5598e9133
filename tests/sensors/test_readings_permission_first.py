"""POST /api/v1/readings: a key naming another node is refused for the node (403) before any of
its values are judged, so a bad value cannot hide the permission answer (#25)."""

from __future__ import annotations

import json

import pytest

from tests.sensors.conftest import make_node, queued_batches


def _post(client, body, key):
    return client.post(
        "/api/v1/readings",
        json.dumps(body),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {key}",
    )


@pytest.mark.parametrize("value", ["warm", None, [1], {"x": 1}])
def test_a_bad_value_for_another_node_is_403_naming_the_node(client, db, redis_client, value):
    _, key = make_node("emontx1", node_id=10)
    make_node("emontx2", node_id=11)
    r = _post(client, {"node": "emontx2", "values": {"t": value}}, key)
    assert r.status_code == 403, r.content
    assert r.json()["field"] == "node"
    assert queued_batches(redis_client) == []


def test_a_later_row_for_another_node_wins_over_an_earlier_bad_value(client, db, redis_client):
    _, key = make_node("emontx1", node_id=10)
    body = [{"node": "emontx1", "values": {"t": "warm"}}, {"node": 11, "values": {"t": 1}}]
    r = _post(client, body, key)
    assert r.status_code == 403, r.content
    assert (r.json()["field"], r.json()["row"]) == ("node", 1)


def test_a_bad_value_for_its_own_node_is_still_400_naming_the_value(client, db, redis_client):
    _, key = make_node("emontx1", node_id=10)
    r = _post(client, {"node": "emontx1", "values": {"t": "warm"}}, key)
    assert r.status_code == 400, r.content
    assert r.json()["field"] == "values.t"
