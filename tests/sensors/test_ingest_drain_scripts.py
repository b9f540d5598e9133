"""The drain's two scripts a pass (sensors/ingest/drain.py, #29): _READ (take over or read each
node's slice, with its done mark) and _ACKNOWLEDGE (XACK + XDEL of the pass, then each empty
node leaves its ready set), on the real Redis and database."""

from __future__ import annotations

import pytest
from django.db import DatabaseError

from core.redis import redis_script
from sensors.ingest import drain as drain_module
from sensors.ingest import stream as stream
from sensors.ingest.drain import Drain
from sensors.ingest.processing import ingest_rows
from tests.sensors.test_ingest_stream import kwh_node, logged_node, points, rows


@pytest.fixture
def one_shard(settings):
    settings.BMS_INGEST_SHARDS = 1  # every node in shard 0, drained by one drain


def held_drain(consumer: str | None = None) -> Drain:
    drain = Drain(0, consumer=consumer)
    assert drain.acquire()
    return drain


def sent(drain: Drain) -> list[tuple]:
    """Record the commands the drain's client sends outside pipelines (scripts are EVALSHA)."""
    calls: list[tuple] = []
    execute = drain.client.execute_command

    def recording(*args, **options):
        calls.append(args)
        return execute(*args, **options)

    drain.client.execute_command = recording
    return calls


def test_a_pass_over_many_nodes_acknowledges_and_forgets_exactly_the_right_ones(
    db, redis_client, settings, one_shard
):
    settings.BMS_INGEST_SLICE = 2
    nodes = list(range(1000, 1250))  # more than NODES_PER_READ: two _READ calls
    assert len(nodes) > drain_module.NODES_PER_READ
    more = set(nodes[::7])  # three requests each: one left for the next pass
    for node_id in nodes:
        for i in range(3 if node_id in more else 1):
            stream.append(node_id, rows(i, 1))
    redis_client.sadd(stream.ready_key(0), 999)  # named ready, no stream at all: forgotten
    drain = held_drain()
    calls = sent(drain)

    assert drain.run_pass() == len(nodes) + len(more)
    assert drain.full_slices == len(more)
    left = {int(n) for n in redis_client.smembers(stream.ready_key(0))}
    assert left == more
    for node_id in nodes:
        key = stream.stream_key(node_id)
        assert redis_client.xlen(key) == (1 if node_id in more else 0)
        assert redis_client.xpending(key, stream.GROUP)["pending"] == 0
    # Per pass: a _READ call per NODES_PER_READ nodes and one _ACKNOWLEDGE; no command a node.
    shas = [args[1] for args in calls if args[0] == "EVALSHA"]
    assert shas.count(redis_script(drain_module._READ).sha) == 2
    assert shas.count(redis_script(drain_module._ACKNOWLEDGE).sha) == 1
    per_node = {"XAUTOCLAIM", "XREADGROUP", "XACK", "XDEL", "XGROUP CREATE"}
    assert not [args for args in calls if args[0] in per_node]
    assert not [args for args in calls if str(args[-1]).startswith(stream.DONE_PREFIX)]

    assert drain.run_pass() == len(more)  # the rest, then every node is forgotten
    assert not redis_client.smembers(stream.ready_key(0))
    drain.release()


def test_acknowledgements_are_cut_at_the_bound_of_a_call(db, redis_client, settings, one_shard):
    # Past the bound of an XACK/XDEL call, and past what one unpack in Lua holds (about 8,000).
    over = 8001
    assert over > drain_module.ACK_IDS_PER_CALL
    settings.BMS_INGEST_SLICE = over
    node, feed = logged_node("big-slice", 50)
    for i in range(over + 1):
        stream.append(node.pk, rows(i, 1))
    drain = held_drain()

    assert drain.run_pass() == over
    key = stream.stream_key(node.pk)
    assert redis_client.xlen(key) == 1  # the one beyond the slice, waiting
    assert redis_client.xpending(key, stream.GROUP)["pending"] == 0
    assert redis_client.smembers(stream.ready_key(0)) == {str(node.pk).encode()}
    assert drain.run_pass() == 1
    assert redis_client.xlen(key) == 0 and not redis_client.smembers(stream.ready_key(0))
    assert len(points(feed.pk)) == over + 1
    drain.release()


