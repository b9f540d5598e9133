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
