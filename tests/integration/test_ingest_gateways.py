"""Modbus meters and MQTT through the real worker: a real pymodbus server polled by the
beat task, and the real Mosquitto broker, both ending in the feed store."""

from __future__ import annotations

import shutil
import time
import uuid

import paho.mqtt.client as mqtt
import pytest
from django.conf import settings

from alarms.models import Alarm
from sensors import cache
from sensors.devices.mqtt import MqttIngestor
from sensors.models import ModbusRegister, Node
from sensors.tasks import poll_modbus_meters
from tests.integration.test_ingest_e2e import stored, wait_for_feed
from tests.sensors.conftest import make_node
from tests.sensors.modbus_meter import FC_INPUT, MeterServer, float32_words
from tests.wait import wait_for

pytestmark = [pytest.mark.integration]


@pytest.fixture
def clean(transactional_db, celery_worker, redis_client):
    cache.clear_all()
    shutil.rmtree(settings.BMS_FEED_DIR, ignore_errors=True)
    settings.BMS_FEED_DIR.mkdir(parents=True, exist_ok=True)
    yield
    cache.clear_all()


@pytest.fixture
def meter():
    server = MeterServer(device_id=2).start()
    yield server
    server.stop()


def test_modbus_meter_polled_by_the_beat_task_reaches_its_feed(clean, meter):
    node = Node(
        name="gridmeter", protocol="modbus", interval=5, modbus_host="127.0.0.1",
        modbus_port=meter.port, modbus_device_id=2,
    )  # fmt: skip
    node.set_new_key()
    node.save()
    ModbusRegister.objects.create(node=node, key="import_kwh", address=72, data_type="float32")
    ModbusRegister.objects.create(
        node=node, key="power", address=12, data_type="int32", word_order="CDAB", scale=0.1
    )
    meter.set(FC_INPUT, 72, float32_words(1234.5))
    meter.set(FC_INPUT, 12, [52345 % 65536, 0])  # low word first: 52345 -> 5234.5 W

    assert poll_modbus_meters.delay() is not None  # beat's task, run by the worker
    assert stored(wait_for_feed(node, "import_kwh", 1)).popitem()[1] == 1234.5
    assert stored(wait_for_feed(node, "power", 1)).popitem()[1] == pytest.approx(5234.5)
    assert not Alarm.objects.filter(key=f"modbus-meter:{node.pk}", cleared_at=None).exists()


def test_mqtt_messages_reach_their_feed(clean):
    node, _ = make_node("emonpi", node_id=5)
    base = f"t{uuid.uuid4().hex[:8]}"
    ingestor = MqttIngestor(topic=f"{base}/#", window_s=0.2)
    ingestor.start()
    publisher = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2)
    try:
        assert ingestor.connected.wait(10)
        publisher.connect("127.0.0.1", 1883)
        publisher.loop_start()
        publisher.publish(f"{base}/emonpi/power1", "321.5", qos=1).wait_for_publish(5)
        publisher.publish(f"{base}/5/t1", "19.25", qos=1).wait_for_publish(5)
        wait_for(lambda: ingestor.stats.messages >= 2, 10, "the ingestor to receive 2 messages",
                 every_s=0.05)  # fmt: skip
        ingestor.flush(now=time.monotonic() + ingestor.batcher.window_s)  # the window has passed
    finally:
        publisher.loop_stop()
        publisher.disconnect()
        ingestor.stop()
    assert list(stored(wait_for_feed(node, "power1", 1)).values()) == [321.5]
    assert list(stored(wait_for_feed(node, "t1", 1)).values()) == [19.25]
