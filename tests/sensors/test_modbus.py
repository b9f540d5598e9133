"""Modbus meter polling: register decoding, read planning, and a real pymodbus server."""

from __future__ import annotations

import socket
import struct
import time

import pytest

from sensors import state
from sensors.modbus_poll import RegisterSpec, decode, plan_reads, poll_meter
from sensors.models import Alarm, ModbusRegister, Node
from sensors.tasks import poll_modbus_meter, poll_modbus_meters
from tests.sensors.modbus_meter import FC_HOLDING, FC_INPUT, MeterServer, float32_words


def test_decode_16_bit():
    assert decode([0xFFFF], "int16") == -1.0
    assert decode([0xFFFF], "uint16") == 65535.0


def test_decode_32_bit_word_orders():
    high, low = struct.unpack(">2H", struct.pack(">i", -123456))
    assert decode([high, low], "int32", "big") == -123456.0
    assert decode([low, high], "int32", "little") == -123456.0
    assert decode([0x0001, 0x0000], "uint32") == 65536.0
    assert decode(float32_words(230.5), "float32") == 230.5


def test_decode_refuses_wrong_register_count():
    with pytest.raises(ValueError, match="needs 2"):
        decode([1], "float32")


def test_reads_are_grouped_into_contiguous_runs_per_function():
    specs = [
        RegisterSpec("v", 0, "input", "float32", "big"),
        RegisterSpec("i", 6, "input", "float32", "big"),
        RegisterSpec("kwh", 342, "input", "float32", "big"),
        RegisterSpec("set", 10, "holding", "uint16", "big"),
    ]
    plans = [(f, start, count, [s.key for s in run]) for f, start, count, run in plan_reads(specs)]
    assert plans == [
        ("input", 0, 8, ["v", "i"]),
        ("input", 342, 2, ["kwh"]),
        ("holding", 10, 1, ["set"]),
    ]


@pytest.fixture
def meter():
    server = MeterServer(device_id=3).start()
    yield server
    server.stop()


def test_poll_meter_reads_a_real_server(meter):
    meter.set(FC_INPUT, 0, float32_words(241.25))
    meter.set(FC_INPUT, 6, float32_words(12.5))
    meter.set(FC_HOLDING, 20, [0xFFFE])
    specs = [
        RegisterSpec("voltage", 0, "input", "float32", "big"),
        RegisterSpec("current", 6, "input", "float32", "big", 2.0),
        RegisterSpec("offset", 20, "holding", "int16", "big"),
    ]
    values = poll_meter("127.0.0.1", meter.port, 3, specs, timeout_s=2)
    assert values == {"voltage": 241.25, "current": 25.0, "offset": -2.0}


@pytest.mark.django_db
def test_poll_task_ingests_into_feeds_and_alarms_when_the_meter_dies(meter, redis_client):
    node = Node(
        name="meter1", protocol="modbus", interval=10, modbus_host="127.0.0.1",
        modbus_port=meter.port, modbus_device_id=3,
    )  # fmt: skip
    node.set_new_key()
    node.save()
    ModbusRegister.objects.create(node=node, key="power", address=12, data_type="float32")
    meter.set(FC_INPUT, 12, float32_words(1500.0))

    assert poll_modbus_meters() == [node.pk]
    assert poll_modbus_meters() == []  # not due again within its interval
    redis_client.flushdb()  # drop the queued task; run the poll here instead
    poll_modbus_meter(node.pk)
    assert state.last_values(node.pk)["power"][1] == 1500.0
    assert node.sensors.get(key="power").auto_created

    meter.stop()
    started = time.monotonic()
    poll_modbus_meter(node.pk)
    assert not Alarm.objects.filter(key=f"modbus-meter:{node.pk}").exists()  # one miss
    poll_modbus_meter(node.pk)
    assert time.monotonic() - started < 10  # strict timeouts: a dead meter never hangs
    assert Alarm.objects.get(key=f"modbus-meter:{node.pk}").is_open


@pytest.mark.django_db
def test_unanswered_port_times_out(redis_client):
    # A listening socket that never answers Modbus: the client must give up on its timeout.
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen()
    try:
        started = time.monotonic()
        from sensors.modbus_poll import ModbusPollError

        with pytest.raises(ModbusPollError):
            poll_meter(
                "127.0.0.1", silent.getsockname()[1], 1,
                [RegisterSpec("x", 0, "input", "uint16", "big")], timeout_s=0.5,
            )  # fmt: skip
        assert time.monotonic() - started < 5
    finally:
        silent.close()
