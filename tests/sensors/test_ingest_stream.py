"""Ingest on Redis Streams: the web's append (sensors/ingest/stream.py) and the
worker's drain (sensors/ingest/drain.py), on the real Redis and database, in this process."""

from __future__ import annotations

import pytest

from alarms.models import Alarm
from feeds.models import Feed
from feeds.store import service
from sensors.ingest import stream as stream
from sensors.ingest.drain import Drain, drain_shard
from sensors.ingest.processing import ingest_rows
from sensors.models import Sensor
from sensors.tasks import kick_ingest_drains
from tests.sensors.conftest import make_node, queued_batches

T0 = 1_700_000_000
POWER_W = 3600.0  # every 10 s step adds exactly 0.01 kWh


def rows(first: int, count: int, key: str = "p") -> list[list]:
    return [[T0 + 10 * i, {key: POWER_W}] for i in range(first, first + count)]


def points(feed_id: int) -> list[tuple[int, float]]:
    records = service.get_buffer().pending(feed_id)
    return sorted(zip(records["t"].tolist(), records["v"].tolist(), strict=True))


def drain_tasks(redis_client) -> int:
    """drain_ingest_shard messages waiting in Celery's ingest queue."""
    return sum(b"drain_ingest_shard" in m for m in redis_client.lrange("ingest", 0, -1))


def kwh_node(name: str, node_id: int):
    node, _ = make_node(name, node_id)
    kwh = Feed.objects.create(name="kwh", tag=name, interval=10)
    Sensor.objects.create(
        node=node, key="p", kind="power", processes=[{"process": "power_to_kwh", "feed": kwh.pk}]
    )
    return node, kwh


def logged_node(name: str, node_id: int):
    node, _ = make_node(name, node_id)
    feed = Feed.objects.create(name="p", tag=name, interval=10)
    Sensor.objects.create(
        node=node, key="p", processes=[{"process": "log_to_feed", "feed": feed.pk}]
    )
    return node, feed


def test_append_stores_in_order_and_kicks_one_drain_per_shard(db, redis_client):
    stream.append(7, rows(0, 1))
    stream.append(7, rows(1, 2))
    stream.append(7 + stream.shards(), rows(3, 1))  # same shard, other node
    waiting = queued_batches(redis_client)
    assert [rows_ for node, rows_ in waiting if node == 7] == [rows(0, 1), rows(1, 2)]  # in order
    assert [rows_ for node, rows_ in waiting if node != 7] == [rows(3, 1)]
    shard = stream.shard_of(7)
    assert redis_client.smembers(stream.ready_key(shard)) == {
        b"7",
        str(7 + stream.shards()).encode(),
    }
    assert drain_tasks(redis_client) == 1  # the flag was free once: one task for three requests
    assert 0 < redis_client.ttl(stream.kick_key(shard)) <= stream.KICK_TTL_S


def test_a_drain_processes_a_node_in_order_then_acknowledges_and_forgets_it(db, redis_client):
    node, kwh = kwh_node("ordered", 31)
    for first in range(0, 30, 6):
        stream.append(node.pk, rows(first, 6))
    report = drain_shard(stream.shard_of(node.pk))
    assert report.requests == 5 and report.rows == 30 and report.dropped == 0
    got = points(kwh.pk)
    assert len(got) == 30
    # In order: every step integrated, none skipped as a replay.
    assert got[-1][1] == pytest.approx(0.01 * 29, abs=1e-6)
    assert redis_client.xlen(stream.stream_key(node.pk)) == 0
    assert redis_client.xpending(stream.stream_key(node.pk), stream.GROUP)["pending"] == 0
    assert not redis_client.smembers(stream.ready_key(stream.shard_of(node.pk)))
    assert redis_client.get(stream.lease_key(stream.shard_of(node.pk))) is None
    assert redis_client.get(stream.kick_key(stream.shard_of(node.pk))) is None


def test_a_flooding_node_does_not_delay_another_by_more_than_one_pass(db, redis_client, settings):
    settings.BMS_INGEST_SLICE = 5
    settings.BMS_INGEST_SHARDS = 1  # both nodes in one shard, drained by one drain
    flood, flood_feed = logged_node("flood", 40)
    quiet, quiet_feed = logged_node("quiet", 41)
    for i in range(200):
        stream.append(flood.pk, rows(i, 1))
    stream.append(quiet.pk, rows(0, 1))  # accepted after 200 requests of the flood
    drain = Drain(stream.shard_of(flood.pk))
    assert drain.acquire()
    assert drain.run_pass() == 6  # the bounded slice of the flood, and the quiet node's request
    assert len(points(quiet_feed.pk)) == 1
    assert len(points(flood_feed.pk)) == 5
    assert redis_client.xlen(stream.stream_key(flood.pk)) == 195
    drain.release()


