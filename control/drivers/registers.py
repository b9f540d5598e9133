"""Modbus TCP holding registers: an analogue output module's value (0-10 V / 4-20 mA outputs
are holding registers) and relay boards' watchdog registers. Written, then read back
(`write`); or read first and written only when the board lost the value or a write is due
(`ensure`, for watchdog registers, which a rebooted board resets without saying so).

Boards are served in parallel on the relay pool (control/drivers/modbus.py), with the same
timeout, retries and per-board deadline as coils; a register the board refuses with a Modbus
exception is that register's fault, in the board's words.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from concurrent.futures import wait
from dataclasses import dataclass

from pymodbus.client import ModbusTcpClient
from pymodbus.exceptions import ModbusException

from control.drivers.modbus import (
    EXCEPTION_NAMES,
    BoardError,
    _connect,
    _exception_code,
    _pool,
    _with_retries,
)


@dataclass(frozen=True)
class RegisterTarget:
    key: str  # the caller's name for it: "plant:3", "board:2"
    host: str
    port: int
    device_id: int
    address: int
    value: int


@dataclass
class RegisterResult:
    key: str
    written: bool = False
    confirmed: bool = False
    refused: bool = False  # the board answered with a Modbus exception
    error: str = ""
    sent_at: float | None = None
    # `ensure` only: what the register read before anything was written (None: not read, or
    # the board will not read it: a write-only register) and what it read last.
    found: int | None = None
    read_back: int | None = None
    unreadable: str = ""  # the board's words when it refuses to read the register


def ensure(
    targets: Iterable[RegisterTarget],
    force: set[str],
    *,
    timeout_s: float = 1.0,
    deadline_s: float = 3.0,
    attempts: int = 3,
) -> dict[str, RegisterResult]:
    """Read each register; write it when it does not hold its value or its key is in `force`,
    then read it back. A register the board refuses to read (write-only) is written only when
    forced; its accepted write is all that can be known."""

    def step(client: ModbusTcpClient, t: RegisterTarget, result: RegisterResult) -> None:
        _ensure_one(client, t, result, t.key in force)

    return _on_boards(targets, timeout_s, deadline_s, attempts, step)


def write(
    targets: Iterable[RegisterTarget],
    *,
    timeout_s: float = 1.0,
    deadline_s: float = 3.0,
    attempts: int = 3,
) -> dict[str, RegisterResult]:
    return _on_boards(targets, timeout_s, deadline_s, attempts, _write_one)


Step = Callable[[ModbusTcpClient, RegisterTarget, RegisterResult], None]


def _on_boards(
    targets: Iterable[RegisterTarget],
    timeout_s: float,
    deadline_s: float,
    attempts: int,
    step: Step,
) -> dict[str, RegisterResult]:
    boards: dict[tuple[str, int], list[RegisterTarget]] = {}
    for t in targets:
        boards.setdefault((t.host, t.port), []).append(t)
    results: dict[str, RegisterResult] = {}
    if not boards:
        return results
    pool = _pool(16)
    futures = {
        pool.submit(_serve, host, port, ts, timeout_s, deadline_s, attempts, step): ts
        for (host, port), ts in boards.items()
    }
    done, not_done = wait(futures, timeout=deadline_s + timeout_s + 0.5)
    for fut in done:
        results.update(fut.result())
    for fut in not_done:
        fut.cancel()
        for t in futures[fut]:
            results[t.key] = RegisterResult(t.key, error=f"board {t.host}:{t.port} timed out")
    return results


def _serve(
    host: str,
    port: int,
    targets: list[RegisterTarget],
    timeout_s: float,
    deadline_s: float,
    attempts: int,
    step: Step,
) -> dict[str, RegisterResult]:
    deadline = time.monotonic() + deadline_s
    results = {t.key: RegisterResult(t.key) for t in targets}
    client = ModbusTcpClient(host, port=port, timeout=timeout_s, retries=0)
    try:
        _with_retries(lambda: _connect(client), deadline, attempts)
        for t in targets:
            _with_retries(lambda t=t: step(client, t, results[t.key]), deadline, attempts)
    except (BoardError, ModbusException, OSError) as exc:
        for r in results.values():
            if not r.error and not r.confirmed:
                r.error = f"board {host}:{port}: {exc}"
    finally:
        client.close()
    return results


def _refusal(code: int, t: RegisterTarget) -> str:
    unit = f" of unit {t.device_id}" if t.device_id != 1 else ""
    name = EXCEPTION_NAMES.get(code, "exception")
    return f"board answered: {name} (exception {code}) for holding register {t.address}{unit}"


def _write_one(client: ModbusTcpClient, t: RegisterTarget, result: RegisterResult) -> None:
    _connect(client)
    reply = client.write_register(t.address, t.value, device_id=t.device_id)
    if reply.isError():
        code = _exception_code(reply)
        if code is None:
            raise BoardError(f"device {t.device_id} refused register {t.address}: {reply}")
        result.refused, result.error = True, _refusal(code, t)
        return
    result.written, result.sent_at = True, time.time()
    back = client.read_holding_registers(t.address, count=1, device_id=t.device_id)
    if back.isError():
        code = _exception_code(back)
        if code is None:
            raise BoardError(f"device {t.device_id} refused to read register {t.address}: {back}")
        # Write-only registers exist (many watchdog registers): written is all we can know.
        result.confirmed = True
        return
    result.read_back = back.registers[0]
    if back.registers[0] != t.value:
        result.error = f"read back {back.registers[0]} after writing {t.value}"
        return
    result.confirmed = True


def _ensure_one(
    client: ModbusTcpClient, t: RegisterTarget, result: RegisterResult, forced: bool
) -> None:
    _connect(client)
    found = client.read_holding_registers(t.address, count=1, device_id=t.device_id)
    if found.isError():
        code = _exception_code(found)
        if code is None:
            raise BoardError(f"device {t.device_id} refused to read register {t.address}: {found}")
        result.unreadable = _refusal(code, t)
        if forced:
            _write_one(client, t, result)
        else:
            result.confirmed = True  # accepted before and not due: nothing more can be known
        return
    result.found = result.read_back = found.registers[0]
    if result.found == t.value and not forced:
        result.confirmed = True
        return
    _write_one(client, t, result)
