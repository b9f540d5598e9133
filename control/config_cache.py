"""What the tick needs to keep running while the database is unavailable.

After every tick that read the database, the configuration part of its snapshot (zones with
their schedules, exceptions, bookings and overrides; actuators with their driver settings;
heating plants; solar circuits) is kept in Redis as plain JSON. When the database cannot be
read, the tick rebuilds its snapshot from that copy plus what lives in Redis anyway (the feeds'
last values, actuator runtime state, strategy memory), so frost protection, over-temperature,
schedules and bookings keep working. What the tick would have written to the database meanwhile
(ActuatorCommand and AnalogueCommand audit rows, alarms) waits in Redis and is written once the
database is back.
"""

from __future__ import annotations

import json
import logging
from dataclasses import fields, is_dataclass
from datetime import date, datetime, time
from typing import Any

from control import runtime
from control.engine.specs import (
    ActuatorSpec,
    BookingSpec,
    ExceptionSpec,
    KickSpec,
    OutputOverrideSpec,
    OverrideSpec,
    PeriodSpec,
    PlantSpec,
    Reading,
    ScheduleSpec,
    Snapshot,
    SolarSpec,
    WeatherSpec,
    ZoneSpec,
)
from core.redis import get_redis
from feeds import service as feed_service
from sensors.models import Actuator

log = logging.getLogger(__name__)

CONFIG_KEY = f"{runtime.PREFIX}:config-cache"
PENDING_AUDIT_KEY = f"{runtime.PREFIX}:pending-audit"  # list of ActuatorCommand rows as JSON
PENDING_ANALOGUE_KEY = f"{runtime.PREFIX}:pending-analogue"  # AnalogueCommand rows as JSON
PENDING_ALARMS_KEY = f"{runtime.PREFIX}:pending-alarms"  # hash: alarm key -> JSON action
OUTAGE_KEY = f"{runtime.PREFIX}:db-outage"  # JSON: since, last, cached_at, ticks

# The driver settings the runner needs to switch an actuator without its database row.
_DRIVER_FIELDS = ("driver", "host", "port", "device_id", "coil", "node_id")
_AUDIT_FIELDS = (
    "actuator_id",
    "state",
    "reason",
    "strategy",
    "user_id",
    "requested_at",
    "sent_at",
    "confirmed_at",
    "error",
)

_ANALOGUE_FIELDS = (
    "plant_id",
    "value",
    "unit",
    "raw",
    "reason",
    "strategy",
    "user_id",
    "requested_at",
    "sent_at",
    "confirmed_at",
    "error",
)


# --- JSON with dates -------------------------------------------------------------------------


def _default(value: Any) -> Any:
    """What json cannot encode itself; the C encoder walks the rest. (A recursive Python
    encoder and dataclasses.asdict, which deep-copies, were a third of a 500-zone tick.)"""
    # datetime before date: a datetime is a date too.
    if isinstance(value, datetime):
        return {"__dt": value.isoformat()}
    if isinstance(value, date):
        return {"__d": value.isoformat()}
    if isinstance(value, time):
        return {"__t": value.isoformat()}
    if is_dataclass(value) and not isinstance(value, type):
        return vars(value)  # the specs are plain frozen dataclasses: fields are the __dict__
    raise TypeError(f"cannot cache a {type(value).__name__}")


def _decode_hook(obj: dict) -> Any:
    if len(obj) == 1:
        if "__dt" in obj:
            return datetime.fromisoformat(obj["__dt"])
        if "__d" in obj:
            return date.fromisoformat(obj["__d"])
        if "__t" in obj:
            return time.fromisoformat(obj["__t"])
    return obj


def dumps(value: Any) -> str:
    return json.dumps(value, default=_default)


def loads(raw: bytes | str) -> Any:
    return json.loads(raw, object_hook=_decode_hook)


# --- the configuration ----------------------------------------------------------------------


