"""Modbus meter polling: decoding in every byte and word order, read planning, and a real
pymodbus TCP server that refuses, mutes and limits requests as real meters do."""

from __future__ import annotations

import socket
import struct

import pytest
from pymodbus.constants import ExcCodes

from alarms.models import Alarm
from sensors.devices.modbus_poll import (
    ModbusPollError,
    RegisterSpec,
    decode,
    plan_reads,
    poll_meter,
)
from sensors.ingest import node_state as state
from sensors.models import ModbusRegister, Node
from sensors.tasks import poll_modbus_meter, poll_modbus_meters
from tests.sensors.modbus_meter import FC_HOLDING, FC_INPUT, MeterServer, float32_words
from tests.wait import returns_within

CODES = {"int16": "h", "uint16": "H", "int32": "i", "uint32": "I", "int64": "q",
         "uint64": "Q", "float32": "f", "float64": "d"}  # fmt: skip
SAMPLES = {"int16": -12345, "uint16": 54321, "int32": -123456789, "uint32": 3_000_000_001,
           "int64": -1_234_567_890_123_456, "uint64": 18_000_000_000_000_000_001,
           "float32": 230.5, "float64": -12345.678901234}  # fmt: skip


def words(raw: bytes) -> list[int]:
    return list(struct.unpack(f">{len(raw) // 2}H", raw))


def laid_out(value, data_type: str, order: str) -> list[int]:
    """The registers a meter sends, built by hand from the value's big-endian bytes A B C D..."""
    raw = struct.pack(">" + CODES[data_type], value)
    if order == "ABCD":
        return words(raw)
    if order == "BADC":  # each word's two bytes swapped
        return words(b"".join(raw[i : i + 2][::-1] for i in range(0, len(raw), 2)))
    if order == "CDAB":  # words in reverse order, bytes in each word as they are
        return words(raw)[::-1]
    return words(struct.pack("<" + CODES[data_type], value))  # DCBA: little-endian


@pytest.mark.parametrize("order", ["ABCD", "BADC", "CDAB", "DCBA"])
@pytest.mark.parametrize("data_type", list(CODES))
def test_every_type_decodes_in_every_word_order(data_type, order):
    value = SAMPLES[data_type]
    decoded = decode(laid_out(value, data_type, order), data_type, order)
    if data_type == "float32":
        assert decoded == struct.unpack(">f", struct.pack(">f", value))[0]
    elif data_type == "float64":
        assert decoded == value
    else:
        assert decoded == float(value)


def test_the_four_orders_of_one_float32_as_meter_manuals_print_them():
    # 230.5 is 0x43668000: A=43 B=66 C=80 D=00.
    assert decode([0x4366, 0x8000], "float32", "ABCD") == 230.5
    assert decode([0x6643, 0x0080], "float32", "BADC") == 230.5
    assert decode([0x8000, 0x4366], "float32", "CDAB") == 230.5
    assert decode([0x0080, 0x6643], "float32", "DCBA") == 230.5


def test_a_64_bit_counter_word_swapped_puts_the_lowest_word_first():
    # 0x0001_0002_0003_0004 sent low word first.
    assert decode([4, 3, 2, 1], "uint64", "CDAB") == float(0x0001_0002_0003_0004)
    assert decode([0x0400, 0x0300, 0x0200, 0x0100], "uint64", "DCBA") == float(
        0x0001_0002_0003_0004
    )


def test_16_bit_values_swap_bytes_only_in_the_byte_swapped_orders():
    assert decode([0x0102], "uint16", "ABCD") == 0x0102
    assert decode([0x0102], "uint16", "CDAB") == 0x0102
    assert decode([0x0102], "uint16", "BADC") == 0x0201
    assert decode([0xFFFE], "int16", "DCBA") == float(struct.unpack("<h", b"\xff\xfe")[0])


def test_decode_refuses_wrong_register_count_and_unknown_orders():
    with pytest.raises(ValueError, match="needs 2"):
        decode([1], "float32")
    with pytest.raises(ValueError, match="needs 4"):
        decode([1, 2], "float64")
    with pytest.raises(ValueError, match="word order"):
        decode([1, 2], "int32", "big")


def test_reads_are_grouped_into_contiguous_runs_per_function():
    specs = [
        RegisterSpec("v", 0, "input", "float32"),
        RegisterSpec("i", 6, "input", "float32"),
        RegisterSpec("kwh", 342, "input", "float32"),
        RegisterSpec("set", 10, "holding", "uint16"),
    ]
    plans = [(b.function, b.start, b.count, [s.key for s in b.specs]) for b in plan_reads(specs)]
    assert plans == [
        ("input", 0, 8, ["v", "i"]),
        ("input", 342, 2, ["kwh"]),
        ("holding", 10, 1, ["set"]),
    ]