def test_acknowledging_many_nodes_in_more_than_one_call(
    db, redis_client, settings, one_shard, monkeypatch
):
    monkeypatch.setattr(drain_module, "ACK_NODES_PER_CALL", 3)
    nodes = list(range(2000, 2008))
    for node_id in nodes:
        stream.append(node_id, rows(0, 1))
    drain = held_drain()
    calls = sent(drain)
    assert drain.run_pass() == len(nodes)
    shas = [args[1] for args in calls if args[0] == "EVALSHA"]
    assert shas.count(redis_script(drain_module._ACKNOWLEDGE).sha) == 3  # 3 + 3 + 2 nodes
    assert not redis_client.smembers(stream.ready_key(0))
    assert not any(redis_client.xlen(stream.stream_key(n)) for n in nodes)
    drain.release()


def test_a_pass_that_fails_acknowledges_what_it_did_and_forgets_nothing(
    db, redis_client, one_shard, monkeypatch
):
    first, first_feed = logged_node("done-first", 51)
    second, _ = logged_node("fails-second", 52)
    stream.append(first.pk, rows(0, 1))
    stream.append(second.pk, rows(0, 1))
    monkeypatch.setattr(drain_module, "TOGETHER_VALUES", 0)  # each node alone, in turn
    drain = held_drain()
    process = drain._process

    def failing_on_the_second(node_id, entries, done):
        if node_id == second.pk:
            raise DatabaseError("the database went away")
        return process(node_id, entries, done)

    monkeypatch.setattr(drain, "_process", failing_on_the_second)
    with pytest.raises(DatabaseError):
        drain.run_pass()
    done_key = stream.stream_key(first.pk)
    assert redis_client.xlen(done_key) == 0  # acknowledged and deleted
    assert redis_client.xpending(done_key, stream.GROUP)["pending"] == 0
    assert len(points(first_feed.pk)) == 1
    # Left pending for the next drain, and both still named ready (no forget on this path).
    assert redis_client.xpending(stream.stream_key(second.pk), stream.GROUP)["pending"] == 1
    assert redis_client.smembers(stream.ready_key(0)) == {
        str(first.pk).encode(),
        str(second.pk).encode(),
    }
    drain.release()


def test_taken_over_entries_come_first_and_are_processed_once(db, redis_client, one_shard):
    a, kwh_a = kwh_node("taken-a", 53)
    b, kwh_b = kwh_node("fresh-b", 54)
    for first in range(0, 9, 3):
        stream.append(a.pk, rows(first, 3))
    dead = held_drain("dead")
    taken, marks = dead._read([a.pk])  # pending to "dead", never acknowledged
    assert len(taken[a.pk]) == 3 and marks[a.pk] is None
    ingest_rows(a.pk, rows(0, 3), entry=taken[a.pk][0][0].decode())  # done, then killed
    redis_client.delete(stream.lease_key(0))  # its lease ran out
    stream.append(a.pk, rows(9, 3))  # newer than the pending ones: waits for the next pass
    stream.append(b.pk, rows(0, 3))

    heir = held_drain("heir")
    assert heir.run_pass() == 4  # a's three pending (one done already), b's new one
    assert heir.report.claimed == 3 and heir.report.already_done == 1
    assert heir.report.requests == 3
    assert redis_client.xlen(stream.stream_key(a.pk)) == 1
    assert heir.run_pass() == 1  # a's newer request
    assert len(points(kwh_a.pk)) == 12 and len(points(kwh_b.pk)) == 3
    assert points(kwh_a.pk)[-1][1] == pytest.approx(0.01 * 11, abs=1e-6)  # each counted once
    assert not redis_client.smembers(stream.ready_key(0))
    heir.release()


