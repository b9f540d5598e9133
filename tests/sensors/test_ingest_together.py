"""A drain's pass runs its nodes' requests together, in one Redis transaction (issue #29: one
WATCH, one read and one EXEC a pass, where each node cost three round trips), with every
guarantee a node alone had: each request counted once (done marks), a failure handled per node,
*_input steps seeing the pass's values. On the real Redis and database, in this process."""

from __future__ import annotations

import pytest

from feeds.models import Feed
from feeds.processes.run import ProcessRunner
from sensors.ingest import drain as drain_module
from sensors.ingest import stream as stream
from sensors.ingest.drain import Drain
from sensors.ingest.processing import NodeRows, NodeStateWrites, ingest_many
from sensors.models import Sensor
from tests.sensors.conftest import make_node
from tests.sensors.test_ingest_fresh import node_with, points, rows


def kwh_nodes(count: int, prefix: str = "together") -> list:
    return [node_with(f"{prefix}{i}", None, "power_to_kwh") for i in range(count)]


def one_drain() -> Drain:
    drain = Drain(0)
    assert drain.acquire()
    return drain


def count_transactions(monkeypatch) -> list[int]:
    """How many transactions the process runs took (ProcessRunner._run_atomically calls), and
    how many batches each held."""
    sizes: list[int] = []
    real = ProcessRunner._run_atomically

    def counted(self, jobs):
        sizes.append(len(jobs))
        return real(self, jobs)

    monkeypatch.setattr(ProcessRunner, "_run_atomically", counted)
    return sizes


def test_a_pass_runs_every_nodes_requests_in_one_transaction(db, redis_client, monkeypatch):
    made = kwh_nodes(6)
    for node, _ in made:
        stream.append(node.pk, rows(0, 2))
        stream.append(node.pk, rows(2, 2))
    sizes = count_transactions(monkeypatch)
    drain = one_drain()
    assert drain.run_pass() == 12
    assert sizes == [6]
    assert drain.report.requests == 12 and drain.report.rows == 24 and drain.report.dropped == 0
    for node, kwh in made:
        got = points(kwh.pk)
        assert len(got) == 4 and got[-1][1] == pytest.approx(0.03, abs=1e-6)
        assert redis_client.get(stream.done_key(node.pk)) is not None  # each node's mark
        assert redis_client.xlen(stream.stream_key(node.pk)) == 0
    drain.release()


def test_requests_run_together_twice_are_counted_once(db, redis_client):
    # A drain killed after its EXEC and before its XACK: the heir runs the same entries again.
    made = kwh_nodes(3, "twice")
    batches = [NodeRows(node.pk, rows(0, 3), "1-0") for node, _ in made]
    first = ingest_many(batches, NodeStateWrites())
    again = ingest_many(batches, NodeStateWrites())
    assert [r.already_done for r in first] == [False] * 3
    assert [r.already_done for r in again] == [True] * 3
    for _node, kwh in made:
        assert points(kwh.pk)[-1][1] == pytest.approx(0.02, abs=1e-6)


def test_a_node_already_done_among_others_is_acknowledged_and_not_counted_again(db, redis_client):
    (done_node, done_kwh), (new_node, new_kwh) = kwh_nodes(2, "mixed")
    stream.append(done_node.pk, rows(0, 3))
    stream.append(new_node.pk, rows(0, 3))
    entry = redis_client.xrange(stream.stream_key(done_node.pk))[0][0].decode()
    ingest_many([NodeRows(done_node.pk, rows(0, 3), entry)], NodeStateWrites())  # then killed
    drain = one_drain()
    assert drain.run_pass() == 2
    assert drain.report.already_done == 1 and drain.report.requests == 1
    assert points(done_kwh.pk)[-1][1] == pytest.approx(0.02, abs=1e-6)
    assert points(new_kwh.pk)[-1][1] == pytest.approx(0.02, abs=1e-6)
    assert redis_client.xlen(stream.stream_key(done_node.pk)) == 0
    drain.release()


def test_when_the_transaction_fails_each_node_runs_on_its_own(db, redis_client, monkeypatch):
    made = kwh_nodes(4, "fallback")
    for node, _ in made:
        stream.append(node.pk, rows(0, 3))

    def broken(self, calls):
        raise RuntimeError("a step the batch could not run")

    monkeypatch.setattr(ProcessRunner, "run_many", broken)
    drain = one_drain()
    assert drain.run_pass() == 4
    assert drain.report.requests == 4 and drain.report.dropped == 0
    for _node, kwh in made:  # each alone, each counted once
        assert points(kwh.pk)[-1][1] == pytest.approx(0.02, abs=1e-6)
    drain.release()


def test_a_node_whose_steps_read_another_input_sees_the_passs_value(db, redis_client):
    # add_input reads another node's input: it runs after the nodes run together, once their
    # last values are written, whichever node id comes first.
    reader, _ = make_node("reader", None)
    source, _ = make_node("source", None)
    assert reader.pk < source.pk
    source_input = Sensor.objects.create(node=source, key="p", processes=[])
    total = Feed.objects.create(name="sum", tag="reader", interval=10)
    Sensor.objects.create(
        node=reader,
        key="p",
        processes=[
            {"process": "add_input", "input": source_input.pk},
            {"process": "log_to_feed", "feed": total.pk},
        ],
    )
    stream.append(source.pk, [[rows(0, 1)[0][0], {"p": 100.0}]])
    stream.append(reader.pk, [[rows(0, 1)[0][0], {"p": 1.0}]])
    drain = one_drain()
    assert drain.run_pass() == 2
    assert points(total.pk) == [(rows(0, 1)[0][0], 101.0)]
    drain.release()


def test_nodes_are_grouped_by_values_and_a_large_one_runs_alone(db, redis_client, monkeypatch):
    monkeypatch.setattr(drain_module, "TOGETHER_VALUES", 10)
    many = [[rows(0, 1)[0][0], {f"k{i}": 1.0 for i in range(11)}]]  # 11 values: over the bound
    parsed = {
        1: [(b"1-0", rows(0, 4))],  # 4 values
        2: [(b"1-0", rows(0, 4))],  # 4: still 8
        3: [(b"1-0", rows(0, 4)), (b"2-0", None)],  # 4 more would be 12: a new group
        4: [(b"1-0", many)],
        5: [(b"1-0", rows(0, 10))],  # exactly the bound: a group of its own
    }
    drain = Drain(0)
    assert drain._together(sorted(parsed), parsed) == [[1, 2], [3], [5]]
    monkeypatch.setattr(drain_module, "CHUNK_ROWS", 4)  # a chunk's rows or more: alone
    assert drain._together(sorted(parsed), parsed) == []


def test_a_node_over_the_bound_runs_alone_and_all_are_counted(db, redis_client, monkeypatch):
    monkeypatch.setattr(drain_module, "TOGETHER_VALUES", 4)
    made = kwh_nodes(3, "bound")
    for node, _ in made:
        stream.append(node.pk, rows(0, 2))  # 2 values each: two fit a transaction
    big, big_kwh = node_with("bound-big", None, "power_to_kwh")
    stream.append(big.pk, rows(0, 5))  # 5 values: over the bound, alone
    sizes = count_transactions(monkeypatch)
    drain = one_drain()
    assert drain.run_pass() == 4
    assert sizes == [2, 1, 1]  # the groups first, then the node alone
    for _node, kwh in made:
        assert points(kwh.pk)[-1][1] == pytest.approx(0.01, abs=1e-6)
    assert points(big_kwh.pk)[-1][1] == pytest.approx(0.04, abs=1e-6)
    drain.release()
