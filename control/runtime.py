"""Actuator runtime state and strategy memory, kept in Redis.

Why Redis and not a model: every tick reads the state of every actuator (on/off, when it last
switched, when it was last written, whether the relay confirmed) and rewrites the timestamps of
the ones it touched. A database row update per actuator per tick is exactly the write load the
design keeps off the database; Redis already holds the feeds' last values and runs with AOF in
production, so the state survives a restart. If it is lost anyway, every actuator reads as
"unknown": the evaluator never holds an unknown actuator on a timer, and the next tick writes
and reads back every relay, so the truth is re-established within one tick.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from core import redis_lock
from core.redis import get_redis

PREFIX = "bms:control"
MEMORY_KEY = f"{PREFIX}:memory"
LAST_TICK_KEY = f"{PREFIX}:last_tick"
TICK_LOCK_KEY = f"{PREFIX}:tick-lock"


ACTUATORS_KEY = f"{PREFIX}:actuators"  # hash: actuator id -> JSON runtime state
ZONES_KEY = f"{PREFIX}:zones"  # hash: zone id -> JSON of the last evaluation
EVALUATOR_ALARMS_KEY = f"{PREFIX}:evaluator-alarms"  # set: alarm keys the evaluator has open


@dataclass
class ActuatorRuntime:
    on: bool | None = None
    changed_at: float | None = None
    last_off_at: float | None = None
    last_on_at: float | None = None
    # When the device first read back ON in its latest on-period (set once per on-period, so a
    # steady state is not rewritten every tick): a boiler that never confirmed ON has no overrun.
    on_confirmed_at: float | None = None
    sent_at: float | None = None  # last write to the device (change, retry or keep-alive)
    confirmed: bool = False
    fault: str = ""
    reason: str = ""
    strategy: str = ""
    decided_at: float | None = None  # when the current decision (state + reason) began
    owner: str = ""  # who drives it: "zone 'Hall'", "heating plant 'Boiler house'"; "" = nobody
    released_from: str = ""  # not controlled: the owner it was released from
    fault_audited: bool = False  # this fault episode has its audit row (one per episode)
    # A BACnet output handed back to its controller (NULL at our priority): its state is the
    # controller's, not ours, so `on` is unknown and it is never confirmed (drivers/bacnet.py).
    relinquished: bool = False

    @classmethod
    def from_json(cls, raw: bytes | None) -> ActuatorRuntime:
        if not raw:
            return cls()
        data = json.loads(raw)
        # A state written by another version: keep the fields this one knows.
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})

    def to_json(self) -> str:
        return json.dumps(self.__dict__)


def load_actuators(ids: list[int]) -> dict[int, ActuatorRuntime]:
    """One round trip for any number of actuators."""
    if not ids:
        return {}
    raws = get_redis().hmget(ACTUATORS_KEY, [str(i) for i in ids])
    return {aid: ActuatorRuntime.from_json(raw) for aid, raw in zip(ids, raws, strict=True)}


def save_actuators(states: dict[int, ActuatorRuntime]) -> None:
    if states:
        get_redis().hset(ACTUATORS_KEY, mapping={str(a): s.to_json() for a, s in states.items()})


def load_memory() -> dict[str, Any]:
    raw = get_redis().get(MEMORY_KEY)
    return json.loads(raw) if raw else {}


def save_memory(memory: dict[str, Any]) -> None:
    get_redis().set(MEMORY_KEY, json.dumps(memory))


def open_evaluator_alarms() -> set[str]:
    return {k.decode() for k in get_redis().smembers(EVALUATOR_ALARMS_KEY)}


def set_evaluator_alarms(opened: set[str], closed: set[str]) -> None:
    pipe = get_redis().pipeline(transaction=False)
    if opened:
        pipe.sadd(EVALUATOR_ALARMS_KEY, *opened)
    if closed:
        pipe.srem(EVALUATOR_ALARMS_KEY, *closed)
    pipe.execute()


def save_zones(results: dict[int, dict[str, Any]]) -> None:
    if not results:
        return
    pipe = get_redis().pipeline(transaction=False)
    pipe.hset(ZONES_KEY, mapping={str(z): json.dumps(r) for z, r in results.items()})
    # A site whose ticks stopped must not show reasons from hours ago as current.
    pipe.expire(ZONES_KEY, 3600)
    pipe.execute()


def load_zones(ids: list[int]) -> dict[int, dict[str, Any]]:
    if not ids:
        return {}
    raws = get_redis().hmget(ZONES_KEY, [str(z) for z in ids])
    return {zid: json.loads(raw) for zid, raw in zip(ids, raws, strict=True) if raw}


def save_last_tick(report: dict[str, Any]) -> None:
    get_redis().set(LAST_TICK_KEY, json.dumps(report))


def load_last_tick() -> dict[str, Any] | None:
    raw = get_redis().get(LAST_TICK_KEY)
    return json.loads(raw) if raw else None


def acquire_tick_lock(ttl_s: int) -> str | None:
    """One tick at a time: a slow tick must not overlap the next one from beat. The token to
    release it with, or None while another tick holds it. A lock left by a tick cut off by a
    Redis restart is taken over (core/redis_lock.py): frost protection must not wait out its
    TTL."""
    return redis_lock.acquire(get_redis(), TICK_LOCK_KEY, ttl_s)


def tick_lock(lease_s: int):
    """`with tick_lock(lease) as token:` the tick lock as a lease renewed while the tick runs
    (core/redis_lock.py `held`): a tick whose host dies frees it within `lease_s` (so the other
    control host can take over), however long a live tick takes. token None: another tick holds it."""
    return redis_lock.held(get_redis(), TICK_LOCK_KEY, lease_s)