def test_a_killed_consumers_requests_are_taken_over_and_counted_once(db, redis_client):
    node, kwh = kwh_node("taken-over", 32)
    for first in range(0, 12, 3):
        stream.append(node.pk, rows(first, 3))
    shard = stream.shard_of(node.pk)
    dead = Drain(shard, consumer="dead")
    assert dead.acquire()
    taken = dead._read([node.pk])[0][node.pk]  # read: pending to "dead", never acknowledged
    assert len(taken) == 4
    # It had processed the first request when it was killed (points and the entry's mark in
    # the buffer, no XACK): the mark, not the readings' times, tells the heir it is done.
    first_entry = taken[0][0].decode() if isinstance(taken[0][0], bytes) else str(taken[0][0])
    ingest_rows(node.pk, rows(0, 3), entry=first_entry)
    redis_client.delete(stream.lease_key(shard))  # its lease ran out

    report = drain_shard(shard, consumer="heir")
    assert report.claimed == 4 and report.already_done == 1 and report.requests == 3
    got = points(kwh.pk)
    assert len(got) == 12
    assert got[-1][1] == pytest.approx(
        0.01 * 11, abs=1e-6
    )  # the replayed request not counted twice
    assert redis_client.xlen(stream.stream_key(node.pk)) == 0


def test_a_held_shard_is_left_to_its_drain(db, redis_client):
    stream.append(33, rows(0, 1))
    shard = stream.shard_of(33)
    redis_client.set(stream.lease_key(shard), "another drain", px=60_000)
    report = drain_shard(shard)
    assert report.busy and report.requests == 0
    assert redis_client.xlen(stream.stream_key(33)) == 1


def test_an_unreadable_entry_is_dropped_and_the_rest_processed(db, redis_client):
    node, feed = logged_node("garbled", 34)
    redis_client.xadd(stream.stream_key(node.pk), {stream.FIELD: b"not json"})
    redis_client.sadd(stream.ready_key(stream.shard_of(node.pk)), node.pk)
    stream.append(node.pk, rows(0, 2))
    report = drain_shard(stream.shard_of(node.pk))
    assert report.dropped == 1 and report.requests == 2
    assert len(points(feed.pk)) == 2


def test_the_drain_hands_over_when_its_budget_is_spent(db, redis_client, settings):
    settings.BMS_INGEST_SLICE = 1
    node, feed = logged_node("budget", 35)
    for i in range(3):
        stream.append(node.pk, rows(i, 1))
    redis_client.delete("ingest")
    report = drain_shard(stream.shard_of(node.pk), budget_s=0.0)
    assert report.stopped == "budget" and report.requests == 0
    assert drain_tasks(redis_client) == 1  # a fresh drain queued for the rest


def test_beat_kicks_unheld_shards_and_raises_the_backlog_alarm_at_its_bound(
    db, redis_client, settings
):
    settings.BMS_INGEST_BACKLOG_ALARM = 3
    stream.append(36, rows(0, 1))
    stream.append(37, rows(0, 1))
    redis_client.set(stream.lease_key(stream.shard_of(37)), "busy", px=60_000)
    redis_client.delete("ingest")
    report = kick_ingest_drains()
    assert report == {"kicked": [stream.shard_of(36)], "backlog": 2}
    assert drain_tasks(redis_client) == 1
    assert not Alarm.objects.filter(key="ingest-backlog").exists()  # 2: at most the bound

    stream.append(36, rows(1, 1))
    stream.append(36, rows(2, 1))  # 4 > 3
    kick_ingest_drains()
    assert Alarm.objects.get(key="ingest-backlog", cleared_at__isnull=True)
    redis_client.delete(stream.lease_key(stream.shard_of(37)))
    drain_shard(stream.shard_of(36))
    drain_shard(stream.shard_of(37))
    assert kick_ingest_drains()["backlog"] == 0
    assert not Alarm.objects.filter(key="ingest-backlog", cleared_at__isnull=True).exists()
