"""Per-process caches of node and sensor configuration, invalidated across processes.

The ingest path must not query the database per request (web) or per batch (worker), yet a
rotated key or an edited sensor must take effect promptly everywhere. Each save of a Node,
Sensor or ModbusRegister bumps a generation counter in Redis (after commit); every process
re-reads that counter at most once a second and drops its caches when it has moved, and
entries also expire after a TTL in case Redis was unreachable when a bump was due.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Generic, TypeVar

from django.db import DatabaseError, transaction
from django.db.models.signals import post_delete, post_save
from redis.exceptions import RedisError

from core.redis import get_redis

log = logging.getLogger(__name__)

GENERATION_KEY = "sensors:config-generation"
GENERATION_CHECK_S = 1.0
ENTRY_TTL_S = 60.0
# No cache may grow without bound: lookups keyed by what a client sends (a random key, a
# made-up node name) would otherwise fill the process's memory until the next config change.
MAX_ENTRIES = 10_000

T = TypeVar("T")


class _Generation:
    value: bytes | None = None
    checked_at: float = 0.0


_generation = _Generation()
_caches: list[ProcessCache] = []


class ProcessCache:
    """A dict with a TTL per entry and at most `max_entries` entries (least recently used go
    first), emptied when the config generation changes."""

    def __init__(
        self, ttl_s: float = ENTRY_TTL_S, max_entries: int = MAX_ENTRIES, keep_stale: bool = False
    ) -> None:
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        # Keep an expired entry for stale() (configuration read from the database, needed while
        # it is away); others (wrong keys) are dropped when read, as before.
        self.keep_stale = keep_stale
        self._data: OrderedDict[Any, tuple[float, Any]] = OrderedDict()
        # gunicorn runs threads: an OrderedDict reordered by two at once can raise KeyError.
        self._lock = threading.Lock()
        self.clears = 0  # how many times it was emptied: ProcessTable's check that none came
        _caches.append(self)

    def get(self, key: Any, default: Any = None) -> Any:
        _check_generation()
        with self._lock:
            entry = self._data.get(key)
            if entry is None:
                return default
            if entry[0] < time.monotonic():
                if not self.keep_stale:
                    del self._data[key]
                return default
            self._data.move_to_end(key)
            return entry[1]

    def stale(self, key: Any, default: Any = None) -> Any:
        """The last value stored for `key` even past its TTL (until evicted or the config
        generation moves): for when the database that would refresh it is unavailable. Config
        cannot change while it is away, so the last value read is still the configuration."""
        with self._lock:
            entry = self._data.get(key)
        return default if entry is None else entry[1]

    def set(self, key: Any, value: Any, ttl_s: float | None = None) -> None:
        expires = time.monotonic() + (self.ttl_s if ttl_s is None else ttl_s)
        with self._lock:
            self._data[key] = (expires, value)
            self._data.move_to_end(key)
            while len(self._data) > self.max_entries:
                self._data.popitem(last=False)

    def __len__(self) -> int:
        return len(self._data)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self.clears += 1


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Reading a table for 10,000 nodes makes a few hundred thousand small objects at once, and
    the cyclic collector walked the growing heap over and over meanwhile: half of the read's CPU
    (0.50 s with it, 0.25 s without, docs/BENCHMARKS.md). They hold no cycles; the collector
    runs again as soon as the read is done. Process-wide, so the other threads' garbage waits
    those moments too (memory, not correctness). Left off if something else turned it off."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


class ProcessTable(Generic[T]):
    """One table of some configuration for every node (the enabled keys' hashes, every node's
    feed files), read whole by `load` and kept per process like any config: dropped within a
    second of a change by the config generation, and after the TTL in case Redis missed that
    change. A node's lookup in it costs no query whatever the number of nodes; the whole
    table costs one read (a few queries) a TTL per process, where entries of their own each
    ran out and were read again once a TTL per node (docs/BENCHMARKS.md, "CPU per post").

    While the database is away the last table read is used (config cannot change meanwhile);
    with none read yet, the DatabaseError is raised (the web answers 503)."""

    def __init__(self, load: Callable[[], T], ttl_s: float = ENTRY_TTL_S) -> None:
        self._load = load
        self._cache = ProcessCache(ttl_s=ttl_s, max_entries=1, keep_stale=True)
        # One thread reads the table; the others of the process do not run the same queries.
        self._loading = threading.Lock()

    def get(self) -> T:
        table = self._cache.get("all")
        if table is not None:
            return table
        if not self._loading.acquire(blocking=False):
            # Another thread is reading it. Past its TTL only (a config change empties it, so
            # there is no stale table then) the table it replaces is still the configuration
            # as far as anyone knows: used meanwhile, so a reload never stalls the other threads.
            table = self._cache.stale("all")
            if table is not None:
                return table
            self._loading.acquire()
        try:
            return self._read()
        finally:
            self._loading.release()

    def _read(self) -> T:
        table = self._cache.get("all")  # another thread read it meanwhile
        if table is not None:
            return table
        cleared = self._cache.clears
        try:
            with _gc_paused():
                table = self._load()
        except DatabaseError:
            table = self._cache.stale("all")
            if table is None:
                raise
            return table
        # Kept only if no config change emptied the caches while it was read: a table read
        # before the change committed must not outlive it (this request uses it anyway, as one
        # that started a moment earlier would have).
        if self._cache.clears == cleared:
            self._cache.set("all", table)
        return table

    def clear(self) -> None:
        self._cache.clear()


def clear_all() -> None:
    for cache in _caches:
        cache.clear()


def _check_generation(force: bool = False) -> None:
    now = time.monotonic()
    if not force and now - _generation.checked_at < GENERATION_CHECK_S:
        return
    _generation.checked_at = now
    try:
        value = get_redis().get(GENERATION_KEY)
    except RedisError as exc:
        # Keep what we have (entries still expire after their TTL): a Redis outage must
        # surface where Redis is needed (the broker: 503), not as a 500 from a cache check.
        log.warning("config generation check failed, keeping cached config: %s", exc)
        return
    if value != _generation.value:
        _generation.value = value
        clear_all()


def check_generation() -> None:
    """Re-read the generation now (workers do, once per batch: one GET buys exactness)."""
    _check_generation(force=True)


def bump_generation() -> None:
    """Tell every process its cached configuration is stale (and this one at once).

    A fresh random token rather than a counter, so a Redis that lost the key and counted
    again from 1 can never look unchanged to a process that last saw 1."""
    get_redis().set(GENERATION_KEY, uuid.uuid4().hex)
    clear_all()


def _on_config_change(sender, **kwargs) -> None:
    transaction.on_commit(bump_generation)


def connect_signals() -> None:
    from sensors.models import GatewayKey, ModbusRegister, Node, Sensor

    for model in (Node, Sensor, ModbusRegister, GatewayKey):
        uid = f"sensors-cache-{model.__name__}"
        post_save.connect(_on_config_change, sender=model, dispatch_uid=uid + "-save")
        post_delete.connect(_on_config_change, sender=model, dispatch_uid=uid + "-delete")


connect_signals()
