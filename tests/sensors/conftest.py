"""Fixtures for the sensors tests: a node with its write key, a clean config cache."""

from __future__ import annotations

import base64
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
    """The ingest_batch tasks waiting in the real broker queue, oldest first."""
    batches = []
    for raw in reversed(redis_client.lrange("ingest", 0, -1)):
        message = json.loads(raw)
        assert message["headers"]["task"] == "sensors.tasks.ingest_batch"
        args, _kwargs, _embed = json.loads(base64.b64decode(message["body"]))
        batches.append(args)
    return batches