def test_blocks_never_pass_the_meters_limit():
    specs = [RegisterSpec(f"r{a}", a, "input", "float64") for a in range(0, 400, 4)]
    blocks = plan_reads(specs, max_block=22)
    assert max(b.count for b in blocks) <= 22
    assert sum(len(b.specs) for b in blocks) == 100
    assert len(blocks) == 100 // 5  # five float64 (20 registers) fit, a sixth would make 24
    assert max(b.count for b in plan_reads(specs, max_block=500)) <= 125  # the protocol's own


@pytest.fixture
def meter():
    server = MeterServer(device_id=3, registers=200).start()
    yield server
    server.stop()


def test_poll_meter_reads_a_real_server(meter):
    meter.set(FC_INPUT, 0, float32_words(241.25))
    meter.set(FC_INPUT, 6, float32_words(12.5))
    meter.set(FC_HOLDING, 20, [0xFFFE])
    specs = [
        RegisterSpec("voltage", 0, "input", "float32"),
        RegisterSpec("current", 6, "input", "float32", scale=2.0),
        RegisterSpec("offset", 20, "holding", "int16", offset=273.15),
    ]
    result = poll_meter("127.0.0.1", meter.port, 3, specs, timeout_s=2)
    assert result.values == {"voltage": 241.25, "current": 25.0, "offset": -2.0 + 273.15}
    assert result.errors == {}


def test_every_order_and_type_reads_back_from_a_real_server(meter):
    specs, address = [], 0
    for data_type in CODES:
        for order in ("ABCD", "BADC", "CDAB", "DCBA"):
            registers = laid_out(SAMPLES[data_type], data_type, order)
            meter.set(FC_HOLDING, address, registers)
            specs.append(RegisterSpec(f"{data_type}_{order}", address, "holding", data_type, order))
            address += len(registers)
    result = poll_meter("127.0.0.1", meter.port, 3, specs, timeout_s=2, max_block=40)
    assert result.errors == {}
    for data_type in CODES:
        for order in ("ABCD", "BADC", "CDAB", "DCBA"):
            expected = SAMPLES[data_type]
            if data_type == "float32":
                expected = struct.unpack(">f", struct.pack(">f", expected))[0]
            assert result.values[f"{data_type}_{order}"] == float(expected), (data_type, order)
    assert max(count for _, _, count in meter.requests) <= 40


def test_a_refused_register_costs_only_itself(meter):
    for address, value in ((0, 230.0), (2, 5.0), (4, 1150.0)):
        meter.set(FC_INPUT, address, float32_words(value))
    meter.refuse[2] = ExcCodes.ILLEGAL_ADDRESS
    specs = [RegisterSpec(k, a, "input", "float32") for k, a in (("v", 0), ("i", 2), ("p", 4))]
    result = poll_meter("127.0.0.1", meter.port, 3, specs, timeout_s=1)
    assert result.values == {"v": 230.0, "p": 1150.0}
    assert result.errors == {"i": "the meter answered exception 02 (illegal data address)"}
    # One block of 6 registers, refused; then the three registers one by one.
    assert meter.requests == [(4, 0, 6), (4, 0, 2), (4, 2, 2), (4, 4, 2)]


def test_a_float_the_meter_reports_as_nan_is_skipped_without_an_error(meter):
    meter.set(FC_INPUT, 0, float32_words(float("nan")) + float32_words(7.0))
    specs = [
        RegisterSpec("unwired", 0, "input", "float32"),
        RegisterSpec("ok", 2, "input", "float32"),
    ]
    result = poll_meter("127.0.0.1", meter.port, 3, specs, timeout_s=1)
    assert (result.values, result.errors) == ({"ok": 7.0}, {})


def test_a_meter_with_a_smaller_block_limit_is_read_register_by_register(meter):
    meter.max_block = 4
    meter.set(FC_INPUT, 0, float32_words(1.0) + float32_words(2.0) + float32_words(3.0))
    specs = [RegisterSpec(k, a, "input", "float32") for k, a in (("a", 0), ("b", 2), ("c", 4))]
    result = poll_meter("127.0.0.1", meter.port, 3, specs, timeout_s=1)
    assert result.values == {"a": 1.0, "b": 2.0, "c": 3.0}
    # With the meter's limit configured, no request is refused at all.
    meter.requests.clear()
    result = poll_meter("127.0.0.1", meter.port, 3, specs, timeout_s=1, max_block=4)
    assert result.values == {"a": 1.0, "b": 2.0, "c": 3.0}
    # Which requests, not how many: on a loaded machine a 1 s answer can be late and the
    # poll's bounded retry asks the same block again (CI saw [4, 2, 2]).
    assert sorted(set(meter.requests)) == [(4, 0, 4), (4, 4, 2)]


