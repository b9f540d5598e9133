"""Poll Modbus TCP meters (pymodbus 3.16) for the registers in their ModbusRegister map.

Decoding is our own struct code (pure, unit-tested): 16-bit registers are big-endian on the
wire; 32-bit values span two registers whose order varies by make ("word order"). Registers
are read in as few requests as possible (contiguous runs, at most 120 registers each), and
every request is bounded by the client's timeout with no retries, so a dead meter costs at
most a few seconds of one short task and never blocks the other meters' polls.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

from pymodbus.client import ModbusTcpClient
from pymodbus.exceptions import ModbusException

REGISTER_COUNT = {"int16": 1, "uint16": 1, "int32": 2, "uint32": 2, "float32": 2}
_FORMATS = {"int16": ">h", "uint16": ">H", "int32": ">i", "uint32": ">I", "float32": ">f"}
MAX_REGISTERS_PER_READ = 120
MAX_GAP = 8  # read across small gaps rather than send another request


class ModbusPollError(Exception):
    pass


@dataclass(frozen=True)
class RegisterSpec:
    key: str
    address: int
    function: str  # "input" | "holding"
    data_type: str
    word_order: str  # "big" (high word first) | "little"
    scale: float = 1.0


def decode(registers: list[int], data_type: str, word_order: str = "big") -> float:
    """One value from its registers (each 0..65535)."""
    count = REGISTER_COUNT.get(data_type)
    if count is None:
        raise ValueError(f"unknown data type {data_type!r}")
    if len(registers) != count:
        raise ValueError(f"{data_type} needs {count} register(s), got {len(registers)}")
    words = list(registers)
    if count == 2 and word_order == "little":
        words.reverse()
    raw = struct.pack(f">{count}H", *words)
    return float(struct.unpack(_FORMATS[data_type], raw)[0])


def plan_reads(specs: list[RegisterSpec]) -> list[tuple[str, int, int, list[RegisterSpec]]]:
    """Group registers into (function, start, count, specs) requests."""
    plans: list[tuple[str, int, int, list[RegisterSpec]]] = []
    for function in ("input", "holding"):
        run: list[RegisterSpec] = []
        start = end = 0
        for spec in sorted((s for s in specs if s.function == function), key=lambda s: s.address):
            spec_end = spec.address + REGISTER_COUNT[spec.data_type]
            if run and spec.address - end <= MAX_GAP and spec_end - start <= MAX_REGISTERS_PER_READ:
                run.append(spec)
                end = max(end, spec_end)
                continue
            if run:
                plans.append((function, start, end - start, run))
            run, start, end = [spec], spec.address, spec_end
        if run:
            plans.append((function, start, end - start, run))
    return plans


def poll_meter(
    host: str,
    port: int,
    device_id: int,
    specs: list[RegisterSpec],
    *,
    timeout_s: float = 2.0,
) -> dict[str, float]:
    """Read every register of one meter; {key: scaled value}. Raises ModbusPollError."""
    client = ModbusTcpClient(host, port=port, timeout=timeout_s, retries=0)
    try:
        if not client.connect():
            raise ModbusPollError(f"cannot connect to {host}:{port}")
        values: dict[str, float] = {}
        for function, start, count, run in plan_reads(specs):
            read = (
                client.read_input_registers
                if function == "input"
                else client.read_holding_registers
            )
            try:
                response = read(start, count=count, device_id=device_id)
            except ModbusException as exc:
                raise ModbusPollError(f"{host}:{port} {function} {start}+{count}: {exc}") from exc
            if response.isError():
                raise ModbusPollError(f"{host}:{port} {function} {start}+{count}: {response}")
            registers = response.registers
            for spec in run:
                offset = spec.address - start
                value = decode(
                    registers[offset : offset + REGISTER_COUNT[spec.data_type]],
                    spec.data_type,
                    spec.word_order,
                )
                if math.isfinite(value):  # a float32 meter reports NaN for "not available"
                    values[spec.key] = value * spec.scale
        return values
    finally:
        client.close()
