"""The ingest outbox (sensors/publish.py): a batch the broker loses — taken off the queue by a
worker killed before kombu recorded it as unacknowledged — is pushed again; a batch that is
still queued, being worked on, held for a retry or done is not."""

from __future__ import annotations

import json
import time

import pytest

from sensors import ingest_order, publish
from sensors.tasks import ingest_batch
from tests.sensors.conftest import queued_batches

ROWS = [[1_700_000_000, {"power": 12.5}]]
LATER = 10_000  # seconds: every outbox entry is due for a look by then


def outbox_ids(redis_client) -> set[str]:
    return {k.decode() for k in redis_client.hkeys(publish.OUTBOX_KEY)}


def take(redis_client) -> dict:
    """What kombu's BRPOP does: the message leaves the queue (then the worker would be killed)."""
    return json.loads(redis_client.rpop("ingest"))


@pytest.mark.django_db
def test_a_batch_taken_off_the_queue_and_never_acknowledged_is_pushed_again(redis_client):
    publish.publish_ingest_batch(5, ROWS)
    lost = take(redis_client)
    task_id = lost["headers"]["id"]
    assert outbox_ids(redis_client) == {task_id}
    assert publish.requeue_lost(now=time.time()) == {"requeued": 0, "alive": 0, "dropped": 0}
    assert queued_batches(redis_client) == []  # not due yet: a worker may be taking it

    assert publish.requeue_lost(now=time.time() + LATER)["requeued"] == 1
    assert queued_batches(redis_client) == [[5, ROWS]]
    again = take(redis_client)
    assert again["headers"]["id"] == task_id  # the same task: running it twice is safe
    # A fresh delivery tag, so kombu's unacked entries of the two copies never collide.
    assert again["properties"]["delivery_tag"] != lost["properties"]["delivery_tag"]
    assert publish.requeue_lost(now=time.time() + 2 * LATER)["requeued"] == 1  # lost again


@pytest.mark.django_db
def test_a_queued_or_unacknowledged_batch_is_left_alone(redis_client):
    publish.publish_ingest_batch(5, ROWS)  # still in the queue (a backlog)
    publish.publish_ingest_batch(6, ROWS)
    taken = take(redis_client)  # node 5's: a worker has it, recorded in kombu's unacked hash
    redis_client.hset(publish.UNACKED_KEY, taken["properties"]["delivery_tag"], b"[...]")
    report = publish.requeue_lost(now=time.time() + LATER)
    assert report == {"requeued": 0, "alive": 2, "dropped": 0}
    assert queued_batches(redis_client) == [[6, ROWS]]


def hold_as_kombu(redis_client, message: dict, taken_at: float) -> None:
    """What kombu's QoS.append records when a worker takes a message (acks_late)."""
    tag = message["properties"]["delivery_tag"]
    redis_client.zadd(publish.UNACKED_INDEX_KEY, {tag: taken_at})
    redis_client.hset(publish.UNACKED_KEY, tag, b"[...]")


@pytest.mark.django_db
def test_a_batch_held_by_a_worker_since_before_a_redis_restart_is_taken_back(redis_client):
    """With AOF a Redis restart keeps kombu's unacked entry of a batch whose worker lost its
    connection in the restart; kombu would restore it only after its 300 s visibility timeout."""
    started_at = time.time() - redis_client.info("server")["uptime_in_seconds"]
    publish.publish_ingest_batch(5, ROWS)
    publish.publish_ingest_batch(6, ROWS)
    before, after = take(redis_client), take(redis_client)
    hold_as_kombu(redis_client, before, taken_at=started_at - 60)  # before the server started
    hold_as_kombu(redis_client, after, taken_at=started_at + 1)  # since: its worker has it

    report = publish.requeue_lost(now=time.time() + LATER)
    assert report == {"requeued": 1, "alive": 1, "dropped": 0}
    assert queued_batches(redis_client) == [[5, ROWS]]
    tags = {t.decode() for t in redis_client.hkeys(publish.UNACKED_KEY)}
    assert tags == {after["properties"]["delivery_tag"]}  # kombu will not restore it again
    assert (
        redis_client.zscore(publish.UNACKED_INDEX_KEY, before["properties"]["delivery_tag"]) is None
    )


@pytest.mark.django_db
def test_a_done_or_held_batch_is_not_pushed_again(redis_client):
    publish.publish_ingest_batch(5, ROWS)
    publish.publish_ingest_batch(6, ROWS)
    done, held = take(redis_client), take(redis_client)
    ingest_order.finish(done["headers"]["id"], node_id=5)
    publish.hold_batch(held["headers"]["id"], 2 * LATER)  # a retry waiting for its countdown
    assert outbox_ids(redis_client) == {held["headers"]["id"]}
    assert publish.requeue_lost(now=time.time() + LATER) == {
        "requeued": 0,
        "alive": 0,
        "dropped": 0,
    }
    assert publish.requeue_lost(now=time.time() + 3 * LATER)["requeued"] == 1


@pytest.mark.django_db
def test_a_batch_lost_over_and_over_is_dropped_with_an_error(redis_client, caplog):
    publish.publish_ingest_batch(5, ROWS)
    for n in range(publish.MAX_REQUEUES):
        take(redis_client)
        assert publish.requeue_lost(now=time.time() + LATER * (n + 1))["requeued"] == 1
    take(redis_client)
    report = publish.requeue_lost(now=time.time() + LATER * (publish.MAX_REQUEUES + 1))
    assert report["dropped"] == 1
    assert outbox_ids(redis_client) == set()
    assert "dropped" in caplog.text


@pytest.mark.django_db
def test_the_task_takes_its_batch_out_of_the_outbox(redis_client):
    publish.publish_ingest_batch(999_999, ROWS)  # no such node: the task drops it, logged
    message = take(redis_client)
    ingest_batch.apply(args=(999_999, ROWS), task_id=message["headers"]["id"]).get()
    assert outbox_ids(redis_client) == set()
    assert redis_client.zcard(publish.OUTBOX_DUE_KEY) == 0


@pytest.mark.django_db
def test_looks_wait_while_a_long_backlog_is_queued(redis_client, monkeypatch):
    """Searching a long queue inside a script stalls Redis: with a backlog the looks wait."""
    monkeypatch.setattr(publish, "MAX_QUEUE_TO_SCAN", 3)
    publish.publish_ingest_batch(5, ROWS)
    lost = take(redis_client)
    for node in range(6, 10):  # a backlog of 4 in front of the workers
        publish.publish_ingest_batch(node, ROWS)
    report = publish.requeue_lost(now=time.time() + LATER)
    assert report == {"requeued": 0, "alive": 0, "dropped": 0, "deferred": True}
    for node in range(6, 10):  # the backlog is worked through
        ingest_order.finish(take(redis_client)["headers"]["id"], node)
    assert publish.requeue_lost(now=time.time() + LATER)["requeued"] == 1
    assert take(redis_client)["headers"]["id"] == lost["headers"]["id"]
