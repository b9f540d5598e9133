"""The drain's inputs of every node: one table per process (processing.sensor_map over a
ProcessTable), read in one query whatever the number of nodes, where each node's entry of its
own ran out once a minute and was read again, a query a node (issue #29). A node the table does
not know yet is read alone; with the database away, what was read last serves."""

from __future__ import annotations

import time
import types

import pytest
from django.db import DatabaseError

from sensors import cache
from sensors.ingest import processing
from sensors.models import Sensor
from tests.sensors.conftest import make_node


@pytest.fixture
def nodes(db, redis_client):
    made = []
    for i in range(20):
        node, _ = make_node(f"table{i}", None)
        Sensor.objects.create(node=node, key="p", processes=[])
        Sensor.objects.create(node=node, key="q", processes=[])
        made.append(node)
    cache.bump_generation()
    cache.check_generation()  # this process sees the change now, not at its next second
    cache.clear_all()
    return made


def test_every_nodes_inputs_are_read_in_one_query(nodes, django_assert_num_queries):
    with django_assert_num_queries(1):
        specs = [processing.sensor_map(node.pk) for node in nodes]
    assert all(set(s) == {"p", "q"} for s in specs)
    with django_assert_num_queries(0):  # and answered from memory after
        processing.sensor_map(nodes[7].pk)


def test_a_node_the_table_does_not_know_is_read_alone(nodes, django_assert_num_queries):
    processing.sensor_map(nodes[0].pk)  # the table, read before the new node's input
    late, _ = make_node("late", None)
    Sensor.objects.create(node=late, key="x", processes=[])
    with django_assert_num_queries(1):
        assert set(processing.sensor_map(late.pk)) == {"x"}
    with django_assert_num_queries(0):
        assert set(processing.sensor_map(late.pk)) == {"x"}


def test_inputs_made_by_ingest_are_seen_at_once(nodes):
    node = nodes[3]
    processing.sensor_map(node.pk)
    processing.ingest_rows(node.pk, [[1_700_000_000, {"p": 1.0, "new": 2.0}]])
    assert set(processing.sensor_map(node.pk)) == {"p", "q", "new"}


def test_with_the_database_away_and_no_table_read_a_nodes_last_inputs_serve(nodes, monkeypatch):
    node = nodes[5]
    processing._new_sensor_maps.set(node.pk, {"p": "as read before"})

    def away(node_ids=None):
        raise DatabaseError("the database went away")

    monkeypatch.setattr(processing._sensor_table, "_load", away)
    monkeypatch.setattr(processing, "_read_sensor_maps", away)
    processing._new_sensor_maps._data[node.pk] = (0.0, {"p": "as read before"})  # expired
    assert processing.sensor_map(node.pk) == {"p": "as read before"}
    with pytest.raises(DatabaseError):
        processing.sensor_map(nodes[6].pk)  # never read: nothing to serve


def test_the_table_is_read_again_after_ten_minutes_not_one(
    nodes, monkeypatch, django_assert_num_queries
):
    # Each read stops the drain for its length (0.38 s at 10,000 nodes): once a minute that was
    # the freshness tail. A change drops it within a second (the config generation) anyway.
    processing.sensor_map(nodes[0].pk)
    real = time.monotonic
    offset = [0.0]
    monkeypatch.setattr(cache, "time", types.SimpleNamespace(monotonic=lambda: real() + offset[0]))
    monkeypatch.setattr(cache, "GENERATION_CHECK_S", 1e9)  # the generation is not the subject
    offset[0] = cache.ENTRY_TTL_S + 1
    with django_assert_num_queries(0):
        processing.sensor_map(nodes[1].pk)
    offset[0] = processing.SENSOR_TABLE_TTL_S + 1
    with django_assert_num_queries(1):
        processing.sensor_map(nodes[1].pk)
