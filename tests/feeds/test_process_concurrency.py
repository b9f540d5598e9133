"""Accumulating processes under parallel tasks: no lost update, no double count.

Several runners (threads, then forked processes, as Celery's worker pool and two gunicorn
requests would be) process the SAME ordered batches for the same inputs at once, like a
batch redelivered beside the original. Each batch carries its stream entry id (`mark`), as the
ingest worker's do: that, not the readings' times, is what tells a redelivery (power_to_kwh
moves its clock back to a late reading, as emoncms does, so a replay by time would count
again). Each point must be counted exactly once: the kWh, Wh and pulse totals and the points
logged equal a single-threaded run bit for bit.
"""

from __future__ import annotations

import json
import multiprocessing
import threading

import numpy as np
import pytest
import redis as redis_lib
from django.conf import settings

from feeds.processes.run import ProcessRunner
from feeds.store.buffer import FeedBuffer, parse_records

KWH, KWHD, WH, PULSES = 5, 6, 7, 8
POWER_STEPS = [
    {"process": "log_to_feed", "feed": 4},
    {"process": "power_to_kwh", "feed": KWH},
    {"process": "kwh_to_kwhd", "feed": KWHD},
]
WH_STEPS = [{"process": "wh_accumulator", "feed": WH}]
PULSE_STEPS = [{"process": "pulse_diff", "feed": PULSES}]
T0 = 1_700_000_000
N_POINTS = 600
BATCH = 10
WORKERS = 4


def batches() -> list[list]:
    """Ordered batches of varying power, Wh counter and pulse count for three inputs."""
    rng = np.random.default_rng(7)
    watts = rng.integers(0, 5000, N_POINTS)
    wh = np.cumsum(rng.integers(0, 5, N_POINTS))
    pulses = np.cumsum(rng.integers(0, 9, N_POINTS))
    items = []
    for i in range(N_POINTS):
        t = T0 + 10 * i
        items += [
            ("n:power", POWER_STEPS, t, float(watts[i])),
            ("n:wh", WH_STEPS, t, float(wh[i])),
            ("n:pulses", PULSE_STEPS, t, float(pulses[i])),
        ]
    per = BATCH * 3
    return [items[i : i + per] for i in range(0, len(items), per)]


def outcome(buffer: FeedBuffer) -> dict:
    """Per accumulating feed: the (t, value) records buffered, in time order, and the state."""
    result = {}
    for feed in (KWH, KWHD, WH, PULSES):
        records = parse_records(buffer.redis.get(buffer.key(feed)) or b"")
        result[feed] = sorted(zip(records["t"].tolist(), records["v"].tolist(), strict=True))
    for key in ("n:power", "n:wh", "n:pulses"):
        result[key] = buffer.redis.hgetall(f"{buffer.prefix}proc:{key}")
    return result


def mark(prefix: str, index: int) -> tuple[str, str]:
    """The stream entry of batch `index`, as the ingest worker passes it (one key per node)."""
    return f"{prefix}done:n", f"{T0 * 1000 + index}-0"


def reference(redis_client) -> dict:
    buffer = FeedBuffer(redis_client, prefix="reference:")
    runner = ProcessRunner(buffer)
    for i, batch in enumerate(batches()):
        runner.run(batch, mark=mark("reference:", i))
    return outcome(buffer)


def run_all(redis_client: redis_lib.Redis, prefix: str, start: threading.Barrier | None = None):
    """Every batch in order; the number found done already (run by another runner)."""
    runner = ProcessRunner(FeedBuffer(redis_client, prefix=prefix))
    if start is not None:
        start.wait()
    done_before = 0
    for i, batch in enumerate(batches()):
        done_before += runner.run(batch, mark=mark(prefix, i)).already_done
    return done_before


def _in_child(url: str, prefix: str, start) -> None:
    start.wait()
    run_all(redis_lib.Redis.from_url(url, socket_timeout=10), prefix)
    # Exit code 0 is the parent's sign that this child processed every batch.


def test_threads_processing_the_same_batches_count_each_point_once(redis_client):
    expected = reference(redis_client)
    start = threading.Barrier(WORKERS, timeout=60)
    replays: list[int] = []
    threads = [
        threading.Thread(target=lambda: replays.append(run_all(redis_client, "par:", start)))
        for _ in range(WORKERS)
    ]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
    assert len(replays) == WORKERS  # every thread finished without an error
    got = outcome(FeedBuffer(redis_client, prefix="par:"))
    assert len(got[KWH]) == N_POINTS  # each point logged once, not once per thread
    assert got == expected
    # Each batch ran once: every other runner found its entry done.
    assert sum(replays) == (WORKERS - 1) * len(batches())


