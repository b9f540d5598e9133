"""Modbus TCP relay boards: write coils, read them back, confirm.

Coils are grouped per board (host, port) and, on a board, into contiguous runs per device id,
so a board with 64 relays costs one write and one read per run, not 64 round trips. Boards are
served in parallel threads, each with its own deadline: a dead board costs the tick at most
`deadline_s`, and the other boards are not held up by it.

Every coil the runner manages is read back each tick, not only the ones written: a relay that
rebooted (all coils off) or a board that stopped answering is found within one tick.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field

from pymodbus.client import ModbusTcpClient
from pymodbus.exceptions import ModbusException

log = logging.getLogger(__name__)

# Modbus limits per request (spec: 1968 coils per write, 2000 per read).
MAX_WRITE_RUN = 1968
MAX_READ_RUN = 2000


@dataclass(frozen=True)
class CoilTarget:
    actuator_id: int
    host: str
    port: int
    device_id: int
    coil: int
    state: bool
    write: bool  # False: only check that the relay still holds `state`


@dataclass
class CoilResult:
    actuator_id: int
    written: bool = False
    corrected: bool = False  # not planned, but the relay had lost its state: rewritten
    confirmed: bool = False
    actual: bool | None = None
    error: str = ""
    sent_at: float | None = None
    confirmed_at: float | None = None


@dataclass
class _Board:
    host: str
    port: int
    targets: list[CoilTarget] = field(default_factory=list)


class BoardError(Exception):
    pass


def apply(
    targets: Iterable[CoilTarget],
    *,
    timeout_s: float = 1.0,
    deadline_s: float = 3.0,
    attempts: int = 3,
    max_workers: int = 16,
) -> dict[int, CoilResult]:
    boards: dict[tuple[str, int], _Board] = {}
    for t in targets:
        boards.setdefault((t.host, t.port), _Board(t.host, t.port)).targets.append(t)
    results: dict[int, CoilResult] = {}
    if not boards:
        return results
    pool = _pool(max_workers)
    futures = {
        pool.submit(_serve_board, b, timeout_s, deadline_s, attempts): b for b in boards.values()
    }
    # Never wait past the deadline for a stuck board: its socket timeout ends the thread later.
    done, not_done = wait(futures, timeout=deadline_s + timeout_s + 0.5)
    for fut in done:
        results.update(fut.result())
    for fut in not_done:
        fut.cancel()
        board = futures[fut]
        for t in board.targets:
            results[t.actuator_id] = CoilResult(
                t.actuator_id, error=f"relay board {board.host}:{board.port} timed out"
            )
    return results


_pools: dict[int, ThreadPoolExecutor] = {}


def _pool(max_workers: int) -> ThreadPoolExecutor:
    """One pool per worker process, reused tick after tick (starting threads costs time)."""
    pool = _pools.get(max_workers)
    if pool is None:
        pool = _pools[max_workers] = ThreadPoolExecutor(max_workers, thread_name_prefix="relay")
    return pool


def _serve_board(
    board: _Board, timeout_s: float, deadline_s: float, attempts: int
) -> dict[int, CoilResult]:
    deadline = time.monotonic() + deadline_s
    results = {t.actuator_id: CoilResult(t.actuator_id) for t in board.targets}
    # Coils the board answered with a Modbus exception (e.g. 02 illegal data address): a fault
    # of that coil only, in the board's own words. The other relays carry on: one bad
    # address must not take the whole board's relays out of control.
    refused: dict[int, str] = {}
    client = ModbusTcpClient(board.host, port=board.port, timeout=timeout_s, retries=0)
    try:
        _with_retries(lambda: _connect(client), deadline, attempts)
        writes = [t for t in board.targets if t.write]
        if writes:
            _with_retries(lambda: _write(client, writes, results, refused), deadline, attempts)
        live = [t for t in board.targets if t.actuator_id not in refused]
        actual = _with_retries(lambda: _read(client, live, refused), deadline, attempts)
        lost = [
            CoilTarget(t.actuator_id, t.host, t.port, t.device_id, t.coil, t.state, True)
            for t in live
            if t.actuator_id in actual and actual[t.actuator_id] != t.state
        ]
        if lost:
            # A relay that rebooted or was switched by hand: put it back, then check again.
            _with_retries(lambda: _write(client, lost, results, refused), deadline, attempts)
            for t in lost:
                if not any(x.actuator_id == t.actuator_id and x.write for x in board.targets):
                    results[t.actuator_id].corrected = True
            again = [t for t in lost if t.actuator_id not in refused]
            actual.update(_with_retries(lambda: _read(client, again, refused), deadline, attempts))
        now = time.time()
        for t in board.targets:
            r = results[t.actuator_id]
            if t.actuator_id in refused:
                r.confirmed = False
                r.error = refused[t.actuator_id]
                continue
            r.actual = actual[t.actuator_id]
            r.confirmed = r.actual == t.state
            r.confirmed_at = now if r.confirmed else None
            if not r.confirmed:
                r.error = f"read back {'ON' if r.actual else 'OFF'} after writing {'ON' if t.state else 'OFF'}"
    except (BoardError, ModbusException, OSError) as exc:
        message = f"relay board {board.host}:{board.port}: {exc}"
        log.warning("%s", message)
        for aid, r in results.items():
            r.confirmed = False
            r.error = refused.get(aid) or message
    finally:
        client.close()
    return results


# Modbus exception codes (Modbus Application Protocol V1.1b3, section 7).
EXCEPTION_NAMES = {
    1: "illegal function",
    2: "illegal data address",
    3: "illegal data value",
    4: "server device failure",
    5: "acknowledge",
    6: "server device busy",
    8: "memory parity error",
    10: "gateway path unavailable",
    11: "gateway target device failed to respond",
}


def _exception_code(reply) -> int | None:
    """The Modbus exception code of a reply the board sent back, None for any other error."""
    code = getattr(reply, "exception_code", None)
    return code if isinstance(code, int) and code > 0 else None


def _refusal(code: int, target: CoilTarget) -> str:
    name = EXCEPTION_NAMES.get(code, "exception")
    unit = f" of unit {target.device_id}" if target.device_id != 1 else ""
    return f"board answered: {name} (exception {code}) for coil {target.coil}{unit}"


def _with_retries(step, deadline: float, attempts: int):
    """Run `step` up to `attempts` times with a short backoff, never past the deadline."""
    delay = 0.1
    last: Exception | None = None
    for _ in range(max(1, attempts)):
        if time.monotonic() >= deadline:
            break
        try:
            return step()
        except (BoardError, ModbusException, OSError) as exc:
            last = exc
            if time.monotonic() + delay >= deadline:
                break
            time.sleep(delay)
            delay *= 2
    raise BoardError(f"no answer before the deadline ({last or 'deadline passed'})")


def _connect(client: ModbusTcpClient) -> None:
    if client.connected:
        return
    if not client.connect():
        raise BoardError("cannot connect")


def _runs(targets: list[CoilTarget], limit: int) -> list[list[CoilTarget]]:
    """Contiguous coil runs per device id, in address order."""
    runs: list[list[CoilTarget]] = []
    for t in sorted(targets, key=lambda t: (t.device_id, t.coil)):
        last = runs[-1][-1] if runs else None
        if (
            last is not None
            and last.device_id == t.device_id
            and t.coil == last.coil + 1
            and len(runs[-1]) < limit
        ):
            runs[-1].append(t)
        elif last is not None and last.device_id == t.device_id and t.coil == last.coil:
            runs[-1][-1] = t  # two actuators on one coil: the later wins, both get the result
        else:
            runs.append([t])
    return runs


def _write(
    client: ModbusTcpClient,
    targets: list[CoilTarget],
    results: dict[int, CoilResult],
    refused: dict[int, str],
) -> None:
    _connect(client)
    done: list[CoilTarget] = []
    for run in _runs([t for t in targets if t.actuator_id not in refused], MAX_WRITE_RUN):
        first = run[0]
        if len(run) == 1:
            reply = client.write_coil(first.coil, first.state, device_id=first.device_id)
        else:
            reply = client.write_coils(
                first.coil, [t.state for t in run], device_id=first.device_id
            )
        if not reply.isError():
            done.extend(run)
            continue
        code = _exception_code(reply)
        if code is None:
            raise BoardError(f"device {first.device_id} refused coil {first.coil}: {reply}")
        if len(run) == 1:
            refused[first.actuator_id] = _refusal(code, first)
            continue
        # The board refused the run: coil by coil, to find which one it will not take.
        for t in run:
            single = client.write_coil(t.coil, t.state, device_id=t.device_id)
            if not single.isError():
                done.append(t)
            elif (c := _exception_code(single)) is not None:
                refused[t.actuator_id] = _refusal(c, t)
            else:
                raise BoardError(f"device {t.device_id} refused coil {t.coil}: {single}")
    # One time for the board's writes: they went out within milliseconds of each other, and
    # the audit log is then updated with one statement per board.
    sent = time.time()
    for t in done:
        results[t.actuator_id].written = True
        results[t.actuator_id].sent_at = sent


def _read(
    client: ModbusTcpClient, targets: list[CoilTarget], refused: dict[int, str]
) -> dict[int, bool]:
    """What the coils read; a coil the board refuses to read goes into `refused`."""
    _connect(client)
    by_address: dict[tuple[int, int], list[CoilTarget]] = {}
    for t in targets:
        by_address.setdefault((t.device_id, t.coil), []).append(t)
    actual: dict[int, bool] = {}
    for run in _runs([t for t in targets if t.actuator_id not in refused], MAX_READ_RUN):
        first, last = run[0], run[-1]
        reply = client.read_coils(
            first.coil, count=last.coil - first.coil + 1, device_id=first.device_id
        )
        pieces = [(run, reply)]
        if reply.isError():
            if _exception_code(reply) is None:
                raise BoardError(
                    f"device {first.device_id} refused to read coil {first.coil}: {reply}"
                )
            pieces = [
                (
                    [t],
                    reply
                    if len(run) == 1
                    else client.read_coils(t.coil, count=1, device_id=t.device_id),
                )
                for t in run
            ]
        for part, answer in pieces:
            if answer.isError():
                code = _exception_code(answer)
                if code is None:
                    raise BoardError(
                        f"device {part[0].device_id} refused to read coil {part[0].coil}: {answer}"
                    )
                for t in part:
                    for same in by_address[(t.device_id, t.coil)]:
                        refused[same.actuator_id] = _refusal(code, t)
                continue
            base = part[0].coil
            for t in part:
                for same in by_address[(t.device_id, t.coil)]:
                    actual[same.actuator_id] = bool(answer.bits[t.coil - base])
    return actual
