"""The worker side: sensors, conversions, auto-created inputs, node state, alarms."""

from __future__ import annotations

import json
import time

import pytest

from alarms.models import Alarm
from feeds.models import Feed
from feeds.store import service
from sensors.ingest import node_state as state
from sensors.ingest.processing import ingest_rows
from sensors.models import Sensor
from sensors.tasks import check_silent_nodes
from tests.sensors.conftest import make_node

pytestmark = pytest.mark.django_db

T0 = 1_700_000_000  # aligned to 10 s


def feed_values(feed_id: int, n: int) -> list:
    """The first n 10-second slots from T0 (read's end is inclusive)."""
    return [v for _, v in service.read(feed_id, T0, T0 + (n - 1) * 10, 10)]


def test_unseen_keys_get_a_sensor_and_a_feed_and_are_logged(redis_client):
    node, _ = make_node()
    report = ingest_rows(
        node.pk, [[T0, {"power1": 100.0, "vrms": 240.0}], [T0 + 10, {"power1": 110.0}]]
    )
    assert sorted(report.created_sensors) == ["power1", "vrms"]
    sensor = Sensor.objects.get(node=node, key="power1")
    assert sensor.auto_created
    feed = Feed.objects.get(pk=sensor.feed_id)
    assert str(feed) == "emontx1:power1" and feed.interval == node.interval
    assert sensor.processes == [{"process": "log_to_feed", "feed": feed.pk}]
    assert feed_values(feed.pk, 2) == [100.0, 110.0]
    # A second batch reuses them.
    assert ingest_rows(node.pk, [[T0 + 20, {"power1": 1.0}]]).created_sensors == []
    assert Sensor.objects.filter(node=node).count() == 2


def test_conversion_and_calibration_before_the_processes(redis_client):
    node, _ = make_node()
    feed = Feed.objects.create(name="tank", tag="emontx1", interval=10)
    Sensor.objects.create(node=node, key="t1", kind="rtd_pt100", offset=0.5, feed=feed, params={})
    ingest_rows(node.pk, [[T0, {"t1": 138.5055}]])
    (value,) = feed_values(feed.pk, 1)
    assert value == pytest.approx(100.5, abs=1e-3)
    assert state.last_values(node.pk)["t1"][1] == pytest.approx(100.5, abs=1e-3)


def test_custom_process_list_runs(redis_client):
    node, _ = make_node()
    raw = Feed.objects.create(name="w", tag="n", interval=10)
    kwh = Feed.objects.create(name="kwh", tag="n", interval=10)
    Sensor.objects.create(
        node=node,
        key="p",
        kind="power",
        processes=[
            {"process": "log_to_feed", "feed": raw.pk},
            {"process": "power_to_kwh", "feed": kwh.pk},
        ],
    )
    ingest_rows(node.pk, [[T0 + i * 10, {"p": 3600.0}] for i in range(7)])
    assert feed_values(raw.pk, 7) == [3600.0] * 7
    # 3600 W for 60 s = 0.06 kWh
    assert service.last_value(kwh.pk)[1] == pytest.approx(0.06, abs=1e-6)


def test_pulse_counter_total_survives_a_reboot_and_redelivery(redis_client):
    node, _ = make_node()
    feed = Feed.objects.create(name="gas", tag="n", interval=10)
    Sensor.objects.create(
        node=node, key="pulse", kind="pulse", feed=feed,
        params={"pulses_per_unit": 100, "counter_bits": 16},
    )  # fmt: skip
    batch = [
        [T0, {"pulse": 65500}],
        [T0 + 10, {"pulse": 64}],
        [T0 + 20, {"pulse": 3}],
        [T0 + 30, {"pulse": 5}],
    ]
    ingest_rows(node.pk, batch)
    # 0, +100 pulses (wrap), 3 held (a reboot or a glitch?), 5 confirms the reboot: +5 since
    # boot. Totals 0, 1.0, 1.0, 1.05 m³.
    assert feed_values(feed.pk, 4) == pytest.approx([0.0, 1.0, 1.0, 1.05])
    ingest_rows(node.pk, batch)  # Celery redelivery: nothing counts twice
    assert service.last_value(feed.pk)[1] == pytest.approx(1.05)


