"""Three-point (open / close) valve: a pulse on one relay, the other one never on meanwhile.

A pulse: write the *other* relay OFF and read it back OFF (if it does not read OFF, nothing is
energised: the interlock); write this relay ON; wait the pulse; write it OFF; read both back
OFF. The relay is switched off in a `finally`, so an error in the middle of a pulse does not
leave the motor running. Both relays are coils of one board and unit (model validation).

Pulses run on the relay pool in the background, so a tick does not wait for a 20 s pulse; the
next tick first collects them (a pulse is at most 0.6 × the tick, so it has ended) before it
touches any relay. The next tick may run in another process or on the other control host, so
a pulse in flight is recorded in Redis (PULSES_KEY) before its relay is energised, and its end
is written there by the thread that ran it: whichever process ticks next waits for that end,
not only for its own threads. If the worker dies in the middle of a pulse the relay stays on
until the next tick, once the pulse's deadline has passed, writes it OFF, or the board's
watchdog drops it; the valve's end switch stops the motor and the position estimate is put
right at the next end position (control/engine/weather.py).
"""

from __future__ import annotations

import json
import logging
import time
from concurrent.futures import Future
from concurrent.futures import wait as wait_futures
from dataclasses import asdict, dataclass
from datetime import datetime

from pymodbus.client import ModbusTcpClient
from pymodbus.exceptions import ModbusException
from redis.exceptions import RedisError

from control.drivers.modbus import BoardError, _connect, _exception_code, _pool
from core.redis import get_redis, redis_script

log = logging.getLogger(__name__)

# plant id -> {"target", "deadline", "result"}: the pulse in flight ("result" null) or ended and
# not yet collected. One pulse per plant; the tick lock keeps ticks, and so collections, apart.
PULSES_KEY = "bms:control:pulses"

# The thread's end of a pulse is written only while its record is there: a record the next
# tick gave up on (past its deadline) is not brought back by a late end.
_END = """
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then
  return redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
end
return -1
"""
_POLL_S = 0.05


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


# plant id -> the thread of its pulse in this process, and whether that thread wrote its end to
# Redis; the result is taken from the future only when it could not.
_running: dict[int, Future] = {}


def deadline_s(seconds: float, timeout_s: float) -> float:
    """The longest a pulse may take: the pulse and eight Modbus exchanges (connect, write,
    read, write at the start; connect, write, two reads at the end), each of at most two
    tries of `timeout_s`. Past it the pulse's thread is taken to have died with its worker."""
    return seconds + 16 * timeout_s + 1.0


def start(target: PulseTarget, timeout_s: float = 1.0) -> None:
    """Record the pulse in Redis, then run it in the background. A RedisError is raised before
    any relay is touched: a pulse no other process could see is not started."""
    record = {
        "target": _target_json(target),
        "deadline": time.time() + deadline_s(target.seconds, timeout_s),
        "result": None,
    }
    get_redis().hset(PULSES_KEY, str(target.plant_id), json.dumps(record))
    _running[target.plant_id] = _pool(16).submit(_run, target, timeout_s)


def collect(wait_s: float) -> list[PulseResult]:
    """Wait (at most `wait_s`) for the pulses in flight, this process's and any other's, and
    return the ended ones; a pulse past its deadline without an end is returned with an error."""
    until = time.monotonic() + wait_s
    local = dict(_running)
    if local:
        wait_futures(local.values(), timeout=wait_s)
    records = _records()
    while any(r["result"] is None and r["deadline"] > time.time() for r in records.values()):
        if time.monotonic() >= until:
            break
        time.sleep(_POLL_S)
        records = _records()
    results: dict[int, PulseResult] = {}
    for plant_id, r in records.items():
        if r["result"] is not None:
            results[plant_id] = _result_from(r["target"], r["result"])
        elif r["deadline"] <= time.time():
            results[plant_id] = PulseResult(
                _target_from(r["target"]),
                error="the pulse's end was never reported (its worker stopped?): "
                "its relays are written OFF by this tick",
            )
    for plant_id, fut in local.items():
        if not fut.done():
            continue
        del _running[plant_id]
        result, recorded = fut.result()
        if not recorded and plant_id not in results:
            results[plant_id] = result
    if results:
        get_redis().hdel(PULSES_KEY, *[str(p) for p in results])
    return list(results.values())


def in_flight() -> set[int]:
    """Plants with a pulse not yet ended, in this process or recorded by another."""
    now = time.time()
    recorded = {p for p, r in _records().items() if r["result"] is None and r["deadline"] > now}
    return recorded | {pid for pid, fut in _running.items() if not fut.done()}


def _records() -> dict[int, dict]:
    return {int(k): json.loads(v) for k, v in get_redis().hgetall(PULSES_KEY).items()}


def _run(target: PulseTarget, timeout_s: float) -> tuple[PulseResult, bool]:
    result = _pulse(target, timeout_s)
    end = {k: v for k, v in vars(result).items() if k != "target"}
    record = {"target": _target_json(target), "deadline": 0, "result": end}
    try:
        redis_script(_END)(keys=[PULSES_KEY], args=[str(target.plant_id), json.dumps(record)])
    except RedisError:
        log.exception("three-point pulse of plant %s: cannot record its end", target.plant_id)
        return result, False
    # Recorded, or its record was already given up by a tick (past the deadline): either way
    # the result is not this process's to report.
    return result, True


def _target_json(t: PulseTarget) -> dict:
    data = asdict(t)
    if t.audit is not None:
        data["audit"] = {
            k: v.isoformat() if isinstance(v, datetime) else v for k, v in t.audit.items()
        }
    return data


def _target_from(data: dict) -> PulseTarget:
    audit = data.get("audit")
    if audit is not None and isinstance(audit.get("requested_at"), str):
        audit = {**audit, "requested_at": datetime.fromisoformat(audit["requested_at"])}
    return PulseTarget(**{**data, "audit": audit})


def _result_from(target: dict, result: dict) -> PulseResult:
    return PulseResult(_target_from(target), **result)


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
