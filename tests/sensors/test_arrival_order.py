"""Posts are processed in the order they were accepted, as emoncms processes them, however the
drain happens to group them (found by tests/integration/test_emoncms_live_differential.py).

The drain hands ingest_rows every request waiting in a node's stream as one chunk. The rows of
a chunk used to be sorted by time first, so a future-dated post followed by a late one gave one
kWh feed when the drain took them together and another when it took them one by one.
"""

from __future__ import annotations

import json
import time

import pytest

from feeds.models import Feed
from feeds.store import service
from sensors.ingest import input_errors, stream
from sensors.ingest.drain import drain_shard
from sensors.ingest.processing import ingest_rows
from sensors.models import Sensor
from tests.sensors.conftest import make_node
from tests.wsgi_client import WsgiClient as Client


def kwh_node(name: str, radio_id: int):
    node, key = make_node(name, node_id=radio_id)
    kwh = Feed.objects.create(name=f"{name} kwh", tag="test", interval=10)
    after = Feed.objects.create(name=f"{name} after", tag="test", interval=10)
    Sensor.objects.create(node=node, key="power1", name="power1", processes=[
        {"process": "power_to_kwh", "feed": kwh.pk},
        {"process": "log_to_feed", "feed": after.pk},
    ])  # fmt: skip
    return node, key, kwh, after


def post(key: str, t: int, watts: float) -> None:
    r = Client().post("/input/post", {"fulljson": json.dumps({"power1": watts, "time": t}),
                                      "apikey": key})  # fmt: skip
    assert r.json() == {"success": True}


def drain(node) -> None:
    report = drain_shard(stream.shard_of(node.pk))
    assert report.dropped == 0 and not report.stopped


def points(feed: Feed) -> list[tuple[int, float]]:
    records = service.get_buffer().pending(feed.pk)
    return sorted(zip(records["t"].tolist(), records["v"].tolist(), strict=True))


def test_a_future_post_then_a_late_one_give_the_same_feeds_drained_together_or_apart(
    db, redis_client
):
    now = (int(time.time()) // 10) * 10
    start, future, late = now - 120, now + 300, now - 60
    together = kwh_node("together", 11)
    apart = kwh_node("apart", 12)
    for node, key, *_ in (together, apart):
        post(key, start, 3600)
        drain(node)

    node, key, *_ = together
    post(key, future, 3600)
    post(key, late, 3600)
    drain(node)  # one chunk: both requests

    node, key, *_ = apart
    post(key, future, 3600)
    drain(node)
    post(key, late, 3600)
    drain(node)

    (_, _, kwh_t, after_t), (_, _, kwh_a, after_a) = together, apart
    # Arrival order: the future post counts 420 s at 3600 W; the late one after it adds nothing
    # and moves power_to_kwh's clock back to it, writing the total there (as emoncms does).
    assert (
        points(kwh_t)
        == points(kwh_a)
        == [(start, 0.0), (late, pytest.approx(0.42)), (future, pytest.approx(0.42))]
    )
    assert points(after_t) == points(after_a) == [(start, 3600.0), (late, 3600.0), (future, 3600.0)]


def test_an_older_pulse_count_is_recorded_not_dropped_silently(db, redis_client):
    """A pulse sensor's count older than its counter's last reading gets no point (no pulse is
    lost: the next count carries them); staff see it in the node's input errors, as the late
    readings of process steps. The same count again at the same second is no error."""
    node, _ = make_node()
    total = Feed.objects.create(name="gas", tag="test", interval=10)
    Sensor.objects.create(node=node, key="pulse", kind="pulse", feed=total, params={})
    t = (int(time.time()) // 10) * 10 - 100
    ingest_rows(node.pk, [[t, {"pulse": 100}], [t + 10, {"pulse": 110}]])
    ingest_rows(node.pk, [[t + 10, {"pulse": 110}]])  # a resent row
    assert input_errors.summary(input_errors.node_subject(node.pk)) == {}

    ingest_rows(node.pk, [[t + 5, {"pulse": 105}], [t + 20, {"pulse": 125}]])
    assert points(total) == [(t, 0.0), (t + 10, 10.0), (t + 20, 25.0)]
    record = input_errors.summary(input_errors.node_subject(node.pk))
    assert record["count"] == "1"
    assert (
        f"input pulse: pulse count at {t + 5} is before the counter's last reading ({t + 10})"
        in record["last"]
    )
