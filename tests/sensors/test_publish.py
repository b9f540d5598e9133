"""The web process's one-LPUSH publish of ingest_batch: the same message as apply_async, and a
clear 503 when Redis cannot take it (a real worker runs one in
tests/integration/test_ingest_publish.py)."""

from __future__ import annotations

import base64
import json

import pytest
from django.test import Client

from sensors.publish import build_message, direct_publish_possible, publish_ingest_batch
from sensors.tasks import ingest_batch
from tests.sensors.conftest import make_node, queued_batches

ROWS = [[1_700_000_000, {"power": 12.5}], [1_700_000_010, {"power": 13.0}]]


def decoded(raw: bytes) -> dict:
    message = json.loads(raw)
    assert message["properties"]["body_encoding"] == "base64"
    message["body"] = json.loads(base64.b64decode(message["body"]))
    return message


# django_db, though no table is used: pytest-django runs db tests before transactional ones,
# so the session's real worker (started by the integration tests) cannot consume the queue
# under these tests.
@pytest.mark.django_db
def test_the_message_is_the_one_apply_async_sends(redis_client):
    assert direct_publish_possible()  # tests run with the broker on the app's Redis
    ingest_batch.apply_async((7, ROWS), argsrepr="", kwargsrepr="")
    celery_made = decoded(redis_client.lpop("ingest"))
    ours = decoded(build_message(7, ROWS))
    # Ids are fresh per message; everything else must match field for field.
    per_message = {"id", "root_id", "origin"}
    assert {k: v for k, v in ours["headers"].items() if k not in per_message} == {
        k: v for k, v in celery_made["headers"].items() if k not in per_message
    }
    assert ours["headers"]["id"] == ours["headers"]["root_id"]
    assert ours["properties"]["correlation_id"] == ours["headers"]["id"]
    for props in (ours["properties"], celery_made["properties"]):
        for key in ("correlation_id", "delivery_tag", "reply_to", "argsrepr", "kwargsrepr"):
            props.pop(key, None)
    assert ours["properties"] == celery_made["properties"]
    assert ours["body"] == celery_made["body"] == [[7, ROWS], {}, ours["body"][2]]
    assert {k: ours[k] for k in ("content-type", "content-encoding")} == {
        k: celery_made[k] for k in ("content-type", "content-encoding")
    }


@pytest.mark.django_db
def test_published_batches_wait_in_the_ingest_queue_in_order(redis_client):
    publish_ingest_batch(3, ROWS[:1])
    publish_ingest_batch(3, ROWS[1:])
    assert queued_batches(redis_client) == [[3, ROWS[:1]], [3, ROWS[1:]]]


@pytest.mark.django_db
def test_broker_down_is_a_503_naming_the_queue(redis_client, settings):
    _node, key = make_node("pub2", node_id=31)
    settings.REDIS_URL = settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"  # nothing listens
    from sensors import node_auth

    node_auth.authenticate(key)  # cached identity: the key check needs no Redis
    response = Client().post(
        "/api/v1/readings",
        json.dumps({"values": {"power": 1}}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {key}",
    )
    assert response.status_code == 503
    assert response.json()["error"] == "ingest queue unavailable, try again"
