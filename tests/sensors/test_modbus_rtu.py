"""Modbus RTU over a serial line: a real pymodbus RTU server process with three meters (unit
ids 1, 2 and 5) on one end of a socat pseudo-terminal pair, polled as one RS-485 bus."""

from __future__ import annotations

import json
import re
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from alarms.models import Alarm
from sensors.devices.modbus_maps import shipped_map
from sensors.devices.modbus_meters import apply_register_map, bus_lock_key, poll_bus
from sensors.devices.modbus_poll import MeterReader, RegisterSpec, serial_client
from sensors.ingest import node_state as state
from sensors.models import ModbusBus, Node
from sensors.tasks import poll_modbus_bus, poll_modbus_meters

pytestmark = pytest.mark.skipif(shutil.which("socat") is None, reason="socat is not installed")
ROOT = Path(__file__).resolve().parents[2]


def f32(value: float) -> list[int]:
    return list(struct.unpack(">2H", struct.pack(">f", value)))


def f32_cdab(value: float) -> list[int]:
    return f32(value)[::-1]


# Unit 1: an SDM120 (shipped map). Unit 2: an Itron heat meter card (holding registers, scaled).
# Unit 5: a meter with its own word-swapped map, missing register 4 (it answers exception 02).
UNITS = {
    "1": {"input": {"0": f32(231.5), "6": f32(4.25), "12": f32(980.0), "72": f32(1234.5)}},
    "2": {"holding": {"2": f32(8765.0), "10": f32(654.0), "12": f32(402.0)}},
    "5": {"input": {"0": f32_cdab(11.0), "2": f32_cdab(22.0), "6": f32_cdab(33.0)},
          "holes": {"input": [4, 5]}},
}  # fmt: skip


@pytest.fixture
def rtu_bus(tmp_path):
    socat = subprocess.Popen(
        ["socat", "-d", "-d", "pty,raw,echo=0", "pty,raw,echo=0"],
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    ports: list[str] = []
    deadline = time.monotonic() + 10
    while len(ports) < 2 and time.monotonic() < deadline:
        line = socat.stderr.readline()
        found = re.search(r"PTY is (/dev/pts/\d+)", line)
        if found:
            ports.append(found.group(1))
    assert len(ports) == 2, "socat made no pty pair"
    config = tmp_path / "units.json"
    config.write_text(json.dumps({"units": UNITS, "baudrate": 19200}))
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.sensors.modbus_rtu_server", ports[0], str(config)],
        cwd=ROOT, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert server.stdout.readline().strip() == "ready"
        yield ports[1]
    finally:
        server.terminate()
        server.wait(10)
        socat.terminate()
        socat.wait(10)


def test_several_unit_ids_answer_on_one_serial_line(rtu_bus):
    client = serial_client(rtu_bus, baudrate=19200, parity="N", stopbits=1, timeout_s=1)
    assert client.connect()
    try:
        sdm = MeterReader(client, 1, max_block=80).read(
            [RegisterSpec("v", 0, "input", "float32"), RegisterSpec("kwh", 72, "input", "float32")]
        )
        swapped = MeterReader(client, 5, max_block=80).read(
            [RegisterSpec(k, a, "input", "float32", "CDAB") for k, a in (("a", 0), ("b", 2),
                                                                        ("gone", 4), ("c", 6))]
        )  # fmt: skip
    finally:
        client.close()
    assert sdm.values == {"v": 231.5, "kwh": 1234.5}
    assert swapped.values == {"a": 11.0, "b": 22.0, "c": 33.0}
    assert swapped.errors == {"gone": "the meter answered exception 02 (illegal data address)"}


@pytest.mark.django_db
def test_a_bus_of_meters_is_polled_in_turn_with_shipped_maps(rtu_bus, redis_client):
    bus = ModbusBus.objects.create(name="plant rs485", port=rtu_bus, baudrate=19200, timeout=0.5)
    nodes = {}
    for unit, name, template in ((1, "sdm120", "eastron-sdm120"), (2, "heat", "itron-cf-echo-ii")):
        node = Node(name=name, protocol="modbus", modbus_bus=bus, modbus_device_id=unit)
        node.set_new_key()
        node.full_clean()
        node.save()
        document = shipped_map(template)
        apply_register_map(node, document["registers"], document["max_block"])
        nodes[unit] = node
    odd = Node(name="odd", protocol="modbus", modbus_bus=bus, modbus_device_id=5)
    odd.set_new_key()
    odd.save()
    apply_register_map(odd, [
        {"key": "a", "address": 0, "word_order": "CDAB"},
        {"key": "gone", "address": 4, "word_order": "CDAB"},
        {"key": "c", "address": 6, "word_order": "CDAB"},
    ])  # fmt: skip

    queued = poll_modbus_meters()  # one bus task for the three meters, not three tasks
    assert sorted(queued) == sorted([nodes[1].pk, nodes[2].pk, odd.pk])
    redis_client.flushdb()
    report = poll_modbus_bus(bus.pk)["meters"]

    sdm = report[nodes[1].pk]
    assert sdm["values"]["voltage"] == 231.5 and sdm["values"]["import_kwh"] == 1234.5
    heat = report[nodes[2].pk]["values"]
    assert heat["heat_kwh"] == 8765.0
    assert heat["flow_temperature"] == pytest.approx(65.4)  # sent in tenths of a degree
    assert heat["return_temperature"] == pytest.approx(40.2)
    assert report[odd.pk]["values"] == {"a": 11.0, "c": 33.0}
    assert "exception 02" in report[odd.pk]["errors"]["gone"]
    assert state.last_values(nodes[1].pk)["power"][1] == 980.0
    assert nodes[2].sensors.get(key="flow_temperature").unit == "°C"  # the map made its input

    poll_modbus_bus(bus.pk)
    alarm = Alarm.objects.get(key=f"modbus-register:{odd.pk}:gone", cleared_at=None)
    assert "bus plant rs485, unit 5" in alarm.message


@pytest.mark.django_db
def test_a_bus_held_by_another_poll_is_not_talked_over(rtu_bus, redis_client):
    bus = ModbusBus.objects.create(name="busy", port=rtu_bus, baudrate=19200, timeout=0.5)
    lock = redis_client.lock(bus_lock_key(bus.pk), timeout=30)
    assert lock.acquire(blocking=False)
    try:
        assert poll_bus(bus) == {"busy": True}
    finally:
        lock.release()
    assert "meters" in poll_bus(bus)


@pytest.mark.django_db
def test_a_bus_whose_port_cannot_open_fails_its_meters_quickly(redis_client):
    bus = ModbusBus.objects.create(name="unplugged", port="/dev/ttyUSB-not-there", timeout=0.2)
    node = Node(name="lost", protocol="modbus", modbus_bus=bus, modbus_device_id=1)
    node.set_new_key()
    node.save()
    apply_register_map(node, [{"key": "v", "address": 0}])
    poll_bus(bus)
    poll_bus(bus)
    alarm = Alarm.objects.get(key=f"modbus-meter:{node.pk}", cleared_at=None)
    assert "cannot open /dev/ttyUSB-not-there" in alarm.message
