"""A batch queued by the web process's direct publish (sensors/publish.py) is run by a real
Celery worker and lands in the feed store."""

from __future__ import annotations

import time

import pytest

from feeds import service
from sensors import cache
from sensors.models import Sensor
from sensors.publish import publish_ingest_batch
from tests.sensors.conftest import make_node

pytestmark = [pytest.mark.integration]

ROWS = [[1_700_000_000, {"power": 12.5}], [1_700_000_010, {"power": 13.0}]]


def test_a_real_worker_runs_a_published_batch(transactional_db, celery_worker, redis_client):
    cache.clear_all()
    node, _ = make_node("pub1", node_id=30)
    publish_ingest_batch(node.pk, ROWS)
    deadline = time.monotonic() + 20
    sensor = None
    while time.monotonic() < deadline:
        sensor = Sensor.objects.filter(node=node, key="power").first()
        if sensor and service.last_value(sensor.feed_id) == (1_700_000_010, 13.0):
            break
        time.sleep(0.1)
    assert sensor is not None
    assert service.last_value(sensor.feed_id) == (1_700_000_010, 13.0)