def test_bad_conversion_skips_the_value_not_the_batch(redis_client):
    node, _ = make_node()
    feed = Feed.objects.create(name="tc", tag="n", interval=10)
    Sensor.objects.create(node=node, key="tc", kind="thermocouple_k", feed=feed)
    report = ingest_rows(node.pk, [[T0, {"tc": 99.0}], [T0 + 10, {"tc": 4.096}]])
    assert report.conversion_errors == 1
    assert feed_values(feed.pk, 2) == [None, pytest.approx(100.0, abs=0.05)]


def test_node_last_seen_and_last_values(redis_client):
    node, _ = make_node()
    ingest_rows(node.pk, [[T0 + 10, {"a": 2.0}], [T0, {"a": 1.0}]], now=T0 + 15)
    assert state.last_seen(node.pk) == T0 + 15
    # The row that arrived last, as emoncms's set_timevalue sets each row in turn
    # (Modules/input/input_model.php): the same whether the rows came in one request or two.
    assert state.last_values(node.pk) == {"a": (T0, 1.0)}


def test_out_of_range_value_raises_and_clears_an_alarm(redis_client):
    node, _ = make_node()
    sensor = Sensor.objects.create(
        node=node, key="room", kind="temperature", min_valid=-10, max_valid=50
    )
    ingest_rows(node.pk, [[T0, {"room": 85.0}]])
    alarm = Alarm.objects.get(key=f"sensor-range:{sensor.pk}")
    assert alarm.is_open and "85" in alarm.message
    ingest_rows(node.pk, [[T0 + 10, {"room": 90.0}]])
    assert Alarm.objects.filter(key=f"sensor-range:{sensor.pk}").count() == 1
    ingest_rows(node.pk, [[T0 + 20, {"room": 21.0}]])
    alarm.refresh_from_db()
    assert not alarm.is_open


def test_silent_node_alarm_raised_after_three_intervals_and_cleared_on_return(redis_client):
    node, _ = make_node(interval=10)
    now = time.time()
    ingest_rows(node.pk, [[int(now), {"a": 1.0}]], now=now)
    assert check_silent_nodes(now=now + 29)["raised"] == []
    assert check_silent_nodes(now=now + 31)["raised"] == [node.pk]
    assert Alarm.objects.get(key=f"node-silent:{node.pk}").is_open
    assert check_silent_nodes(now=now + 60)["raised"] == []  # raised once
    ingest_rows(node.pk, [[int(now) + 60, {"a": 1.0}]], now=now + 61)
    assert not Alarm.objects.get(key=f"node-silent:{node.pk}").is_open


def test_a_node_whose_posts_wait_for_a_stopped_worker_is_heard_not_silent(client, redis_client):
    """Behind a backlog the drain has not processed a node's posts, but the web accepted them:
    the node is heard (its newest request in its stream), so a stopped worker does not raise an
    alarm per node on top of the backlog alarm. No worker runs here: the posts wait."""
    node, key = make_node(interval=10)
    now = time.time()
    redis_client.hset(state.SEEN_KEY, str(node.pk), int(now - 100))  # processed 100 s ago
    assert check_silent_nodes(now=now)["raised"] == [node.pk]
    r = client.post("/input/post", {"fulljson": json.dumps({"a": 1}), "apikey": key})
    assert r.status_code == 200
    assert check_silent_nodes(now=time.time())["cleared"] == [node.pk]
    assert redis_client.hget(state.SEEN_KEY, str(node.pk)) == str(int(now - 100)).encode()
    # Heard when the web took the request: three intervals after that, silent again.
    assert check_silent_nodes(now=time.time() + 31)["raised"] == [node.pk]


def test_silent_check_clears_alarms_of_nodes_heard_again(redis_client):
    node, _ = make_node(interval=10)
    now = time.time()
    check_silent_nodes(now=now + 1000)  # never posted since registration
    assert Alarm.objects.get(key=f"node-silent:{node.pk}").is_open
    redis_client.hset(state.SEEN_KEY, str(node.pk), int(now + 1000))
    assert check_silent_nodes(now=now + 1001)["cleared"] == [node.pk]
