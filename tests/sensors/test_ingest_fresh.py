"""A drain takes requests as they arrive (issue #29): one drain holds every free shard, blocks
on the shards' bells between passes (always with a timeout), and keeps the stream path's
guarantees: fairness between nodes, each request once, nothing lost when a drain dies. On the
real Redis and database, in this process."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from core.redis import SOCKET_TIMEOUT_S
from feeds.models import Feed
from feeds.store import service
from sensors.ingest import stream as stream
from sensors.ingest.drain import MAX_BLOCK_S, Drain, block_s, drain_shard, lease_s
from sensors.ingest.processing import ingest_rows
from sensors.models import Sensor
from tests.sensors.conftest import make_node
from tests.wait import wait_for

T0 = 1_700_000_000
POWER_W = 3600.0  # every 10 s step adds exactly 0.01 kWh


def rows(first: int, count: int) -> list[list]:
    return [[T0 + 10 * i, {"p": POWER_W}] for i in range(first, first + count)]


def points(feed_id: int) -> list[tuple[int, float]]:
    records = service.get_buffer().pending(feed_id)
    return sorted(zip(records["t"].tolist(), records["v"].tolist(), strict=True))


def node_with(name: str, node_id: int, process: str):
    node, _ = make_node(name, node_id)
    feed = Feed.objects.create(name=process, tag=name, interval=10)
    Sensor.objects.create(node=node, key="p", processes=[{"process": process, "feed": feed.pk}])
    return node, feed


@pytest.fixture
def four_shards(settings):
    settings.BMS_INGEST_SHARDS = 4
    return 4


def test_one_drain_holds_every_free_shard_and_leaves_a_held_one_alone(
    db, redis_client, four_shards
):
    redis_client.set(stream.lease_key(2), "another drain", px=60_000)
    drain = Drain(0)
    assert drain.acquire()
    assert drain.held == [0, 1, 3]
    # The web queues no drain for a shard this one serves.
    assert all(redis_client.get(stream.kick_key(k)) for k in (0, 1, 3))
    assert redis_client.get(stream.kick_key(2)) is None
    assert drain.release() == [0, 1, 3]
    assert all(redis_client.get(stream.lease_key(k)) is None for k in (0, 1, 3))
    assert redis_client.get(stream.lease_key(2)) == b"another drain"


def test_a_drain_queued_for_a_held_shard_is_busy_and_serves_the_free_ones(
    db, redis_client, four_shards
):
    quiet, quiet_feed = node_with("free-shard", 5, "log_to_feed")
    # A node's shard follows its primary key, which the database chooses (PostgreSQL does not
    # reset sequences between tests): the held shard is one the quiet node is not on.
    held = (stream.shard_of(quiet.pk) + 1) % four_shards
    other = held + 4000 * four_shards  # a node id on the held shard
    redis_client.set(stream.lease_key(held), "another drain", px=60_000)
    stream.append(other, rows(0, 1))  # left to its holder
    stream.append(quiet.pk, rows(0, 1))
    report = drain_shard(held)
    assert report.busy and report.requests == 1 and report.shards == 3
    assert len(points(quiet_feed.pk)) == 1
    assert redis_client.xlen(stream.stream_key(other)) == 1


def test_a_flooding_node_does_not_delay_the_other_shards_nodes(
    db, redis_client, settings, four_shards
):
    settings.BMS_INGEST_SLICE = 5
    flood, flood_feed = node_with("flood", 40, "log_to_feed")
    quiet = [node_with(f"quiet{k}", None, "log_to_feed") for k in range(3)]
    for i in range(200):
        stream.append(flood.pk, rows(i, 1))
    for node, _ in quiet:
        stream.append(node.pk, rows(0, 1))  # accepted after the flood's 200
    assert len({stream.shard_of(n.pk) for n, _ in quiet} | {stream.shard_of(flood.pk)}) > 1
    drain = Drain(stream.shard_of(flood.pk))
    assert drain.acquire()
    assert drain.run_pass() == 5 + 3  # the flood's slice, and every other node's request
    assert all(len(points(feed.pk)) == 1 for _, feed in quiet)
    assert len(points(flood_feed.pk)) == 5
    drain.release()


def test_an_append_rings_its_shards_bell_and_the_bell_holds_one_item(db, redis_client):
    for i in range(50):
        stream.append(7, rows(i, 1))
    assert redis_client.llen(stream.bell_key(stream.shard_of(7))) == 1
    assert redis_client.llen(stream.bell_key(stream.shard_of(7) + 1)) == 0


def test_a_request_appended_while_the_drain_works_wakes_its_next_wait(db, redis_client):
    node, feed = node_with("woken", 31, "log_to_feed")
    drain = Drain(stream.shard_of(node.pk))
    assert drain.acquire()
    stream.append(node.pk, rows(0, 1))
    assert drain.run_pass() == 1  # empties the bell before it reads the ready set
    assert not drain.wait(0.01)  # nothing new: the wait ends at its timeout
    stream.append(node.pk, rows(1, 1))  # appended after the pass, before the next wait
    assert drain.wait(60)  # rings at once: no request waits for a timeout
    assert drain.run_pass() == 1
    assert len(points(feed.pk)) == 2 and drain.report.wakes == 1
    drain.release()


def blocked_on_bells(client) -> bool:
    db = str(client.connection_pool.connection_kwargs.get("db", 0))  # other tests' dbs block too
    return any(c.get("cmd") == "blpop" and c.get("db") == db for c in client.client_list())


@pytest.mark.django_db(transaction=True)  # the drain's thread reads the node it is given
def test_a_lingering_drain_takes_a_request_posted_while_it_blocks(redis_client, settings):
    settings.BMS_INGEST_LINGER_S = 3.0  # long enough that the request comes while it blocks
    node, feed = node_with("arrives", 32, "log_to_feed")
    shard = stream.shard_of(node.pk)
    reports = []

    def drain() -> None:
        try:
            reports.append(drain_shard(shard, budget_s=30))
        finally:
            connection.close()  # the thread's own database connection

    worker = threading.Thread(target=drain)
    worker.start()
    # The lease is taken before the first pass: an append in that gap is read by the pass, not
    # woken for. Wait until the drain is blocked on the bells (Redis lists the client in BLPOP).
    wait_for(lambda: blocked_on_bells(redis_client), 10, "the drain to block on its bells")
    stream.append(node.pk, rows(0, 1))
    wait_for(lambda: points(feed.pk), 10, "the point in the buffer")
    worker.join(timeout=30)
    assert not worker.is_alive()
    assert reports[0].requests == 1 and reports[0].wakes >= 1 and not reports[0].stopped


def test_no_wait_blocks_forever_nor_past_the_lease():
    # BLPOP's timeout 0 means forever: never asked for, whatever the caller computed.
    assert block_s(0) > 0 and block_s(-5) > 0
    longest = block_s(float("inf"))
    assert longest <= MAX_BLOCK_S and longest <= lease_s() / 3 and longest < SOCKET_TIMEOUT_S
    assert block_s(0.25) == 0.25


def test_a_wait_with_nothing_appended_returns_at_its_timeout(db, redis_client):
    drain = Drain(0)
    assert drain.acquire()
    assert drain.wait(0.01) is False and drain.report.wakes == 0
    drain.release()
    assert Drain(0).wait(10) is False  # holding no shard: nothing to wait for


def test_a_drain_killed_holding_two_shards_loses_and_doubles_nothing(db, redis_client, settings):
    settings.BMS_INGEST_SHARDS = 2
    a, kwh_a = node_with("killed-a", 1, "power_to_kwh")
    b, kwh_b = node_with("killed-b", 2, "power_to_kwh")
    assert stream.shard_of(a.pk) != stream.shard_of(b.pk)
    for node in (a, b):
        for first in range(0, 12, 3):
            stream.append(node.pk, rows(first, 3))
    dead = Drain(stream.shard_of(a.pk), consumer="dead")
    assert dead.acquire() and len(dead.held) == 2
    taken, _ = dead._read([a.pk, b.pk])  # read: pending to "dead", never acknowledged
    assert len(taken[a.pk]) == 4 and len(taken[b.pk]) == 4
    # It had put a's first request in the buffer (marked done) when it was killed.
    first_id = taken[a.pk][0][0].decode()
    ingest_rows(a.pk, rows(0, 3), entry=first_id)
    for shard in (0, 1):
        redis_client.delete(stream.lease_key(shard))  # its leases ran out

    report = drain_shard(stream.shard_of(b.pk), consumer="heir")
    assert report.claimed == 8 and report.already_done == 1 and report.requests == 7
    for feed in (kwh_a, kwh_b):
        got = points(feed.pk)
        assert len(got) == 12
        assert got[-1][1] == pytest.approx(0.01 * 11, abs=1e-6)  # each request counted once
    assert redis_client.xlen(stream.stream_key(a.pk)) == 0
    assert redis_client.xlen(stream.stream_key(b.pk)) == 0
