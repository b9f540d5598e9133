"""The *_input steps through ingest: another sensor's last value as the node state holds it."""

from __future__ import annotations

import time

import pytest

from feeds.models import Feed
from feeds.store import service
from sensors.ingest.processing import ingest_rows
from sensors.models import Sensor
from tests.sensors.conftest import make_node

pytestmark = pytest.mark.django_db

T0 = int(time.time()) // 10 * 10 - 600


def test_subtract_input_uses_the_other_sensors_last_value(redis_client):
    """emoncms subtract_input: this value minus the other input's last value; an input
    posted earlier in the same request is seen with its new value."""
    grid_node, _ = make_node("grid", node_id=11)
    house, _ = make_node("house", node_id=12)
    grid = Sensor.objects.create(node=grid_node, key="import", kind="power")
    net = Feed.objects.create(name="net", tag="house", interval=10)
    Sensor.objects.create(
        node=house, key="use", kind="power",
        processes=[{"process": "subtract_input", "input": grid.pk},
                   {"process": "log_to_feed", "feed": net.pk}],
    )  # fmt: skip
    ingest_rows(grid_node.pk, [[T0, {"import": 700.0}]])
    ingest_rows(house.pk, [[T0 + 10, {"use": 1000.0}]])
    assert service.last_value(net.pk) == (T0 + 10, 300.0)
    # The same node: "a" is posted before "b" in the row, so b - a uses a's new value.
    a = Sensor.objects.create(node=house, key="a")
    Sensor.objects.create(
        node=house, key="b",
        processes=[{"process": "subtract_input", "input": a.pk},
                   {"process": "log_to_feed", "feed": net.pk}],
    )  # fmt: skip
    ingest_rows(house.pk, [[T0 + 20, {"a": 5.0, "b": 8.0}]])
    assert service.last_value(net.pk) == (T0 + 20, 3.0)
