"""A drain that falls behind hands shards to a second drain, and a drain stopped by Celery's soft
time limit mid-request leaves it pending, processed once later (issue #29). On the real Redis
and database; the pass times are read from a controlled clock, never the wall clock."""

from __future__ import annotations

import os
import signal

import pytest
from billiard.pool import SIG_SOFT_TIMEOUT, soft_timeout_sighandler

from feeds.processes.run import ProcessRunner
from sensors.ingest import stream as stream
from sensors.ingest.drain import SHED_HOLD_S, Drain, behind_s, drain_shard
from tests.sensors.test_ingest_fresh import node_with, points, rows


class Clock:
    """time.monotonic for a Drain, moved only by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def four_shards(settings):
    settings.BMS_INGEST_SHARDS = 4
    settings.BMS_INGEST_SLICE = 2
    return 4


def nodes_in_every_shard(count: int = 8) -> list:
    made = [node_with(f"behind{i}", None, "log_to_feed") for i in range(count)]
    assert {stream.shard_of(node.pk) for node, _ in made} == {0, 1, 2, 3}
    return made


def test_a_drain_with_a_backlog_hands_half_its_shards_to_a_second_drain(
    db, redis_client, four_shards
):
    made = nodes_in_every_shard()
    for node, _ in made:
        for first in range(5):  # five requests a node, two a pass: a backlog
            stream.append(node.pk, rows(first, 1))
    first = Drain(0, consumer="first", clock=Clock())
    assert first.acquire() and first.held == [0, 1, 2, 3]
    assert first.run_pass() == 2 * len(made)
    assert first.behind() and first.full_slices == len(made)

    shed = first.shed_if_behind()
    assert shed == [2, 3] and first.held == [0, 1] and first.report.shed == 2
    assert all(redis_client.get(stream.lease_key(k)) is None for k in shed)
    assert all(redis_client.get(stream.kick_key(k)) for k in shed)  # a drain queued for them
    assert first.adopt() == []  # it leaves them to the other drain

    # The drain the kick queued, in the worker's other process: it takes what was released.
    second = Drain(2, consumer="second", clock=Clock())
    assert second.acquire() and second.held == [2, 3]
    while first.run_pass() + second.run_pass():
        pass
    for node, feed in made:
        assert len(points(feed.pk)) == 5, node  # every request, once
        assert redis_client.xlen(stream.stream_key(node.pk)) == 0
    assert {stream.shard_of(n.pk) for n, _ in made} == set(first.held) | set(second.held)
    second.release()
    first.release()


def test_a_slow_pass_is_behind_by_the_drains_clock(db, redis_client, four_shards):
    node, _ = node_with("slow", 1, "log_to_feed")
    clock = Clock()
    drain = Drain(0, clock=clock)
    assert drain.acquire()
    stream.append(node.pk, rows(0, 1))
    assert drain.run_pass() == 1
    assert not drain.behind() and drain.shed_if_behind() == []  # a quick pass keeps its shards

    def slow_ingest(*args, **kwargs):
        clock.now += behind_s()  # the pass takes that long on the drain's clock
        return ingest(*args, **kwargs)

    ingest = ProcessRunner._run_batch  # a node's process lists, alone or with others
    try:
        ProcessRunner._run_batch = slow_ingest
        stream.append(node.pk, rows(1, 1))
        assert drain.run_pass() == 1
    finally:
        ProcessRunner._run_batch = ingest
    assert drain.last_pass_s == pytest.approx(behind_s()) and drain.full_slices == 0
    assert drain.behind()
    assert drain.shed_if_behind() == [2, 3]
    drain.release()


def test_shed_shards_nobody_took_are_taken_back_after_the_hold(db, redis_client, four_shards):
    made = nodes_in_every_shard()
    for node, _ in made:
        for first in range(3):  # a slice of two leaves one request a node for the next pass
            stream.append(node.pk, rows(first, 1))
    clock = Clock()
    drain = Drain(1, clock=clock)
    assert drain.acquire()
    drain.run_pass()
    assert drain.shed_if_behind() == [2, 3] and drain.held == [0, 1]  # never its own shard
    clock.now += SHED_HOLD_S / 2
    assert drain.adopt() == [] and drain.shed_if_behind() == []  # one hand-over at a time
    clock.now += SHED_HOLD_S / 2
    assert drain.adopt() == [2, 3]  # no other process came: they are drained here
    assert drain.run_pass() == len(made)
    assert all(len(points(feed.pk)) == 3 for _, feed in made)
    drain.release()


def test_a_drain_sharing_the_shards_with_another_never_hands_over(db, redis_client, four_shards):
    # With two worker processes a second drain is all there is room for: a drain that already
    # shares the shards would queue drains no free process runs.
    node, _ = node_with("sharing", 4, "log_to_feed")
    shard = stream.shard_of(node.pk)
    other = (shard + 1) % 4
    redis_client.set(stream.lease_key(other), "the other drain", px=60_000)
    for first in range(5):
        stream.append(node.pk, rows(first, 1))
    drain = Drain(shard)
    assert drain.acquire() and len(drain.held) == 3
    assert drain.run_pass() == 2
    assert drain.behind() and drain.shed_if_behind() == [] and len(drain.held) == 3
    drain.release()


@pytest.fixture
def celery_soft_limit():
    """The handler a Celery (billiard) worker process installs for its soft time limit: the
    signal raises SoftTimeLimitExceeded wherever the task's code is."""
    before = signal.signal(SIG_SOFT_TIMEOUT, soft_timeout_sighandler)
    yield lambda: os.kill(os.getpid(), SIG_SOFT_TIMEOUT)
    signal.signal(SIG_SOFT_TIMEOUT, before)


def test_a_drain_hitting_its_soft_time_limit_mid_request_leaves_it_pending_then_counts_it_once(
    db, redis_client, celery_soft_limit
):
    node, kwh = node_with("soft-limit", 3, "power_to_kwh")
    stream.append(node.pk, rows(0, 3))
    stream.append(node.pk, rows(3, 3))
    shard = stream.shard_of(node.pk)
    calls = []
    run_batch = ProcessRunner._run_batch

    def limit_lands_here(self, *args):
        calls.append(1)
        if len(calls) == 1:
            # Mid-request: its state read and WATCHed, nothing of it written yet.
            celery_soft_limit()
        return run_batch(self, *args)

    ProcessRunner._run_batch = limit_lands_here
    try:
        stopped = drain_shard(shard, budget_s=30, consumer="overran")
    finally:
        ProcessRunner._run_batch = run_batch
    assert stopped.stopped.startswith("transient: SoftTimeLimitExceeded")
    assert stopped.dropped == 0 and stopped.requests == 0
    assert points(kwh.pk) == []
    pending = redis_client.xpending(stream.stream_key(node.pk), stream.GROUP)
    assert pending["pending"] == 2  # read, not acknowledged: kept for the next drain
    assert redis_client.get(stream.lease_key(shard)) is None  # released on its way out

    later = drain_shard(shard, budget_s=30, consumer="next")
    assert later.requests == 2 and later.claimed == 2 and later.dropped == 0
    assert later.already_done == 0
    got = points(kwh.pk)
    assert len(got) == 6
    assert got[-1][1] == pytest.approx(0.01 * 5, abs=1e-6)  # each reading counted once
    assert redis_client.xlen(stream.stream_key(node.pk)) == 0
