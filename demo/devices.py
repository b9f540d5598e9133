"""The demo site's Modbus TCP devices: a relay board (coils the control loop writes) and a
grid energy meter (input registers the poll task reads). Real pymodbus servers; no Django.

Both run in the simulator's asyncio loop. The simulator reads the coils and writes the meter
registers through the server's own datastore (`server.context`), the same memory a Modbus
client sees, so what the control loop switched is exactly what the physics uses.
"""

from __future__ import annotations

import logging

from pymodbus.server import ModbusTcpServer
from pymodbus.simulator import DataType, SimData, SimDevice

from demo import layout
from demo.plant import float32_registers

log = logging.getLogger("demo")

FC_READ_COILS = 1
FC_READ_HOLDING_REGISTERS = 3
FC_READ_INPUT_REGISTERS = 4
METER_REGISTER_COUNT = 80  # SDM630 map up to import kWh at 72-73


def _bits(count: int) -> list[SimData]:
    return [SimData(0, count=count, values=False, datatype=DataType.BITS)]


def _registers(count: int) -> list[SimData]:
    return [SimData(0, count=count, values=0, datatype=DataType.REGISTERS)]


def _holding() -> list[SimData]:
    """The relay board's holding registers, at power-on: the mixing valve's output module starts
    fully open (its configured power-on value), so the radiators get the boiler's water until
    the weather compensation steers it, as a plant without the BMS would run."""
    values = [0] * layout.RELAY_HOLDING_COUNT
    values[layout.REG_MIXING_VALVE] = layout.MIXING_VALVE_RAW_MAX
    return [SimData(0, values=values, datatype=DataType.REGISTERS)]


class DeviceStartError(RuntimeError):
    """A simulated device could not listen on its address (usually: the port is in use)."""


class ModbusDevice:
    def __init__(self, name: str, host: str, port: int, device: SimDevice) -> None:
        self.name = name
        self.host = host
        self.requested_port = port
        self.device_id = device.id
        self.server = ModbusTcpServer(device, address=(host, port))

    async def start(self) -> None:
        try:
            await self.server.serve_forever(background=True)
        except (RuntimeError, OSError) as exc:  # pymodbus says only "Could not start listen"
            raise DeviceStartError(
                f"{self.name} could not listen on {self.host}:{self.requested_port}: {exc}"
            ) from exc
        log.info("%s listening on Modbus TCP %s:%d", self.name, self.host, self.port)

    @property
    def port(self) -> int:
        """The bound port (useful when asked for port 0 in tests)."""
        transport = self.server.transport
        if transport is None or not getattr(transport, "sockets", None):
            return self.requested_port
        return transport.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        await self.server.shutdown()
        log.info("%s stopped", self.name)


class RelayBoard(ModbusDevice):
    def __init__(self, host: str, port: int) -> None:
        # Separate blocks (coils, discrete inputs, holding, input): coil n is bit address n.
        device = SimDevice(
            layout.RELAY_DEVICE_ID,
            simdata=(
                _bits(layout.RELAY_COIL_COUNT),
                _bits(layout.RELAY_COIL_COUNT),
                _holding(),
                _registers(1),
            ),
        )
        super().__init__("Relay board", host, port, device)

    async def _read(self, function_code: int, count: int) -> list:
        values = await self.server.context.async_getValues(self.device_id, function_code, 0, count)
        if not isinstance(values, list):
            raise RuntimeError(f"relay board datastore refused a read: {values!r}")
        return values

    async def coils(self) -> list[bool]:
        return [bool(v) for v in await self._read(FC_READ_COILS, layout.RELAY_COIL_COUNT)]

    async def holding(self) -> list[int]:
        """The holding registers (the mixing valve's output at layout.REG_MIXING_VALVE)."""
        values = await self._read(FC_READ_HOLDING_REGISTERS, layout.RELAY_HOLDING_COUNT)
        return [int(v) for v in values]


class EnergyMeter(ModbusDevice):
    def __init__(self, host: str, port: int) -> None:
        device = SimDevice(
            layout.METER_DEVICE_ID,
            simdata=(
                _bits(16),
                _bits(16),
                _registers(METER_REGISTER_COUNT),
                _registers(METER_REGISTER_COUNT),
            ),
        )
        super().__init__("Grid meter", host, port, device)

    async def publish(self, values: dict[str, float]) -> None:
        """Write each register of the map with its current value (float32, high word first)."""
        for reg in layout.METER_REGISTERS:
            if reg.key in values:
                await self.server.context.async_setValues(
                    self.device_id,
                    FC_READ_INPUT_REGISTERS,
                    reg.address,
                    float32_registers(values[reg.key]),
                )