def test_a_register_that_never_answers_times_out_alone_with_bounded_retries(meter):
    meter.set(FC_INPUT, 0, float32_words(50.0))
    meter.set(FC_INPUT, 10, float32_words(60.0))
    meter.mute = {4}
    specs = [
        RegisterSpec("a", 0, "input", "float32"),
        RegisterSpec("slow", 4, "input", "float32"),
        RegisterSpec("b", 10, "input", "float32"),
    ]
    result = poll_meter("127.0.0.1", meter.port, 3, specs, timeout_s=0.4, retries=1)
    assert result.values == {"a": 50.0, "b": 60.0}
    assert result.errors["slow"].startswith("no answer")
    # The block (2 tries) and the register alone (2 tries): four timeouts, no more.
    muted = [r for r in meter.requests if r[1] <= 4 < r[1] + r[2]]
    assert len(muted) == 4, meter.requests


def test_the_poll_deadline_bounds_a_meter_that_mutes_everything_after_answering(meter):
    specs = [RegisterSpec(f"r{a}", a, "input", "uint16") for a in range(0, 200, 20)]
    meter.mute = set(range(20, 200))
    result = poll_meter("127.0.0.1", meter.port, 3, specs, timeout_s=0.3, retries=0, deadline_s=1.0)
    assert result.values == {"r0": 0.0}
    assert any("passed 1.0 s" in error for error in result.errors.values())


def test_a_meter_that_answers_nothing_fails_as_a_whole(meter):
    meter.mute = set(range(200))
    with pytest.raises(ModbusPollError, match="no answer"):
        poll_meter(
            "127.0.0.1", meter.port, 3,
            [RegisterSpec("a", 0, "input", "uint16"), RegisterSpec("b", 1, "input", "uint16")],
            timeout_s=0.3, retries=0,
        )  # fmt: skip


def _meter_node(meter, name="meter1") -> Node:
    node = Node(
        name=name, protocol="modbus", interval=10, modbus_host="127.0.0.1",
        modbus_port=meter.port, modbus_device_id=3,
    )  # fmt: skip
    node.set_new_key()
    node.save()
    return node


@pytest.mark.django_db
def test_poll_task_ingests_into_feeds_and_alarms_when_the_meter_dies(meter, redis_client):
    node = _meter_node(meter)
    ModbusRegister.objects.create(node=node, key="power", address=12, data_type="float32")
    meter.set(FC_INPUT, 12, float32_words(1500.0))

    assert poll_modbus_meters() == [node.pk]
    assert poll_modbus_meters() == []  # not due again within its interval
    redis_client.flushdb()  # drop the queued task; run the poll here instead
    poll_modbus_meter(node.pk)
    assert state.last_values(node.pk)["power"][1] == 1500.0
    assert node.sensors.get(key="power").auto_created

    meter.stop()
    poll_modbus_meter(node.pk)
    assert not Alarm.objects.filter(key=f"modbus-meter:{node.pk}").exists()  # one miss
    poll_modbus_meter(node.pk)
    assert Alarm.objects.get(key=f"modbus-meter:{node.pk}").is_open


@pytest.mark.django_db
def test_a_refused_register_raises_its_own_alarm_and_clears_when_it_reads_again(
    meter, redis_client
):
    node = _meter_node(meter, "plant-sdm")
    ModbusRegister.objects.create(node=node, key="power", address=12, data_type="float32")
    ModbusRegister.objects.create(node=node, key="kwh", address=14, data_type="float32")
    meter.set(FC_INPUT, 12, float32_words(900.0))
    meter.set(FC_INPUT, 14, float32_words(42.5))
    meter.refuse[14] = ExcCodes.ILLEGAL_ADDRESS
    alarm_key = f"modbus-register:{node.pk}:kwh"

    report = poll_modbus_meter(node.pk)
    assert report["values"] == {"power": 900.0}
    assert state.last_values(node.pk)["power"][1] == 900.0  # the good register still lands
    assert not Alarm.objects.filter(key=alarm_key).exists()  # one miss is not yet an alarm
    poll_modbus_meter(node.pk)
    alarm = Alarm.objects.get(key=alarm_key, cleared_at=None)
    assert "plant-sdm" in alarm.message and "kwh (input 14, float32 ABCD)" in alarm.message
    assert "exception 02 (illegal data address)" in alarm.message
    assert not Alarm.objects.filter(key=f"modbus-meter:{node.pk}").exists()  # the meter is fine

    meter.refuse.clear()
    poll_modbus_meter(node.pk)
    alarm.refresh_from_db()
    assert alarm.cleared_at is not None
    assert state.last_values(node.pk)["kwh"][1] == 42.5


@pytest.mark.django_db
def test_unanswered_port_times_out(redis_client):
    # A listening socket that never answers Modbus: the client must give up on its timeout.
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen()
    try:
        with pytest.raises(ModbusPollError):
            returns_within(
                lambda: poll_meter(
                    "127.0.0.1", silent.getsockname()[1], 1,
                    [RegisterSpec("x", 0, "input", "uint16")], timeout_s=0.5,
                ),
                60,
                "a poll of a port that never answers",
            )  # fmt: skip
    finally:
        silent.close()
