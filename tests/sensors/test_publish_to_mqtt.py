"""publish_to_mqtt (emoncms process 35): an input process publishes its value to an MQTT
topic through bms_mqtt's connection to the real Mosquitto at 127.0.0.1:1883."""

from __future__ import annotations

import queue
import threading
import uuid

import paho.mqtt.client as mqtt
import pytest

from sensors.devices import mqtt_publish
from sensors.devices.mqtt import MqttIngestor
from sensors.ingest.processing import ingest_rows
from sensors.models import Sensor
from tests.sensors.conftest import make_node

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_processed_value_is_published_on_its_topic(redis_client):
    node, _ = make_node()
    topic = f"t{uuid.uuid4().hex[:8]}/power/kitchen"
    Sensor.objects.create(
        node=node, key="p",
        processes=[{"process": "scale", "arg": 2}, {"process": "publish_to_mqtt", "topic": topic}],
    )  # fmt: skip
    received: queue.Queue = queue.Queue()
    subscribed = threading.Event()
    listener = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2)
    listener.on_connect = lambda c, *_: c.subscribe(topic, qos=0)
    listener.on_subscribe = lambda *_: subscribed.set()
    listener.on_message = lambda _c, _u, m: received.put((m.topic, m.payload.decode()))
    listener.connect("127.0.0.1", 1883)
    listener.loop_start()
    ingestor = MqttIngestor(topic=f"unused{uuid.uuid4().hex[:6]}/#", window_s=0.1)
    runner = threading.Thread(target=ingestor.run, kwargs={"tick_s": 0.05}, daemon=True)
    try:
        assert subscribed.wait(10), "could not subscribe on Mosquitto"
        ingest_rows(node.pk, [[1_700_000_000, {"p": 115.25}]])
        assert redis_client.hget(mqtt_publish.PUBLISH_KEY, topic) == b"230.5"  # queued
        runner.start()
        assert received.get(timeout=10) == (topic, "230.5")
        assert redis_client.hlen(mqtt_publish.PUBLISH_KEY) == 0  # taken, not sent twice
    finally:
        ingestor.request_stop()
        runner.join(10)
        listener.loop_stop()
        listener.disconnect()


def test_the_queue_is_bounded(redis_client):
    redis_client.hset(
        mqtt_publish.PUBLISH_KEY,
        mapping={f"t/{i}": "1" for i in range(mqtt_publish.MAX_PENDING_TOPICS)},
    )
    assert mqtt_publish.queue([("t/new", 1, 2.0)]) == 0
    redis_client.hdel(mqtt_publish.PUBLISH_KEY, "t/0")
    assert mqtt_publish.queue([("t/new", 1, 2.0)]) == 1
