"""MQTT ingest against the real Mosquitto broker at 127.0.0.1:1883."""

from __future__ import annotations

import time
import uuid

import paho.mqtt.client as mqtt
import pytest

from sensors.devices.mqtt import Batcher, MqttIngestor, parse_message
from sensors.ingest.parse import IngestError
from tests.sensors.conftest import make_node, queued_batches
from tests.wait import wait_for

NOW = 1_750_000_000


def parse(topic, payload, base="emon"):
    return parse_message(topic, payload, base, now=NOW)


def test_parse_topic_per_key_and_json_forms():
    assert parse("emon/emontx1/power1", b"123.5") == ("emontx1", NOW, {"power1": 123.5})
    assert parse("emon/10/t", b" -4 ") == (10, NOW, {"t": -4.0})
    assert parse("emon/emontx1", b'{"a": 1}') == ("emontx1", NOW, {"a": 1.0})


def test_time_in_a_json_payload_is_the_readings_time():
    assert parse("emon/emontx1", b'{"a": 1, "time": 1749999990}') == (
        "emontx1", 1749999990, {"a": 1.0},
    )  # fmt: skip
    # any case, numeric text or ISO 8601 with a zone, as emoncms_mqtt reads it
    assert parse("emon/n", b'{"TIME": "1749999980", "a": 2}')[1] == 1749999980
    assert parse("emon/n", b'{"time": "2025-06-15T15:06:30Z", "a": 2}')[1] == 1750000000 - 10
    # unreadable: emoncms uses the arrival time and keeps the values
    assert parse("emon/n", b'{"time": "soon", "a": 2}') == ("n", NOW, {"a": 2.0})


@pytest.mark.parametrize("t", [946_684_799, NOW + 901])
def test_a_payload_time_outside_the_bounds_is_rejected(t):
    with pytest.raises(IngestError) as info:
        parse("emon/n", f'{{"time": {t}, "a": 1}}'.encode())
    assert info.value.field == "payload.time"


def test_a_base_topic_of_several_levels():
    assert parse("site1/emon/emontx1/power1", b"5", "site1/emon") == (
        "emontx1",
        NOW,
        {"power1": 5.0},
    )
    assert parse("a/b/c/n", b'{"x": 1}', "a/+/c") == ("n", NOW, {"x": 1.0})
    with pytest.raises(IngestError):
        parse("emon/emontx1/power1", b"5", "site1/emon")


def test_names_with_spaces_and_any_script_as_emoncms_allows():
    assert parse("emon/boiler room/external temperature", b"4.5") == (
        "boiler room", NOW, {"external temperature": 4.5},
    )  # fmt: skip
    assert parse("emon/emon.pi", '{"température": 61}'.encode()) == (
        "emon.pi", NOW, {"température": 61.0},
    )  # fmt: skip


def test_deeper_topics_csv_lists_and_boxed_values_are_named_as_emoncms_names_them():
    assert parse("emon/n/heatpump/flow", b"35") == ("n", NOW, {"heatpump_flow": 35.0})
    assert parse("emon/n/hp", b'{"flow": 35}') == ("n", NOW, {"hp_flow": 35.0})
    assert parse("emon/n", b"10,11,12") == ("n", NOW, {"0": 10.0, "1": 11.0, "2": 12.0})
    assert parse("emon/n", b"[10, 11]") == ("n", NOW, {"0": 10.0, "1": 11.0})
    assert parse("emon/n", b'{"power": {"name": "ct1", "value": 10}, "v": {"value": 230}}') == (
        "n", NOW, {"power_ct1": 10.0, "v": 230.0},
    )  # fmt: skip


def test_bad_values_in_a_json_payload_are_skipped_and_the_rest_kept():
    assert parse("emon/n", b'{"a": null, "b": "x", "c": true, "d": NaN, "e": 3}') == (
        "n", NOW, {"e": 3.0},
    )  # fmt: skip


@pytest.mark.parametrize(
    ("topic", "payload", "field"),
    [
        ("other/emontx1/a", b"1", "topic"),
        ("emon/emontx1/a", b"abc", "payload"),
        ("emon/emontx1/a", b"nan", "payload"),
        ("emon/emontx1", b'{"a": null}', "payload"),
        ("emon/emontx1", b"[[1]]", "payload"),
        ("emon/emontx1", b"{", "payload"),
        ("emon/emontx1", b"1" * 65_537, "payload"),
        ("emon/emontx1" + "/x" * 16, b"1", "topic"),
        ("emon/bad node!/a", b"1", "topic"),
        ("emon/emontx1/a", b"\xff", "payload"),
    ],
)
def test_bad_messages_are_rejected_with_the_field(topic, payload, field):
    with pytest.raises(IngestError) as info:
        parse(topic, payload)
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
    ingestor = _publish_through_mosquitto(
        base,
        [
            (f"{base}/emontx1/power1", "250"),
            (f"{base}/emontx1/vrms", "241.5"),
            (f"{base}/emontx1/bad", "oops"),
            (f"{base}/ghost/power1", "1"),
            (f"{base}/retired/power1", "5"),
            (f"{base}/11", '{"power1": 6}'),
        ],
    )
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


@pytest.mark.django_db(transaction=True)
def test_time_base_levels_and_spaces_through_mosquitto(redis_client):
    node, _ = make_node("boiler room", node_id=12)
    base = f"site{uuid.uuid4().hex[:8]}/emon"
    sent_at = int(time.time()) - 120
    _publish_through_mosquitto(
        base,
        [
            (f"{base}/boiler room", f'{{"flow temp": 61.5, "time": {sent_at}}}'),
            (f"{base}/boiler room/external temperature", "4.5"),
        ],
    )
    [(node_pk, rows)] = queued_batches(redis_client)
    assert node_pk == node.pk
    assert rows[0] == [sent_at, {"flow temp": 61.5}]  # the payload's time, not arrival
    assert rows[1][0] >= sent_at + 100 and rows[1][1] == {"external temperature": 4.5}


def _publish_through_mosquitto(base: str, messages: list[tuple[str, str]]) -> MqttIngestor:
    """Subscribe an ingestor to `base`/#, publish `messages` on the local Mosquitto (QoS 1),
    wait until it has them all and its batch window has passed, flush it and stop it."""
    ingestor = MqttIngestor(topic=f"{base}/#", window_s=0.3)
    ingestor.start()
    publisher = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2)
    try:
        assert ingestor.connected.wait(10), "could not subscribe on Mosquitto"
        publisher.connect("127.0.0.1", 1883)
        publisher.loop_start()
        for topic, payload in messages:
            publisher.publish(topic, payload, qos=1).wait_for_publish(5)
        wait_for(lambda: ingestor.stats.messages >= len(messages), 10, "the ingestor to receive"
                 f" {len(messages)} messages", every_s=0.05)  # fmt: skip
        ingestor.flush(now=time.monotonic() + ingestor.batcher.window_s)  # the window has passed
    finally:
        publisher.loop_stop()
        publisher.disconnect()
        ingestor.stop()
    return ingestor
