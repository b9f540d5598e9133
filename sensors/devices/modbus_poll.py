"""Read Modbus meters (pymodbus 3.16) for the registers in their map: TCP or RTU over RS-485.

Decoding is our own struct code (pure, unit-tested). On the wire each 16-bit register is two
bytes, high byte first. A value of N registers is the bytes A B C D ... (A most significant)
laid out in one of four orders, named as meter manuals name them:

    ABCD  big-endian                  registers [AB, CD]     (64-bit: [AB, CD, EF, GH])
    BADC  bytes swapped in each word  registers [BA, DC]     ([BA, DC, FE, HG])
    CDAB  words swapped (low first)   registers [CD, AB]     ([GH, EF, CD, AB])
    DCBA  little-endian               registers [DC, BA]     ([HG, FE, DC, BA])

A 16-bit value has no word order; BADC and DCBA swap its two bytes.

Reads: registers are grouped into contiguous requests of at most `max_block` registers (the
meter's own limit). A request the meter refuses (an exception answer: 02 illegal address,
03 illegal value, 04 device failure) or leaves unanswered is read again register by register,
so one bad register costs only itself: the others still read and the bad one is reported with
what the meter answered. Every request is bounded by the client's timeout; an unanswered one is
retried `retries` times, and the whole poll by `deadline_s`, so no worker waits for ever.
"""

from __future__ import annotations

import math
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from pymodbus import FramerType
from pymodbus.client import ModbusSerialClient, ModbusTcpClient
from pymodbus.exceptions import ModbusException

# data type -> (registers, struct code)
DATA_TYPES: dict[str, tuple[int, str]] = {
    "int16": (1, "h"),
    "uint16": (1, "H"),
    "int32": (2, "i"),
    "uint32": (2, "I"),
    "int64": (4, "q"),
    "uint64": (4, "Q"),
    "float32": (2, "f"),
    "float64": (4, "d"),
}
REGISTER_COUNT = {name: count for name, (count, _) in DATA_TYPES.items()}
WORD_ORDERS = ("ABCD", "BADC", "CDAB", "DCBA")
FUNCTIONS = ("input", "holding")
MAX_ADDRESS = 65535
MAX_REGISTERS_PER_READ = 125  # the protocol's own limit for FC3/FC4
DEFAULT_BLOCK = 120
MAX_GAP = 8  # read across small gaps rather than send another request

# Modbus exception codes a meter answers with, as its manual words them.
EXCEPTION_NAMES = {
    1: "illegal function",
    2: "illegal data address",
    3: "illegal data value",
    4: "server device failure",
    6: "server device busy",
    10: "gateway path unavailable",
    11: "gateway target device failed to respond",
}


class ModbusPollError(Exception):
    """The meter as a whole could not be read (no connection, no answer at all)."""


@dataclass(frozen=True)
class RegisterSpec:
    key: str
    address: int
    function: str  # "input" (FC4) | "holding" (FC3)
    data_type: str
    word_order: str = "ABCD"
    scale: float = 1.0
    offset: float = 0.0

    @property
    def count(self) -> int:
        return REGISTER_COUNT[self.data_type]

    def describe(self) -> str:
        return f"{self.key} ({self.function} {self.address}, {self.data_type} {self.word_order})"


@dataclass(frozen=True)
class Block:
    function: str
    start: int
    count: int
    specs: tuple[RegisterSpec, ...]


@dataclass
class PollResult:
    values: dict[str, float] = field(default_factory=dict)
    # key -> what the meter answered (or did not), for the register's alarm
    errors: dict[str, str] = field(default_factory=dict)
    requests: int = 0


def decode(registers: list[int], data_type: str, word_order: str = "ABCD") -> float:
    """One value from its registers (each 0..65535), in the meter's byte and word order."""
    if data_type not in DATA_TYPES:
        raise ValueError(f"unknown data type {data_type!r}")
    if word_order not in WORD_ORDERS:
        raise ValueError(f"unknown word order {word_order!r}")
    count, code = DATA_TYPES[data_type]
    if len(registers) != count:
        raise ValueError(f"{data_type} needs {count} register(s), got {len(registers)}")
    words = list(registers)
    if word_order in ("CDAB", "DCBA"):
        words.reverse()
    raw = struct.pack(f">{count}H", *words)
    if word_order in ("BADC", "DCBA"):
        raw = bytes(b for i in range(0, len(raw), 2) for b in (raw[i + 1], raw[i]))
    return float(struct.unpack(f">{code}", raw)[0])


def plan_reads(
    specs: list[RegisterSpec], max_block: int = DEFAULT_BLOCK, max_gap: int = MAX_GAP
) -> list[Block]:
    """Group registers into requests of at most `max_block` registers per function."""
    max_block = max(1, min(max_block, MAX_REGISTERS_PER_READ))
    plans: list[Block] = []
    for function in FUNCTIONS:
        run: list[RegisterSpec] = []
        start = end = 0
        for spec in sorted((s for s in specs if s.function == function), key=lambda s: s.address):
            spec_end = spec.address + spec.count
            if run and spec.address - end <= max_gap and max(end, spec_end) - start <= max_block:
                run.append(spec)
                end = max(end, spec_end)
                continue
            if run:
                plans.append(Block(function, start, end - start, tuple(run)))
            run, start, end = [spec], spec.address, spec_end
        if run:
            plans.append(Block(function, start, end - start, tuple(run)))
    return plans


