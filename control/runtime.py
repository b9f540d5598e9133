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
from dataclasses import asdict, dataclass
from typing import Any

from bms.redis import get_redis

PREFIX = "bms:control"
MEMORY_KEY = f"{PREFIX}:memory"
LAST_TICK_KEY = f"{PREFIX}:last_tick"
TICK_LOCK_KEY = f"{PREFIX}:tick-lock"


def _actuator_key(actuator_id: int) -> str:
    return f"{PREFIX}:act:{actuator_id}"


def _zone_key(zone_id: int) -> str:
    return f"{PREFIX}:zone:{zone_id}"


@dataclass
class ActuatorRuntime:
    on: bool | None = None
    changed_at: float | None = None
    last_off_at: float | None = None
    sent_at: float | None = None  # last write to the device (change, retry or keep-alive)
    confirmed: bool = False
    fault: str = ""
    reason: str = ""
    strategy: str = ""
    decided_at: float | None = None

    @classmethod
    def from_hash(cls, raw: dict[bytes, bytes]) -> ActuatorRuntime:
        if not raw:
            return cls()
        d = {k.decode(): v.decode() for k, v in raw.items()}

        def num(name: str) -> float | None:
            return float(d[name]) if d.get(name) else None

        return cls(
            on=None if d.get("on", "") == "" else d["on"] == "1",
            changed_at=num("changed_at"),
            last_off_at=num("last_off_at"),
            sent_at=num("sent_at"),
            confirmed=d.get("confirmed") == "1",
            fault=d.get("fault", ""),
            reason=d.get("reason", ""),
            strategy=d.get("strategy", ""),
            decided_at=num("decided_at"),
        )

    def to_hash(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for name, value in asdict(self).items():
            if isinstance(value, bool):
                out[name] = "1" if value else "0"
            else:
                out[name] = "" if value is None else str(value)
        return out


def load_actuators(ids: list[int]) -> dict[int, ActuatorRuntime]:
    if not ids:
        return {}
    pipe = get_redis().pipeline(transaction=False)
    for aid in ids:
        pipe.hgetall(_actuator_key(aid))
    return {
        aid: ActuatorRuntime.from_hash(raw) for aid, raw in zip(ids, pipe.execute(), strict=True)
    }


def save_actuators(states: dict[int, ActuatorRuntime]) -> None:
    if not states:
        return
    pipe = get_redis().pipeline(transaction=False)
    for aid, state in states.items():
        pipe.hset(_actuator_key(aid), mapping=state.to_hash())
    pipe.execute()


def forget_actuator(actuator_id: int) -> None:
    get_redis().delete(_actuator_key(actuator_id))


def load_memory() -> dict[str, Any]:
    raw = get_redis().get(MEMORY_KEY)
    return json.loads(raw) if raw else {}


def save_memory(memory: dict[str, Any]) -> None:
    get_redis().set(MEMORY_KEY, json.dumps(memory))


def save_zones(results: dict[int, dict[str, Any]]) -> None:
    if not results:
        return
    pipe = get_redis().pipeline(transaction=False)
    for zid, result in results.items():
        # Expire so a zone removed from control does not show a reason forever.
        pipe.set(_zone_key(zid), json.dumps(result), ex=3600)
    pipe.execute()


def load_zones(ids: list[int]) -> dict[int, dict[str, Any]]:
    if not ids:
        return {}
    raws = get_redis().mget([_zone_key(z) for z in ids])
    return {zid: json.loads(raw) for zid, raw in zip(ids, raws, strict=True) if raw}


def save_last_tick(report: dict[str, Any]) -> None:
    get_redis().set(LAST_TICK_KEY, json.dumps(report))


def load_last_tick() -> dict[str, Any] | None:
    raw = get_redis().get(LAST_TICK_KEY)
    return json.loads(raw) if raw else None


def acquire_tick_lock(token: str, ttl_s: int) -> bool:
    """One tick at a time: a slow tick must not overlap the next one from beat."""
    return bool(get_redis().set(TICK_LOCK_KEY, token, nx=True, ex=ttl_s))


def release_tick_lock(token: str) -> None:
    client = get_redis()
    # Only our own lock: if it expired and another tick took it, leave that one alone.
    if client.get(TICK_LOCK_KEY) == token.encode():
        client.delete(TICK_LOCK_KEY)
