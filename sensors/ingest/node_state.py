"""Live node state in Redis: when each node was last heard and its last value per input.

Redis keys:
    sensors:seen            hash node_id -> unix seconds the last batch was processed
    sensors:last:<node_id>  hash input key -> "t value" of its newest reading
    sensors:silent          set of node ids with an open node-silent alarm
    sensors:range-alarms    set of sensor ids with an open out-of-range alarm
    sensors:pulse:<id>      hash t, count, total: a pulse counter's state
"""

from __future__ import annotations

from core.redis import get_redis
from sensors.ingest import stream

# A node is silent once it has missed three of its expected posts.
SILENT_FACTOR = 3

SEEN_KEY = "sensors:seen"
SILENT_KEY = "sensors:silent"
RANGE_ALARMS_KEY = "sensors:range-alarms"


def last_key(node_id: int) -> str:
    return f"sensors:last:{node_id}"


def pulse_key(sensor_id: int) -> str:
    return f"sensors:pulse:{sensor_id}"


def last_seen(node_id: int) -> int | None:
    raw = get_redis().hget(SEEN_KEY, str(node_id))
    return int(float(raw)) if raw is not None else None


def all_last_seen() -> dict[int, int]:
    return {int(k): int(float(v)) for k, v in get_redis().hgetall(SEEN_KEY).items()}


def heard_times(intervals: dict[int, int], now: float) -> dict[int, float]:
    """When each node (id -> its interval) was last heard, as unix seconds; nodes never heard
    are left out. `sensors:seen` is when the drain last processed a node's request: behind a
    backlog (a stopped or slow worker) a node that posts every interval has requests waiting in
    its stream, so for a node the drain's time calls silent the newest waiting request (when
    the web accepted it) counts if it is later. The silent alarm, the staff overview and the
    admin judge by this one rule."""
    ids = list(intervals)
    raw = get_redis().hmget(SEEN_KEY, [str(n) for n in ids]) if ids else []
    heard = {n: float(r) for n, r in zip(ids, raw, strict=True) if r is not None}
    late = [n for n, iv in intervals.items() if now - heard.get(n, 0.0) > SILENT_FACTOR * iv]
    for node_id, accepted in stream.newest_accepted(late).items():
        heard[node_id] = max(heard.get(node_id, 0.0), accepted)
    return heard


def last_values(node_id: int) -> dict[str, tuple[int, float]]:
    """{input key: (t, value)} of a node's newest readings (converted, calibrated)."""
    result: dict[str, tuple[int, float]] = {}
    for key, raw in get_redis().hgetall(last_key(node_id)).items():
        t, _, value = raw.decode().partition(" ")
        result[key.decode()] = (int(t), float(value))
    return result


def last_values_of(node_ids: list[int]) -> dict[int, dict[str, tuple[int, float]]]:
    """last_values for many nodes in one round trip (the staff inputs page lists them all)."""
    pipe = get_redis().pipeline(transaction=False)
    for node_id in node_ids:
        pipe.hgetall(last_key(node_id))
    result: dict[int, dict[str, tuple[int, float]]] = {}
    for node_id, raw in zip(node_ids, pipe.execute(), strict=True):
        values = result[node_id] = {}
        for key, entry in raw.items():
            t, _, value = entry.decode().partition(" ")
            values[key.decode()] = (int(t), float(value))
    return result


def mark_heard(node_id: int, now: float) -> bool:
    """The node was heard though no reading of it is recorded (a BACnet controller's answer
    whose only values are in fault, or a point's error: an answer is proof of life, and a
    node-silent alarm beside the controller's own fault alarm was false). True when it had
    been flagged silent, so the caller closes that alarm now, as ingest does."""
    pipe = get_redis().pipeline(transaction=False)
    pipe.hset(SEEN_KEY, str(node_id), int(now))
    pipe.srem(SILENT_KEY, str(node_id))
    return bool(pipe.execute()[1])


def is_silent(last_seen_at: float | None, interval_s: int, now: float) -> bool:
    """True when a node has not posted for SILENT_FACTOR × its interval (or never has)."""
    return last_seen_at is None or now - last_seen_at > SILENT_FACTOR * interval_s