class _Refused:
    """The meter answered with a Modbus exception."""

    def __init__(self, code: int) -> None:
        self.code = code

    def __str__(self) -> str:
        name = EXCEPTION_NAMES.get(self.code, "exception")
        return f"the meter answered exception {self.code:02d} ({name})"


class _NoAnswer:
    def __init__(self, reason: str) -> None:
        self.reason = reason

    def __str__(self) -> str:
        return f"no answer ({self.reason})"


class MeterReader:
    """Reads one meter (unit id) through an open pymodbus sync client."""

    def __init__(
        self,
        client: ModbusTcpClient | ModbusSerialClient,
        device_id: int,
        *,
        max_block: int = DEFAULT_BLOCK,
        retries: int = 1,
        deadline_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.device_id = device_id
        self.max_block = max_block
        self.retries = max(0, retries)
        self.deadline_s = deadline_s
        self.clock = clock

    def _request(self, function: str, start: int, count: int) -> list[int] | _Refused | _NoAnswer:
        read = (
            self.client.read_input_registers
            if function == "input"
            else self.client.read_holding_registers
        )
        answer: _NoAnswer = _NoAnswer("not sent")
        for _attempt in range(self.retries + 1):
            self.result.requests += 1
            try:
                response = read(start, count=count, device_id=self.device_id)
            except ModbusException as exc:
                answer = _NoAnswer(str(exc).strip() or type(exc).__name__)
                # A late answer to this request must not be taken for the next one's: start
                # the next attempt on a fresh connection (TCP) or a reopened port (RTU).
                self.client.close()
                if not self.client.connect():
                    return _NoAnswer("cannot reconnect")
                continue
            if response.isError():
                return _Refused(int(getattr(response, "exception_code", 0)))
            registers = list(response.registers)
            if len(registers) < count:
                return _NoAnswer(f"short answer: {len(registers)} of {count} registers")
            return registers[:count]
        return answer

    def _store(self, spec: RegisterSpec, registers: list[int]) -> None:
        value = decode(registers, spec.data_type, spec.word_order)
        # A float meter reports NaN for "not available" (a phase not wired): the meter works as
        # designed, so the value is skipped without an alarm.
        if math.isfinite(value):
            self.result.values[spec.key] = value * spec.scale + spec.offset

    def read(self, specs: list[RegisterSpec]) -> PollResult:
        """Every register it can; raises ModbusPollError only when the meter answers nothing."""
        self.result = PollResult()
        started = self.clock()
        answered = False
        for block in plan_reads(specs, self.max_block):
            if self.clock() - started > self.deadline_s:
                for spec in block.specs:
                    self.result.errors[spec.key] = f"not read: the poll passed {self.deadline_s} s"
                continue
            answer = self._request(block.function, block.start, block.count)
            if isinstance(answer, list):
                answered = True
                for spec in block.specs:
                    offset = spec.address - block.start
                    self._store(spec, answer[offset : offset + spec.count])
                continue
            if isinstance(answer, _NoAnswer) and not answered and len(block.specs) == 1:
                raise ModbusPollError(f"{answer}")
            # The block failed: read its registers one by one so only the bad one is lost.
            for spec in block.specs:
                if self.clock() - started > self.deadline_s:
                    self.result.errors[spec.key] = f"not read: the poll passed {self.deadline_s} s"
                    continue
                single = (
                    answer
                    if len(block.specs) == 1
                    else self._request(spec.function, spec.address, spec.count)
                )
                if isinstance(single, list):
                    answered = True
                    self._store(spec, single)
                elif isinstance(single, _NoAnswer) and not answered:
                    raise ModbusPollError(f"{single}")
                else:
                    self.result.errors[spec.key] = str(single)
        return self.result


def tcp_client(host: str, port: int, timeout_s: float) -> ModbusTcpClient:
    # retries=0: our own bounded retry (MeterReader) reconnects between attempts.
    return ModbusTcpClient(host, port=port, timeout=timeout_s, retries=0)


def serial_client(
    port: str,
    *,
    baudrate: int,
    parity: str,
    stopbits: int,
    bytesize: int = 8,
    timeout_s: float,
) -> ModbusSerialClient:
    return ModbusSerialClient(
        port,
        framer=FramerType.RTU,
        baudrate=baudrate,
        parity=parity,
        stopbits=stopbits,
        bytesize=bytesize,
        timeout=timeout_s,
        retries=0,
    )


def poll_meter(
    host: str,
    port: int,
    device_id: int,
    specs: list[RegisterSpec],
    *,
    timeout_s: float = 2.0,
    max_block: int = DEFAULT_BLOCK,
    retries: int = 1,
    deadline_s: float = 10.0,
) -> PollResult:
    """Read every register of one Modbus TCP meter. Raises ModbusPollError if it answers none."""
    client = tcp_client(host, port, timeout_s)
    try:
        if not client.connect():
            raise ModbusPollError(f"cannot connect to {host}:{port}")
        reader = MeterReader(
            client, device_id, max_block=max_block, retries=retries, deadline_s=deadline_s
        )
        return reader.read(specs)
    finally:
        client.close()
