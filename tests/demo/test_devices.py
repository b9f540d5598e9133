"""The demo's Modbus devices are real pymodbus servers a real client can use."""

import asyncio
import struct

from pymodbus.client import AsyncModbusTcpClient

from demo import layout
from demo.devices import EnergyMeter, RelayBoard


def test_coils_written_by_a_client_are_what_the_simulator_reads():
    async def scenario() -> list[bool]:
        board = RelayBoard("127.0.0.1", 0)
        await board.start()
        client = AsyncModbusTcpClient("127.0.0.1", port=board.port, timeout=2)
        try:
            await client.connect()
            await client.write_coil(layout.COIL_BOILER, True, device_id=layout.RELAY_DEVICE_ID)
            await client.write_coil(layout.ROOMS[0].coil, True, device_id=layout.RELAY_DEVICE_ID)
            await client.write_coil(layout.COIL_BOILER, False, device_id=layout.RELAY_DEVICE_ID)
            readback = await client.read_coils(0, count=8, device_id=layout.RELAY_DEVICE_ID)
            assert not readback.isError()
            assert readback.bits[: layout.ROOMS[0].coil + 1] == [False] * layout.ROOMS[0].coil + [
                True
            ]
            return await board.coils()
        finally:
            client.close()
            await board.stop()

    coils = asyncio.run(scenario())
    assert len(coils) == layout.RELAY_COIL_COUNT
    assert [i for i, on in enumerate(coils) if on] == [layout.ROOMS[0].coil]


def test_meter_registers_read_back_as_float32_high_word_first():
    async def scenario() -> dict[str, float]:
        meter = EnergyMeter("127.0.0.1", 0)
        await meter.start()
        client = AsyncModbusTcpClient("127.0.0.1", port=meter.port, timeout=2)
        try:
            await meter.publish({"voltage": 239.5, "power": -1234.5, "import_kwh": 12345.25})
            await client.connect()
            got = {}
            for reg in layout.METER_REGISTERS:
                rr = await client.read_input_registers(
                    reg.address, count=2, device_id=layout.METER_DEVICE_ID
                )
                assert not rr.isError()
                got[reg.key] = struct.unpack(">f", struct.pack(">HH", *rr.registers))[0]
            return got
        finally:
            client.close()
            await meter.stop()

    got = asyncio.run(scenario())
    assert got["voltage"] == 239.5
    assert got["power"] == -1234.5
    assert got["import_kwh"] == 12345.25
    assert got["frequency"] == 0.0  # never published: still zero


def test_the_mixing_valve_register_starts_fully_open_and_takes_a_clients_write():
    async def scenario() -> tuple[list[int], list[int], list[int]]:
        board = RelayBoard("127.0.0.1", 0)
        await board.start()
        client = AsyncModbusTcpClient("127.0.0.1", port=board.port, timeout=2)
        try:
            at_power_on = await board.holding()
            await client.connect()
            wrote = await client.write_register(
                layout.REG_MIXING_VALVE, 3300, device_id=layout.RELAY_DEVICE_ID
            )
            assert not wrote.isError()
            readback = await client.read_holding_registers(
                layout.REG_MIXING_VALVE, count=1, device_id=layout.RELAY_DEVICE_ID
            )
            assert not readback.isError()
            # Past the board's registers: the board's own refusal, as a real one would.
            beyond = await client.write_register(
                layout.RELAY_HOLDING_COUNT, 1, device_id=layout.RELAY_DEVICE_ID
            )
            assert beyond.isError()
            return at_power_on, readback.registers, await board.holding()
        finally:
            client.close()
            await board.stop()

    at_power_on, readback, holding = asyncio.run(scenario())
    assert at_power_on[layout.REG_MIXING_VALVE] == layout.MIXING_VALVE_RAW_MAX
    assert readback == [3300]
    assert holding[layout.REG_MIXING_VALVE] == 3300
