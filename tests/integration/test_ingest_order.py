"""A node's batch lost by the broker and queued again runs before the node's later batches, so
its kWh is integrated, not skipped as a replay (issue #8: the kill -9 tests). Real worker,
real Redis."""

from __future__ import annotations

import time
import uuid

import pytest

from feeds import service
from feeds.models import Feed
from sensors import cache, publish
from sensors.models import Sensor
from tests.sensors.conftest import make_node

pytestmark = [pytest.mark.integration]

T0 = 1_700_000_000
POWER_W = 3600.0  # every 10 s step adds exactly 0.01 kWh


def rows(first: int, count: int) -> list[list]:
    return [[T0 + 10 * i, {"p": POWER_W}] for i in range(first, first + count)]


def kwh_points(feed_id: int) -> list[tuple[int, float]]:
    records = service.get_buffer().pending(feed_id)
    return sorted(zip(records["t"].tolist(), records["v"].tolist(), strict=True))


def publish_lost(redis_client, node_id: int, batch: list[list]) -> str:
    """What publish_ingest_batch leaves when the worker that took the batch off the queue is
    killed before kombu recorded it: outbox and node order, nothing in the queue. (Publishing
    and then taking it back races the running worker.)"""
    task_id = str(uuid.uuid4())
    now = time.time()
    pipe = redis_client.pipeline(transaction=True)
    pipe.hset(publish.OUTBOX_KEY, task_id, publish.build_message(node_id, batch, task_id))
    pipe.zadd(publish.OUTBOX_DUE_KEY, {task_id: now + publish.lost_after_s()})
    pipe.zadd(publish.pending_key(node_id), {task_id: int(now * 1_000_000)})
    pipe.execute()
    return task_id


def newest(redis_client) -> str:
    """The task id of the batch accepted last."""
    return redis_client.zrange(publish.OUTBOX_DUE_KEY, -1, -1)[0].decode()


def wait_for(predicate, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def test_a_lost_batch_runs_before_the_later_batches_of_its_node(
    transactional_db, celery_worker, redis_client
):
    cache.clear_all()
    node, _ = make_node("ordered", node_id=31)
    kwh = Feed.objects.create(name="kwh", tag="ordered", interval=10)
    Sensor.objects.create(
        node=node, key="p", kind="power", processes=[{"process": "power_to_kwh", "feed": kwh.pk}]
    )
    lost = publish_lost(redis_client, node.pk, rows(0, 6))
    publish.publish_ingest_batch(node.pk, rows(6, 6))

    # The later batch must not run while the older one is pending: it parks.
    assert wait_for(lambda: redis_client.sismember(publish.PARKED_KEY, newest(redis_client)), 10)
    assert not wait_for(lambda: kwh_points(kwh.pk), 2.0), "the later batch ran first"

    # The lost batch is due for a look (the parked one, parked later, a moment after).
    due = redis_client.zscore(publish.OUTBOX_DUE_KEY, lost)
    assert publish.requeue_lost(now=due)["requeued"] == 1
    assert wait_for(lambda: len(kwh_points(kwh.pk)) == 12, 30.0), kwh_points(kwh.pk)
    expected = [(T0 + 10 * i, pytest.approx(0.01 * i, abs=1e-6)) for i in range(12)]
    assert kwh_points(kwh.pk) == expected
    assert wait_for(lambda: not redis_client.keys(publish.PENDING_PREFIX + "*"), 10.0)
    assert redis_client.hlen(publish.OUTBOX_KEY) == 0
    assert redis_client.scard(publish.PARKED_KEY) == 0