def test_deleted_pending_entries_are_skipped_and_new_ones_read(db, redis_client, one_shard):
    node, feed = logged_node("deleted", 55)
    stream.append(node.pk, rows(0, 1))
    stream.append(node.pk, rows(1, 1))
    dead = held_drain("dead")
    taken, _ = dead._read([node.pk])
    redis_client.xdel(stream.stream_key(node.pk), *(e for e, _ in taken[node.pk]))
    redis_client.delete(stream.lease_key(0))
    stream.append(node.pk, rows(2, 1))

    heir = held_drain("heir")
    assert heir.run_pass() == 1 and heir.report.claimed == 0
    assert [t for t, _ in points(feed.pk)] == [rows(2, 1)[0][0]]
    heir.release()


def test_pending_entries_behind_many_deleted_ones_still_come_before_new_ones(
    db, redis_client, settings, one_shard
):
    # XAUTOCLAIM counts the deleted entries it drops from the pending list against its COUNT:
    # with a slice of 1, eleven deleted ones come before the twelfth, which must still be
    # processed before a newer request.
    settings.BMS_INGEST_SLICE = 12
    node, feed = logged_node("hidden", 58)
    for i in range(12):
        stream.append(node.pk, rows(i, 1))
    dead = held_drain("dead")
    taken, _ = dead._read([node.pk])
    redis_client.xdel(stream.stream_key(node.pk), *(e for e, _ in taken[node.pk][:11]))
    redis_client.delete(stream.lease_key(0))
    stream.append(node.pk, rows(12, 1))
    settings.BMS_INGEST_SLICE = 1

    heir = held_drain("heir")
    passes = [heir.run_pass() for _ in range(13)]
    assert passes == [0] * 11 + [1, 1]  # a deleted one dropped a pass; nothing new read meanwhile
    assert heir.report.claimed == 1
    assert [t for t, _ in points(feed.pk)] == [rows(11, 1)[0][0], rows(12, 1)[0][0]]
    heir.release()


def test_an_entry_without_its_field_is_dropped(db, redis_client, one_shard):
    node, feed = logged_node("no-field", 56)
    redis_client.xadd(stream.stream_key(node.pk), {"other": b"[]"})
    redis_client.sadd(stream.ready_key(0), node.pk)
    stream.append(node.pk, rows(0, 1))
    drain = held_drain()
    assert drain.run_pass() == 2
    assert drain.report.dropped == 1 and len(points(feed.pk)) == 1
    drain.release()


@pytest.mark.parametrize("lost", ["stream", "group"])
def test_a_lost_group_is_made_again_and_its_requests_read_in_the_same_pass(
    db, redis_client, one_shard, lost
):
    node, kwh = kwh_node("restarted", 57)
    stream.append(node.pk, rows(0, 3))
    drain = held_drain()
    assert drain.run_pass() == 1
    key = stream.stream_key(node.pk)
    if lost == "stream":
        redis_client.delete(key)  # a Redis restarted without AOF: the stream and group gone
        stream.append(node.pk, rows(3, 3))  # the web's XADD makes a stream with no group
    else:
        stream.append(node.pk, rows(3, 3))
        redis_client.xgroup_destroy(key, stream.GROUP)  # the stream kept, its group not
    assert drain.run_pass() == 1
    assert redis_client.xinfo_groups(key)[0]["name"] == stream.GROUP.encode()
    assert redis_client.xlen(key) == 0 and not redis_client.smembers(stream.ready_key(0))
    assert len(points(kwh.pk)) == 6
    assert points(kwh.pk)[-1][1] == pytest.approx(0.01 * 5, abs=1e-6)
    drain.release()
