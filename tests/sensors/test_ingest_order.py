"""Per-node order of ingest batches (sensors/ingest_order.py), on the real Redis.

A node's batch parks while an older batch of the node is pending and is pushed to the front
of the queue when that batch is done; other nodes' batches never park; the wait is bounded,
a parked batch is never taken for poison, and nothing is left behind.
"""

from __future__ import annotations

import json
import time

import pytest

from sensors import ingest_order, publish
from tests.sensors.test_publish_outbox import LATER, ROWS, take


def queued_ids(redis_client) -> list[str]:
    """Task ids of the queued batches, in the order workers take them (oldest first)."""
    return [json.loads(m)["headers"]["id"] for m in reversed(redis_client.lrange("ingest", 0, -1))]


def publish_batches(redis_client, *nodes: int) -> list[str]:
    """One batch per node given, in that order; their task ids."""
    for node in nodes:
        publish.publish_ingest_batch(node, ROWS)
    return queued_ids(redis_client)[-len(nodes) :]


def parked(redis_client) -> set[str]:
    return {m.decode() for m in redis_client.smembers(publish.PARKED_KEY)}


@pytest.mark.django_db
def test_a_batch_parks_behind_an_older_batch_of_its_own_node_only(redis_client):
    first_5, only_6, second_5 = publish_batches(redis_client, 5, 6, 5)
    assert ingest_order.park_if_waiting(5, first_5) is None
    assert ingest_order.park_if_waiting(6, only_6) is None  # node 5's batches are not its concern
    age = ingest_order.park_if_waiting(5, second_5)
    assert age is not None and 0 <= age < 5
    assert parked(redis_client) == {second_5}


@pytest.mark.django_db
def test_when_a_batch_is_done_the_next_parked_one_is_pushed_to_the_front(redis_client):
    older, newer, other = publish_batches(redis_client, 5, 5, 7)
    take(redis_client)  # older and newer are being worked on by two processes at once
    take(redis_client)
    assert ingest_order.park_if_waiting(5, newer) is not None
    before = json.loads(redis_client.hget(publish.OUTBOX_KEY, newer))

    ingest_order.finish(older, 5)
    assert queued_ids(redis_client) == [newer, other]  # taken next, ahead of the backlog
    assert parked(redis_client) == set()
    again = json.loads(redis_client.hget(publish.OUTBOX_KEY, newer))
    assert again["properties"]["delivery_tag"] != before["properties"]["delivery_tag"]
    assert ingest_order.park_if_waiting(5, newer) is None  # runs now

    ingest_order.finish(newer, 5)
    ingest_order.finish(other, 7)
    assert redis_client.keys(publish.PENDING_PREFIX + "*") == []  # nothing left behind
    assert redis_client.hlen(publish.OUTBOX_KEY) == 0


@pytest.mark.django_db
def test_a_batch_parked_behind_one_still_queued_is_woken_by_nobody_else(redis_client):
    first, second, third = publish_batches(redis_client, 5, 5, 5)
    assert ingest_order.park_if_waiting(5, third) is not None
    ingest_order.finish(first, 5)  # the next is `second`, not parked: nothing to push
    assert queued_ids(redis_client) == [first, second, third]
    assert parked(redis_client) == {third}
    ingest_order.finish(second, 5)
    assert parked(redis_client) == set()
    assert queued_ids(redis_client)[0] == third


@pytest.mark.django_db
def test_a_batch_not_in_the_order_never_parks(redis_client):
    publish.publish_ingest_batch(5, ROWS)
    assert ingest_order.park_if_waiting(5, "published-by-apply-async") is None
    assert ingest_order.park_if_waiting(5, None) is None