def test_processes_processing_the_same_batches_count_each_point_once(redis_client):
    expected = reference(redis_client)
    # spawn, not fork: forking the multi-threaded test process can copy a held lock.
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(WORKERS, timeout=60)
    children = [
        ctx.Process(target=_in_child, args=(settings.REDIS_URL, "proc:", start))
        for _ in range(WORKERS)
    ]
    for child in children:
        child.start()
    for child in children:
        child.join(timeout=120)
    for child in children:
        if child.is_alive():
            child.kill()
    assert [c.exitcode for c in children] == [0] * WORKERS
    assert outcome(FeedBuffer(redis_client, prefix="proc:")) == expected


def test_a_replayed_batch_after_a_parallel_run_changes_nothing(redis_client):
    buffer = FeedBuffer(redis_client, prefix="replay:")
    run_all(redis_client, "replay:")
    before = outcome(buffer)
    runner = ProcessRunner(buffer)
    for i in range(0, len(batches()), 7)[::-1]:  # redelivered entries, out of order and late
        report = runner.run(batches()[i], mark=mark("replay:", i))
        assert report.already_done and report.logged == []
    after = outcome(buffer)
    assert after == before


@pytest.mark.parametrize("interleave", [True, False])
def test_two_tasks_racing_on_one_input_keep_both_increments(redis_client, interleave):
    """Task A has t=10, task B t=20; whichever order they land in, B adds only its own 10 s."""
    buffer = FeedBuffer(redis_client, prefix="race:")
    steps = [{"process": "power_to_kwh", "feed": KWH}]
    ProcessRunner(buffer).run([("k", steps, 0, 0.0)])
    a = ("k", steps, 10, 3600.0)
    b = ("k", steps, 20, 7200.0)
    go = threading.Barrier(2)

    def task(item):
        go.wait()
        ProcessRunner(buffer).run([item])

    threads = [threading.Thread(target=task, args=(x,)) for x in ((a, b) if interleave else (b, a))]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=30)
    last = buffer.last_values([KWH])[KWH]
    state = json.loads(redis_client.hget("race:proc:k", "0:power_to_kwh:5"))
    # In order: 0.01 + 0.02 kWh. If B landed first, A is late: it adds nothing and moves the
    # clock back to 10 (as emoncms), so B's 0.04 kWh (20 s at 7200 W) is held at 10 too. Never a
    # lost update: the state always holds the total the feed's newest point logged.
    assert last[0] == 20
    assert last[1] == state["kwh"]
    assert (state["t"], last[1]) in ((20, pytest.approx(0.03)), (10, pytest.approx(0.04)))


def test_batches_run_together_see_each_others_points_as_if_run_in_turn(redis_client):
    """run_many runs several nodes' batches in one transaction: a batch that reads a feed's last
    value (power_to_kwh adds to it) must see what an earlier batch of the same transaction
    logged to that feed, as it would once that batch's points were in Redis."""
    from feeds.processes.run import RunCall

    # Two nodes, each with a power input totalled into the same kWh feed, 10 posts each.
    steps = [{"process": "power_to_kwh", "feed": KWH}]
    calls = [
        [(f"{node}:power", steps, T0 + 10 * i, 1000.0 * (k + 1)) for i in range(10)]
        for k, node in enumerate(("a", "b"))
    ]
    in_turn = FeedBuffer(redis_client, prefix="turn:")
    for i, items in enumerate(calls):
        ProcessRunner(in_turn).run(items, mark=(f"turn:done:{i}", f"{T0 * 1000}-0"))
    together = FeedBuffer(redis_client, prefix="together:")
    ProcessRunner(together).run_many(
        [
            RunCall(items, mark=(f"together:done:{i}", f"{T0 * 1000}-0"))
            for i, items in enumerate(calls)
        ]
    )
    expected = parse_records(redis_client.get(in_turn.key(KWH)))
    got = parse_records(redis_client.get(together.key(KWH)))
    assert len(got) == 20 and got["v"][10] >= got["v"][9] > 0  # b's totals go on from a's
    assert got.tolist() == expected.tolist()