def config_of(snapshot: Snapshot, actuators: dict[int, Actuator], feeds: dict) -> dict:
    """The configuration part of a snapshot: no readings, no runtime state, no memory.
    `feeds` maps ("zone", id) / ("collector", id) / ("tank", id) to the feed to read."""
    zones = []
    for z in snapshot.zones:
        data = dict(vars(z))  # shallow: nested specs are encoded by dumps
        data.pop("reading")
        data["feed_id"] = feeds.get(("zone", z.id))
        zones.append(data)
    acts = []
    for aid, spec in snapshot.actuators.items():
        data = dict(vars(spec))
        for transient in ("is_on", "changed_at", "last_off_at", "fault", "owner", "released_from"):
            data.pop(transient)
        row = actuators[aid]
        data.update({name: getattr(row, name) for name in _DRIVER_FIELDS})
        acts.append(data)
    solars = []
    for s in snapshot.solars:
        data = dict(vars(s))
        data.pop("collector")
        data.pop("tank")
        data["collector_feed_id"] = feeds.get(("collector", s.id))
        data["tank_feed_id"] = feeds.get(("tank", s.id))
        solars.append(data)
    return {
        "cached_at": snapshot.now,
        "time_zone": snapshot.time_zone,
        "zones": zones,
        "actuators": acts,
        "plants": [_plant_config(p, feeds) for p in snapshot.plants],
        "solars": solars,
    }


def _plant_config(plant: PlantSpec, feeds: dict) -> dict:
    data = dict(vars(plant))
    data.pop("outside")
    data.pop("flow")
    data["outside_feed_id"] = feeds.get(("outside", plant.id))
    data["flow_feed_id"] = feeds.get(("flow", plant.id))
    data["weather"] = None if plant.weather is None else dict(vars(plant.weather))
    held = plant.output_override
    data["output_override"] = None if held is None else dict(vars(held))
    return data


def save(config: dict) -> None:
    get_redis().set(CONFIG_KEY, dumps(config))


def load() -> dict | None:
    raw = get_redis().get(CONFIG_KEY)
    return loads(raw) if raw else None


def _override(data: dict | None) -> OverrideSpec | None:
    return OverrideSpec(**data) if data else None


def _kick(data: dict | None) -> KickSpec | None:
    return KickSpec(**data) if data else None


def _only(cls, data: dict) -> dict:
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in data.items() if k in names}


def _reading(last: dict[int, tuple[int, float]], feed_id: int | None) -> Reading | None:
    if feed_id is None or feed_id not in last:
        return None
    t, value = last[feed_id]
    return Reading(float(t), float(value))


def rebuild(config: dict, now: datetime):
    """A LiveSnapshot from the cached configuration and Redis only (no database query)."""
    from control.snapshot import LiveSnapshot

    feed_ids = {z["feed_id"] for z in config["zones"]}
    for s in config["solars"]:
        feed_ids |= {s["collector_feed_id"], s["tank_feed_id"]}
    feed_ids |= {p.get("outside_feed_id") for p in config["plants"]}
    feed_ids |= {p.get("flow_feed_id") for p in config["plants"]}
    feed_ids.discard(None)
    last = feed_service.last_values(feed_ids)

    zones = []
    for z in config["zones"]:
        schedule = None
        if z["schedule"] is not None:
            sch = z["schedule"]
            schedule = ScheduleSpec(
                sch["name"],
                tuple(PeriodSpec(**p) for p in sch["periods"]),
                tuple(ExceptionSpec(**e) for e in sch["exceptions"]),
            )
        data = _only(ZoneSpec, z)
        data.update(
            reading=_reading(last, z["feed_id"]),
            schedule=schedule,
            bookings=tuple(BookingSpec(**b) for b in z["bookings"]),
            override=_override(z["override"]),
            actuator_ids=tuple(z["actuator_ids"]),
        )
        zones.append(ZoneSpec(**data))

    ids = [a["id"] for a in config["actuators"]]
    states = runtime.load_actuators(ids)
    rows: dict[int, Actuator] = {}
    specs: dict[int, ActuatorSpec] = {}
    for a in config["actuators"]:
        state = states[a["id"]]
        rows[a["id"]] = Actuator(
            pk=a["id"],
            name=a["name"],
            kind=a["kind"],
            min_on_s=a["min_on_s"],
            min_off_s=a["min_off_s"],
            **{name: a[name] for name in _DRIVER_FIELDS},
        )
        data = _only(ActuatorSpec, a)
        data.update(
            override=_override(a["override"]),
            is_on=state.on,
            changed_at=state.changed_at,
            last_off_at=state.last_off_at,
            fault=bool(state.fault),
            owner=state.owner,
            released_from=state.released_from,
        )
        specs[a["id"]] = ActuatorSpec(**data)

    plants = tuple(
        PlantSpec(
            **{
                **_only(PlantSpec, p),
                "zone_ids": tuple(p["zone_ids"]),
                "kick": _kick(p["kick"]),
                "outside": _reading(last, p.get("outside_feed_id")),
                "flow": _reading(last, p.get("flow_feed_id")),
                "weather": WeatherSpec(**p["weather"]) if p.get("weather") else None,
                "output_override": (
                    OutputOverrideSpec(**p["output_override"]) if p.get("output_override") else None
                ),
            }
        )
        for p in config["plants"]
    )
    solars = tuple(
        SolarSpec(
            **{
                **_only(SolarSpec, s),
                "collector": _reading(last, s["collector_feed_id"]),
                "tank": _reading(last, s["tank_feed_id"]),
                "kick": _kick(s["kick"]),
            }
        )
        for s in config["solars"]
    )
    snapshot = Snapshot(
        now=now,
        time_zone=config["time_zone"],
        zones=tuple(zones),
        actuators=specs,
        plants=plants,
        solars=solars,
        memory=runtime.load_memory(),
    )
    return LiveSnapshot(snapshot, rows, states, {})