@pytest.mark.django_db
def test_the_wait_is_bounded(redis_client, settings):
    settings.BMS_INGEST_ORDER_HOLD_S = 60
    older, newer = publish_batches(redis_client, 5, 5)
    later = time.time() + 61
    # Past the hold the older batch (still in the outbox: it may yet run) is not waited for.
    assert ingest_order.park_if_waiting(5, newer, now=later) is None
    assert redis_client.zscore(publish.pending_key(5), older) is not None
    # Once it has also left the outbox it is forgotten.
    redis_client.hdel(publish.OUTBOX_KEY, older)
    assert ingest_order.park_if_waiting(5, newer, now=later) is None
    assert redis_client.zscore(publish.pending_key(5), older) is None


@pytest.mark.django_db
def test_a_parked_batch_whose_wake_up_is_lost_is_pushed_again_and_never_poison(redis_client):
    older, newer = publish_batches(redis_client, 5, 5)
    take(redis_client)
    take(redis_client)  # the older batch is lost; the newer one ran and parked
    assert ingest_order.park_if_waiting(5, newer) is not None
    dropped = looks = 0
    while redis_client.hexists(publish.OUTBOX_KEY, older):
        looks += 1
        assert looks <= publish.MAX_REQUEUES + 1
        dropped += publish.requeue_lost(now=time.time() + LATER * looks)["dropped"]
        redis_client.delete("ingest")  # both pushed again; both lost again
        if redis_client.hexists(publish.OUTBOX_KEY, older):
            assert ingest_order.park_if_waiting(5, newer) is not None  # looks, parks again
    # The older one was counted each time and finally dropped as poison; the newer one,
    # only ever waiting, was not, and runs now that nothing older is pending.
    assert (dropped, looks) == (1, publish.MAX_REQUEUES + 1)
    assert redis_client.hexists(publish.OUTBOX_KEY, newer)
    assert ingest_order.park_if_waiting(5, newer) is None


@pytest.mark.django_db
def test_a_batch_dropped_as_poison_is_no_longer_waited_for(redis_client):
    poison, newer = publish_batches(redis_client, 5, 5)
    redis_client.hset(publish.OUTBOX_REQUEUED_KEY, poison, publish.MAX_REQUEUES)
    take(redis_client)  # the poison batch is taken and never acknowledged...
    take(redis_client)
    ingest_order.finish(newer, 5)  # ...the newer one ran (past the hold, say)
    assert publish.requeue_lost(now=time.time() + LATER)["dropped"] == 1
    assert redis_client.keys(publish.PENDING_PREFIX + "*") == []


def test_the_node_id_is_read_back_from_a_message():
    envelope = json.loads(publish.build_message(42, ROWS))
    assert publish.message_node_id(envelope) == 42


@pytest.mark.django_db
def test_only_nodes_with_pulse_counters_or_accumulators_need_order(redis_client):
    from feeds.models import Feed
    from sensors.models import Sensor
    from sensors.processing import node_needs_order
    from tests.sensors.conftest import make_node

    logging_only, _ = make_node("logs", node_id=40)
    Sensor.objects.create(node=logging_only, key="t", kind="temperature")
    pulses, _ = make_node("pulses", node_id=41)
    Sensor.objects.create(node=pulses, key="gas", kind="pulse")
    energy, _ = make_node("energy", node_id=42)
    kwh = Feed.objects.create(name="kwh", tag="energy")
    Sensor.objects.create(
        node=energy, key="p", kind="power", processes=[{"process": "power_to_kwh", "feed": kwh.pk}]
    )
    assert not node_needs_order(logging_only.pk)
    assert node_needs_order(pulses.pk)
    assert node_needs_order(energy.pk)


@pytest.mark.django_db
def test_a_batch_of_a_logging_only_node_runs_without_waiting(redis_client):
    from sensors.models import Sensor
    from sensors.tasks import ingest_batch
    from tests.sensors.conftest import make_node

    node, _ = make_node("logs", node_id=40)
    Sensor.objects.create(node=node, key="power", kind="power")
    older, newer = publish_batches(redis_client, node.pk, node.pk)
    result = ingest_batch.apply(args=(node.pk, ROWS), task_id=newer).get()
    assert result.get("parked") is None and result["rows"] == 1
    assert parked(redis_client) == set()
