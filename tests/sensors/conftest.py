"""Fixtures for the sensors tests: a node with its write key, a clean config cache."""

from __future__ import annotations

import json

import pytest

from sensors import cache
from sensors.models import Node


@pytest.fixture(autouse=True)
def _fresh_config_cache():
    # Inside a test transaction on_commit never fires, so caches are not bumped: start clean.
    cache.clear_all()
    yield
    cache.clear_all()


def make_node(name: str = "emontx1", node_id: int | None = 10, interval: int = 10):
    node = Node(name=name, node_id=node_id, interval=interval)
    key = node.set_new_key()
    node.save()
    return node, key


@pytest.fixture
def node_and_key(db):
    return make_node()


def queued_batches(redis_client) -> list[list]:
    """The requests waiting in the node streams (sensors/ingest/stream.py) as [node, rows]: a
    node's in the order they were accepted (across nodes, only to the millisecond)."""
    from sensors.ingest import stream as ingest_stream

    entries = []
    for key in redis_client.scan_iter(match=ingest_stream.STREAM_PREFIX + "*"):
        node_id = ingest_stream.node_of(key)
        for entry_id, fields in redis_client.xrange(key):
            ms, seq = (int(x) for x in entry_id.decode().split("-"))
            entries.append(((ms, seq), [node_id, json.loads(fields[b"r"])]))
    return [batch for _, batch in sorted(entries, key=lambda e: e[0])]


# The emoncms import tests' feed store and site (test_import_emoncms_*.py).
@pytest.fixture
def feed_dir(tmp_path, settings):
    directory = tmp_path / "feeds"
    directory.mkdir()
    settings.BMS_FEED_DIR = directory
    return directory


@pytest.fixture
def site(db):
    from sensors.models import Site

    return Site.objects.create(name="Home", slug="home")


def _commands(packed: bytes | list) -> list[tuple[str, ...]]:
    """The commands in what redis-py sends in one go (RESP arrays of bulk strings): each as
    (NAME, first argument) or (NAME,)."""
    data = b"".join(bytes(p) for p in packed) if isinstance(packed, list) else bytes(packed)
    out, i = [], 0
    while i < len(data):
        end = data.index(b"\r\n", i)
        count, i = int(data[i + 1 : end]), end + 2
        parts = []
        for _ in range(count):
            end = data.index(b"\r\n", i)
            size, i = int(data[i + 1 : end]), end + 2
            parts.append(data[i : i + size])
            i += size + 2
        out.append((parts[0].decode().upper(), *(p.decode(errors="replace") for p in parts[1:2])))
    return out


@pytest.fixture
def redis_trips(monkeypatch) -> list[list[tuple[str, ...]]]:
    """Every round trip this process makes to Redis from now on, as the commands it sent
    (a pipeline's or a script's: one trip). The connection's health-check PING and the config
    generation's once-a-second GET are left out: they do not belong to a request."""
    from redis.connection import AbstractConnection

    from sensors.cache import GENERATION_KEY

    trips: list[list[tuple[str, ...]]] = []
    real = AbstractConnection.send_packed_command

    def send(self, command, check_health=True):
        sent = [c for c in _commands(command) if c[0] != "PING" and c != ("GET", GENERATION_KEY)]
        if sent:
            trips.append(sent)
        return real(self, command, check_health)

    monkeypatch.setattr(AbstractConnection, "send_packed_command", send)
    return trips
