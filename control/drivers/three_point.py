"""Three-point (open / close) valve: a pulse on one relay, the other one never on meanwhile.

A pulse: write the *other* relay OFF and read it back OFF (if it does not read OFF, nothing is
energised: the interlock); write this relay ON; wait the pulse; write it OFF; read both back
OFF. The relay is switched off in a `finally`, so an error in the middle of a pulse does not
leave the motor running. Both relays are coils of one board and unit (model validation).

Pulses run on the relay pool in the background, so a tick does not wait for a 20 s pulse; the
next tick first collects them (a pulse is at most 0.6 × the tick, so it has ended) before it
touches any relay. If the worker dies in the middle of a pulse the relay stays on until the
next tick (from the restarted worker) writes it OFF, or the board's watchdog drops it; the
valve's end switch stops the motor and the position estimate is put right at the next end
position (control/engine/weather.py).
"""

from __future__ import annotations

import time
from concurrent.futures import Future
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass

from pymodbus.client import ModbusTcpClient
from pymodbus.exceptions import ModbusException

from control.drivers.modbus import BoardError, _connect, _exception_code, _pool


@dataclass(frozen=True)
class PulseTarget:
    plant_id: int
    actuator_id: int  # the relay pulsed
    command_id: int | None  # its ActuatorCommand row
    host: str
    port: int
    device_id: int
    coil: int  # the relay to pulse
    other_coil: int  # the relay that must be off
    seconds: float
    # The pulse's ActuatorCommand fields when no row could be written before it started
    # (database away): written, or queued in Redis, when the pulse is collected.
    audit: dict | None = None
    plant_name: str = ""  # for the alarm's words (it named the plant by id)


@dataclass
class PulseResult:
    target: PulseTarget
    sent_at: float | None = None
    done_at: float | None = None
    error: str = ""


_running: dict[int, Future] = {}  # plant id -> its pulse in flight (one per plant)


def start(target: PulseTarget, timeout_s: float = 1.0) -> None:
    _running[target.plant_id] = _pool(16).submit(_pulse, target, timeout_s)


def collect(wait_s: float) -> list[PulseResult]:
    """Wait (at most `wait_s`) for the pulses in flight and return their results."""
    if not _running:
        return []
    futures = dict(_running)
    done, _ = wait_futures(futures.values(), timeout=wait_s)
    results = []
    for plant_id, fut in futures.items():
        if fut in done:
            results.append(fut.result())
            del _running[plant_id]
    return results


def in_flight() -> set[int]:
    return {pid for pid, fut in _running.items() if not fut.done()}


def _check(reply, what: str) -> None:
    if reply.isError():
        code = _exception_code(reply)
        raise BoardError(f"board answered {what}: exception {code}" if code else f"{what}: {reply}")


def _pulse(t: PulseTarget, timeout_s: float) -> PulseResult:
    result = PulseResult(t)
    client = ModbusTcpClient(t.host, port=t.port, timeout=timeout_s, retries=1)
    energised = False
    try:
        _connect(client)
        _check(client.write_coil(t.other_coil, False, device_id=t.device_id), "other relay OFF")
        other = client.read_coils(t.other_coil, count=1, device_id=t.device_id)
        _check(other, "reading the other relay")
        if other.bits[0]:
            raise BoardError(f"interlock: coil {t.other_coil} still reads ON, pulse not started")
        energised = True
        _check(client.write_coil(t.coil, True, device_id=t.device_id), "relay ON")
        result.sent_at = time.time()
        time.sleep(t.seconds)
    except (BoardError, ModbusException, OSError) as exc:
        result.error = f"relay board {t.host}:{t.port}: {exc}"
    finally:
        if energised:
            try:
                _connect(client)
                _check(client.write_coil(t.coil, False, device_id=t.device_id), "relay OFF")
                still_on = []
                for coil in (t.coil, t.other_coil):
                    back = client.read_coils(coil, count=1, device_id=t.device_id)
                    _check(back, "reading back")
                    if back.bits[0]:
                        still_on.append(coil)
                if still_on:
                    result.error = (
                        result.error or f"coil {still_on[0]} still reads ON after the pulse"
                    )
                else:
                    result.done_at = time.time()
            except (BoardError, ModbusException, OSError) as exc:
                result.error = result.error or f"relay board {t.host}:{t.port}: end of pulse: {exc}"
        client.close()
    return result
