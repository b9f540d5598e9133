"""MQTT ingest against the real Mosquitto broker at 127.0.0.1:1883."""

from __future__ import annotations

import time
import uuid

import paho.mqtt.client as mqtt
import pytest

from sensors.ingest import IngestError
from sensors.mqtt import Batcher, MqttIngestor, parse_message
from tests.sensors.conftest import make_node, queued_batches


def test_parse_topic_per_key_and_json_forms():
    assert parse_message("emon/emontx1/power1", b"123.5") == ("emontx1", {"power1": 123.5})
    assert parse_message("emon/10/t", b" -4 ") == (10, {"t": -4.0})
    assert parse_message("emon/emontx1", b'{"a": 1, "time": 5}') == ("emontx1", {"a": 1.0})


@pytest.mark.parametrize(
    ("topic", "payload", "field"),
    [
        ("other/emontx1/a", b"1", "topic"),
        ("emon/emontx1/a", b"abc", "payload"),
        ("emon/emontx1/a", b"nan", "payload"),
        ("emon/emontx1/a/b", b"1", "topic"),
        ("emon/emontx1", b"[1]", "payload"),
        ("emon/bad node!/a", b"1", "topic"),
        ("emon/emontx1/a", b"\xff", "payload"),
    ],
)
def test_bad_messages_are_rejected_with_the_field(topic, payload, field):
    with pytest.raises(IngestError) as info:
        parse_message(topic, payload)
    assert info.value.field == field


def test_batcher_releases_a_node_after_its_window():
    b = Batcher(window_s=1.0)
    b.add("n", 100, {"a": 1.0}, now=0.0)
    b.add("n", 100, {"b": 2.0}, now=0.5)
    b.add("n", 101, {"a": 3.0}, now=0.6)
    assert b.due(0.9) == []
    assert b.due(1.0) == [("n", [[100, {"a": 1.0, "b": 2.0}], [101, {"a": 3.0}]])]
    assert b.due(5.0) == []


@pytest.mark.django_db(transaction=True)
def test_messages_from_mosquitto_become_one_task_per_node(redis_client):
    node, _ = make_node("emontx1", node_id=10)
    retired, _ = make_node("retired", node_id=11)
    retired.enabled = False
    retired.save()
    base = f"t{uuid.uuid4().hex[:8]}"
    ingestor = MqttIngestor(topic=f"{base}/#", window_s=0.3)
    ingestor.start()
    publisher = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2)
    try:
        assert ingestor.connected.wait(10), "could not subscribe on Mosquitto"
        publisher.connect("127.0.0.1", 1883)
        publisher.loop_start()
        for topic, payload in [
            (f"{base}/emontx1/power1", "250"),
            (f"{base}/emontx1/vrms", "241.5"),
            (f"{base}/emontx1/bad", "oops"),
            (f"{base}/ghost/power1", "1"),
            (f"{base}/retired/power1", "5"),
            (f"{base}/11", '{"power1": 6}'),
        ]:
            publisher.publish(topic, payload, qos=1).wait_for_publish(5)
        deadline = time.monotonic() + 10
        while ingestor.stats.messages < 6 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.35)
        ingestor.flush()
    finally:
        publisher.loop_stop()
        publisher.disconnect()
        ingestor.stop()
    batches = queued_batches(redis_client)
    assert len(batches) == 1
    node_pk, rows = batches[0]
    assert node_pk == node.pk
    assert {k: v for _, values in rows for k, v in values.items()} == {
        "power1": 250.0,
        "vrms": 241.5,
    }
    assert ingestor.stats.rejected == 1 and ingestor.stats.unknown_nodes == 1
    # By name and by radio id: the disabled node's readings are dropped, not queued.
    assert ingestor.stats.disabled_nodes == 2
