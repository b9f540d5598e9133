"""sensors/cache.py's ProcessTable: one table of configuration for every node per process (the
keys' hashes, every node's feed files), read whole, dropped by a config change, read again
past its TTL, and never left holding a table read before a change it raced."""

from __future__ import annotations

import threading
import time
import types

import pytest
from django.db import DatabaseError

from sensors import cache


class Loads:
    """A load function that counts its calls and answers what it is told to."""

    def __init__(self) -> None:
        self.calls = 0
        self.answer: object = "v1"
        self.during = lambda: None  # run inside a load, before it returns

    def __call__(self) -> object:
        self.calls += 1
        self.during()
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


@pytest.fixture
def later(monkeypatch):
    """Move this process's cache clock (time.monotonic in sensors/cache.py) on by `s`."""
    offset = [0.0]
    real = time.monotonic
    monkeypatch.setattr(cache, "time", types.SimpleNamespace(monotonic=lambda: real() + offset[0]))

    def move(s: float) -> None:
        offset[0] += s

    return move


@pytest.fixture
def table(redis_client):
    # This process's view of the config generation as Redis has it now: one an earlier test
    # left would be "a change" at the next check (a clock moved on by a test), emptying it.
    cache.check_generation()
    loads = Loads()
    return cache.ProcessTable(loads), loads


def test_it_reads_once_and_answers_from_memory(table):
    table, loads = table
    assert [table.get() for _ in range(5)] == ["v1"] * 5
    assert loads.calls == 1


def test_a_config_change_drops_it(table):
    table, loads = table
    table.get()
    loads.answer = "v2"
    cache.clear_all()  # what a process does when the config generation moved
    assert table.get() == "v2" and loads.calls == 2


def test_a_table_read_while_the_config_changed_is_not_kept(table):
    # The change was seen (caches emptied) while the read was under way: its rows may be from
    # before the change committed, so it serves the request that read it and nothing after.
    table, loads = table
    loads.during = cache.clear_all
    assert table.get() == "v1"
    loads.during = lambda: None
    loads.answer = "v2"
    assert table.get() == "v2" and loads.calls == 2


def test_it_is_read_again_past_its_ttl(table, later):
    table, loads = table
    table.get()
    later(cache.ENTRY_TTL_S - 1)
    assert table.get() == "v1" and loads.calls == 1
    loads.answer = "v2"
    later(2)
    assert table.get() == "v2" and loads.calls == 2


def test_past_its_ttl_the_old_table_serves_while_another_thread_reads_it(table, later):
    table, loads = table
    table.get()
    later(cache.ENTRY_TTL_S + 1)
    reading, release = threading.Event(), threading.Event()

    def slow() -> None:
        reading.set()
        assert release.wait(30)

    loads.during, loads.answer = slow, "v2"
    got: list = []
    reader = threading.Thread(target=lambda: got.append(table.get()))
    reader.start()
    try:
        assert reading.wait(30)
        assert table.get() == "v1"  # not blocked behind the read, and no second read
    finally:
        release.set()
        reader.join(30)
    assert got == ["v2"] and loads.calls == 2
    assert table.get() == "v2" and loads.calls == 2


def test_the_database_away_the_last_table_read_serves(table, later):
    table, loads = table
    table.get()
    later(cache.ENTRY_TTL_S + 1)
    loads.answer = DatabaseError("connection refused")
    assert table.get() == "v1"


def test_the_database_away_with_no_table_read_is_an_error(table):
    table, loads = table
    loads.answer = DatabaseError("connection refused")
    with pytest.raises(DatabaseError):
        table.get()


def test_the_collector_is_paused_for_a_read_only(table):
    # A read of 10,000 nodes' rows ran half its CPU in the cyclic collector: paused for the
    # read, running again after it, a failed one too.
    import gc

    table, loads = table
    seen: list[bool] = []
    loads.during = lambda: seen.append(gc.isenabled())
    table.get()
    assert seen == [False] and gc.isenabled()
    cache.clear_all()
    loads.answer = DatabaseError("connection refused")
    with pytest.raises(DatabaseError):
        table.get()
    assert seen == [False, False] and gc.isenabled()