# --- what waits for the database -------------------------------------------------------------


def _queue_rows(key: str, fields: tuple[str, ...], rows: list) -> None:
    if rows:
        get_redis().rpush(key, *(dumps({name: getattr(r, name) for name in fields}) for r in rows))


def _pending_rows(key: str) -> list[dict]:
    return [loads(raw) for raw in get_redis().lrange(key, 0, -1)]


def _drop_rows(key: str, count: int) -> None:
    # Only what was written: rows queued meanwhile by another process stay.
    get_redis().ltrim(key, count, -1)


def queue_audit(rows: list) -> None:
    """ActuatorCommand rows (unsaved model instances) to write when the database is back."""
    _queue_rows(PENDING_AUDIT_KEY, _AUDIT_FIELDS, rows)


def pending_audit() -> list[dict]:
    return _pending_rows(PENDING_AUDIT_KEY)


def drop_audit(count: int) -> None:
    _drop_rows(PENDING_AUDIT_KEY, count)


def queue_analogue(rows: list) -> None:
    """AnalogueCommand rows (unsaved model instances) to write when the database is back: the
    same kind of queue as the relays' rows, so an output held or moved during an outage is
    audited."""
    _queue_rows(PENDING_ANALOGUE_KEY, _ANALOGUE_FIELDS, rows)


def pending_analogue() -> list[dict]:
    return _pending_rows(PENDING_ANALOGUE_KEY)


def drop_analogue(count: int) -> None:
    _drop_rows(PENDING_ANALOGUE_KEY, count)


def queue_alarm(key: str, action: dict) -> None:
    get_redis().hset(PENDING_ALARMS_KEY, key, json.dumps(action))


def pending_alarms() -> dict[str, dict]:
    raw = get_redis().hgetall(PENDING_ALARMS_KEY)
    return {k.decode(): json.loads(v) for k, v in raw.items()}


def drop_alarm(key: str) -> None:
    get_redis().hdel(PENDING_ALARMS_KEY, key)


def note_outage(now: datetime, cached_at: datetime | None) -> dict:
    client = get_redis()
    raw = client.get(OUTAGE_KEY)
    outage = loads(raw) if raw else {"since": now, "ticks": 0}
    outage.update(last=now, cached_at=cached_at, ticks=outage["ticks"] + 1)
    client.set(OUTAGE_KEY, dumps(outage))
    return outage


def outage() -> dict | None:
    raw = get_redis().get(OUTAGE_KEY)
    return loads(raw) if raw else None


def end_outage() -> None:
    get_redis().delete(OUTAGE_KEY)
