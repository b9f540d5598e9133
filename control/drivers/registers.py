"""Modbus TCP holding registers: an analogue output module's value (0-10 V / 4-20 mA outputs
are holding registers) and relay boards' watchdog registers. Written, then read back.

Boards are served in parallel on the relay pool (control/drivers/modbus.py), with the same
timeout, retries and per-board deadline as coils; a register the board refuses with a Modbus
exception is that register's fault, in the board's words.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
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


def write(
    targets: Iterable[RegisterTarget],
    *,
    timeout_s: float = 1.0,
    deadline_s: float = 3.0,
    attempts: int = 3,
) -> dict[str, RegisterResult]:
    boards: dict[tuple[str, int], list[RegisterTarget]] = {}
    for t in targets:
        boards.setdefault((t.host, t.port), []).append(t)
    results: dict[str, RegisterResult] = {}
    if not boards:
        return results
    pool = _pool(16)
    futures = {
        pool.submit(_serve, host, port, ts, timeout_s, deadline_s, attempts): ts
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
) -> dict[str, RegisterResult]:
    deadline = time.monotonic() + deadline_s
    results = {t.key: RegisterResult(t.key) for t in targets}
    client = ModbusTcpClient(host, port=port, timeout=timeout_s, retries=0)
    try:
        _with_retries(lambda: _connect(client), deadline, attempts)
        for t in targets:
            _with_retries(lambda t=t: _write_one(client, t, results[t.key]), deadline, attempts)
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
    if back.registers[0] != t.value:
        result.error = f"read back {back.registers[0]} after writing {t.value}"
        return
    result.confirmed = True
