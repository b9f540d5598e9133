"""The feed commit runs below the ingest drain and the web in CPU priority (issue #29: at 10,000
nodes it took 0.3 of a core for 30 s a minute, and readings waited seconds behind it): in a
thread of its own whose nice value is raised (feeds/store/low_priority.py). Its result and its
errors reach the caller as before; told to stop (the task's soft time limit), it stops between
two batches and what it did not write stays in Redis."""

from __future__ import annotations

import os
import threading

import pytest

from feeds.models import Feed
from feeds.store import buffer as buffer_module
from feeds.store import low_priority, phpfina, service


@pytest.fixture(autouse=True)
def _no_backfill_bound(settings):
    settings.BMS_FEED_MAX_BACKFILL_DAYS = 100_000  # synthetic 1970 times, as test_service.py


def nice_of_this_thread() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


def test_the_commit_runs_in_a_thread_ten_steps_nicer(db, feed_dir, redis_client, monkeypatch):
    feed = Feed.objects.create(name="power", interval=10)
    service.log_points([(feed.pk, 1000 + 10 * i, float(i)) for i in range(5)])
    seen = []
    real = buffer_module.FeedBuffer._write_block

    def write_block(self, *args, **kwargs):
        seen.append((threading.get_ident(), nice_of_this_thread()))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(buffer_module.FeedBuffer, "_write_block", write_block)
    caller = (threading.get_ident(), nice_of_this_thread())
    assert service.commit_all(now=2_000_000_000)["points"] == 5
    assert seen and seen[0][0] != caller[0]
    assert seen[0][1] == min(19, caller[1] + 10)
    assert nice_of_this_thread() == caller[1]  # the caller's own priority is untouched
    _meta, data = phpfina.open_feed(service.feed_dir(feed.pk), feed.pk)
    assert [float(x) for x in data] == [0.0, 1.0, 2.0, 3.0, 4.0]


def test_nice_zero_commits_in_the_callers_thread(db, feed_dir, redis_client, settings, monkeypatch):
    settings.BMS_FEED_COMMIT_NICE = 0
    feed = Feed.objects.create(name="power", interval=10)
    service.log_points([(feed.pk, 1000, 1.0)])
    threads = []
    real = buffer_module.FeedBuffer._write_block

    def write_block(self, *args, **kwargs):
        threads.append(threading.get_ident())
        return real(self, *args, **kwargs)

    monkeypatch.setattr(buffer_module.FeedBuffer, "_write_block", write_block)
    assert service.commit_all(now=2_000_000_000)["points"] == 1
    assert threads == [threading.get_ident()]


def test_an_error_in_the_commit_reaches_the_caller(db, feed_dir, redis_client, monkeypatch):
    feed = Feed.objects.create(name="power", interval=10)
    service.log_points([(feed.pk, 1000, 1.0)])

    def disk_full(self, *args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(buffer_module.FeedBuffer, "_write_block", disk_full)
    with pytest.raises(OSError, match="No space left"):
        service.commit_all(now=2_000_000_000)
    assert service.get_buffer().pending(feed.pk)["v"].tolist() == [1.0]  # kept in Redis


def test_told_to_stop_it_stops_between_batches_and_keeps_the_rest(
    db, feed_dir, redis_client, monkeypatch
):
    # The soft time limit lands in the waiting thread; the commit thread sees it at its next
    # batch. One feed a batch here, and the stop comes during the first one's write.
    monkeypatch.setattr(buffer_module, "BATCH_FEEDS", 1)
    feeds = [Feed.objects.create(name=f"f{i}", interval=10) for i in range(3)]
    for feed in feeds:
        service.log_points([(feed.pk, 1000, 7.0)])
    stop_now = threading.Event()
    real = buffer_module.FeedBuffer._write_block

    def write_block(self, *args, **kwargs):
        low_priority._current.stop.set()  # as run() does when the caller is interrupted
        stop_now.set()
        return real(self, *args, **kwargs)

    monkeypatch.setattr(buffer_module.FeedBuffer, "_write_block", write_block)
    with pytest.raises(low_priority.Cancelled):
        service.commit_all(now=2_000_000_000)
    assert stop_now.is_set()
    pending = [len(service.get_buffer().pending(f.pk)) for f in feeds]
    assert pending == [0, 1, 1]  # the first written and settled, the others left for later
    monkeypatch.setattr(buffer_module.FeedBuffer, "_write_block", real)
    assert service.commit_all(now=2_000_000_000)["points"] == 2  # the next commit takes them


def test_an_interrupted_caller_stops_the_commit_and_sees_why(monkeypatch):
    # run()'s own contract: the waiting thread interrupted (Celery's soft time limit is a
    # signal handler raising in it), the commit thread told to stop, the interruption raised.
    started, release = threading.Event(), threading.Event()
    stopped = []

    def work() -> str:
        started.set()
        release.wait(5)
        try:
            low_priority.checkpoint()
        except low_priority.Cancelled:
            stopped.append(True)
            raise
        return "done"

    class Interrupted(Exception):
        pass

    real_join = threading.Thread.join
    joins = []

    def join(self, timeout=None):
        joins.append(self.name)
        if len(joins) == 1:  # the first wait is interrupted once the commit is under way
            started.wait(5)
            raise Interrupted
        release.set()  # the commit goes on to its next checkpoint, where it stops
        return real_join(self, timeout)

    monkeypatch.setattr(threading.Thread, "join", join)
    with pytest.raises(Interrupted):
        low_priority.run(work, nice=5)
    assert stopped == [True] and joins == ["feed-commit", "feed-commit"]
