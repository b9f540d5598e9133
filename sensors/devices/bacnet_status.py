"""What we last read from a BACnet controller: its last answer or the fault since, and each
mapped point's last value and time. One function for the API (`last-read`) and the staff page.

Redis keys (written by the poll, sensors/devices/bacnet_devices.py):
    sensors:bacnet-state:<node id>  hash answered_at (unix s of the last answer),
                                    failing_since (unix s of the first unanswered poll since),
                                    error (the last poll's failure, in the client's words)
    sensors:bacnet-cov:<node id>    hash input key -> unix s its COV subscription holds until
                                    (written by sensors/devices/bacnet_cov_service.py)
    sensors:bacnet-cov-refused:<node id>  hash input key -> the controller's refusal of COV
    sensors:bacnet-cov-dropped:<node id>  hash input key -> notifications dropped by the bound
An answer also marks the node heard (sensors:seen, sensors/ingest/node_state.py), whether or
not it brings a value to record: an answering controller is never "silent".
The points' values are the node's last readings (sensors/ingest/node_state.py), since a point's
reading arrives as the node's input `key`.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from alarms.lifecycle import clear_alarm
from core.redis import get_redis
from sensors.ingest import node_state
from sensors.models import BacnetDevice

STATE_TTL_S = 30 * 24 * 3600  # a controller removed leaves nothing behind for long


def state_key(node_id: int) -> str:
    return f"sensors:bacnet-state:{node_id}"


def cov_key(node_id: int) -> str:
    return f"sensors:bacnet-cov:{node_id}"


def refused_key(node_id: int) -> str:
    return f"sensors:bacnet-cov-refused:{node_id}"


def dropped_key(node_id: int) -> str:
    return f"sensors:bacnet-cov-dropped:{node_id}"


def covered_keys(node_id: int, now: float) -> set[str]:
    """The input keys a COV subscription holds now: the poll need not read them."""
    held = get_redis().hgetall(cov_key(node_id))
    return {key.decode() for key, until in held.items() if float(until) > now}


def mark_answered(node_id: int, now: float) -> None:
    """The controller answered: so the page says, and so its node was heard. Its readings
    alone did not say so: with every point held by COV the poll reads one, and when that one
    is in fault (its value not recorded) nothing marked the node heard, so an answering
    controller was alarmed "silent", cleared and alarmed again (#31)."""
    pipe = get_redis().pipeline(transaction=False)
    pipe.hset(state_key(node_id), "answered_at", int(now))
    pipe.hdel(state_key(node_id), "failing_since", "error")
    pipe.expire(state_key(node_id), STATE_TTL_S)
    pipe.execute()
    if node_state.mark_heard(node_id, now):
        clear_alarm(f"node-silent:{node_id}")


def mark_failed(node_id: int, error: str, now: float) -> None:
    pipe = get_redis().pipeline(transaction=False)
    pipe.hsetnx(state_key(node_id), "failing_since", int(now))  # since the first, not the last
    pipe.hset(state_key(node_id), "error", error[:500])
    pipe.expire(state_key(node_id), STATE_TTL_S)
    pipe.execute()


@dataclass
class PointReading:
    id: int
    key: str
    ref: str
    name: str
    units: str
    value: float | None
    time: int | None  # unix seconds of the reading; None when never read
    # How it is read: "cov" while a COV subscription holds it, "poll" otherwise; cov_refused
    # the controller's refusal of COV in its words, cov_dropped the notifications dropped by
    # the rate bound (docs/BACNET.md section 4).
    read_by: str = "poll"
    cov_refused: str = ""
    cov_dropped: int = 0


@dataclass
class ControllerReading:
    id: int
    node: int
    name: str
    address: str
    device_instance: int
    answered_at: int | None  # last answer, unix seconds
    failing_since: int | None  # first unanswered poll since the last answer
    error: str  # the last failure in the client's words; "" while it answers
    points: list[PointReading] = field(default_factory=list)

    @property
    def answering(self) -> bool:
        return self.answered_at is not None and self.failing_since is None

    def as_dict(self) -> dict:
        return {
            "id": self.id,
            "node": self.node,
            "name": self.name,
            "address": self.address,
            "device_instance": self.device_instance,
            "answering": self.answering,
            "answered_at": self.answered_at,
            "failing_since": self.failing_since,
            "error": self.error,
            "points": [vars(p) for p in self.points],
        }


def _decoded(raw: dict[bytes, bytes]) -> dict[str, str]:
    return {k.decode(): v.decode() for k, v in raw.items()}


def _int(raw: bytes | None) -> int | None:
    return int(raw) if raw is not None else None


def last_read(devices: Iterable[BacnetDevice]) -> list[ControllerReading]:
    """Each device (points prefetched or not) with its last answer and points' last readings,
    in two Redis round trips whatever the number of controllers."""
    devices = list(devices)
    node_ids = [d.node_id for d in devices]
    pipe = get_redis().pipeline(transaction=False)
    for node_id in node_ids:
        pipe.hgetall(state_key(node_id))
        pipe.hgetall(cov_key(node_id))
        pipe.hgetall(refused_key(node_id))
        pipe.hgetall(dropped_key(node_id))
    answers = pipe.execute()
    states = answers[0::4]
    covs = [_decoded(a) for a in answers[1::4]]
    refusals = [_decoded(a) for a in answers[2::4]]
    drops = [_decoded(a) for a in answers[3::4]]
    now = time.time()
    last = node_state.last_values_of(node_ids)
    result = []
    for device, state, cov, refused, dropped in zip(
        devices, states, covs, refusals, drops, strict=True
    ):
        values = last[device.node_id]
        reading = ControllerReading(
            id=device.pk,
            node=device.node_id,
            name=device.node.name,
            address=device.address,
            device_instance=device.device_instance,
            answered_at=_int(state.get(b"answered_at")),
            failing_since=_int(state.get(b"failing_since")),
            error=state.get(b"error", b"").decode(),
        )
        for p in device.points.all():
            t, value = values.get(p.key, (None, None))
            reading.points.append(
                PointReading(
                    p.pk, p.key, p.ref, p.name, p.units, value=value, time=t,
                    read_by="cov" if float(cov.get(p.key, 0)) > now else "poll",
                    cov_refused=refused.get(p.key, ""),
                    cov_dropped=int(dropped.get(p.key, 0)),
                )
            )  # fmt: skip
        result.append(reading)
    return result
