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
from dataclasses import is_dataclass
from datetime import date, datetime, time
from typing import Any

from control import mapper, runtime
from control.engine import specs
from control.engine.specs import PlantSpec, Snapshot
from core.redis import get_redis
from feeds.store import service as feed_service
from sensors.models import Actuator, BacnetDevice, Node

log = logging.getLogger(__name__)

CONFIG_KEY = f"{runtime.PREFIX}:config-cache"
# Bumped when the cached form changes: a copy written by another version is not read (the tick
# then reports that it has no configuration cache, as it would before its first tick).
CONFIG_FORMAT = 4  # 4: a weather output's BACnet controller and object
PENDING_AUDIT_KEY = f"{runtime.PREFIX}:pending-audit"  # list of ActuatorCommand rows as JSON
PENDING_ANALOGUE_KEY = f"{runtime.PREFIX}:pending-analogue"  # AnalogueCommand rows as JSON
PENDING_ALARMS_KEY = f"{runtime.PREFIX}:pending-alarms"  # hash: alarm key -> JSON action
HELD_ALARMS_KEY = f"{runtime.PREFIX}:held-alarms"  # hash: alarm key -> JSON action + due
OUTAGE_KEY = f"{runtime.PREFIX}:db-outage"  # JSON: since, last, cached_at, ticks

# The driver settings the runner needs to switch an actuator without its database row.
_DRIVER_FIELDS = (
    "driver",
    "host",
    "port",
    "device_id",
    "coil",
    "node_id",
    "bacnet_device_id",
    "bacnet_object",
    "bacnet_priority",
    "bacnet_on_state",
    "bacnet_off_state",
)
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
        # The specs are plain frozen dataclasses: their fields are the __dict__. The tag lets
        # loads() give the spec back (_decode_hook) instead of a dict to map a second time.
        return {_SPEC_TAG: type(value).__name__, **vars(value)}
    raise TypeError(f"cannot cache a {type(value).__name__}")


_SPEC_TAG = "__spec"
_SPEC_TYPES = {
    name: cls for name, cls in vars(specs).items() if isinstance(cls, type) and is_dataclass(cls)
}


def _decode_hook(obj: dict) -> Any:
    if _SPEC_TAG in obj:
        cls = _SPEC_TYPES[obj.pop(_SPEC_TAG)]
        # JSON has no tuples; the specs hold tuples (frozen, compared by value).
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in obj.items()})
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


def _tagged(spec: Any, **changes: Any) -> dict:
    """A spec as dumps() writes it, with `changes` (live values blanked: they are not config)."""
    return {_SPEC_TAG: type(spec).__name__, **vars(spec), **changes}


# Actuator fields that are runtime state (control/runtime.py), not configuration.
_ACTUATOR_RUNTIME = {
    "is_on": None,
    "changed_at": None,
    "last_off_at": None,
    "fault": False,
    "confirmed": False,
    "last_on_at": None,
    "on_confirmed_at": None,
    "owner": "",
    "released_from": "",
}


def config_of(snapshot: Snapshot, actuators: dict[int, Actuator], feeds: dict) -> dict:
    """The configuration part of a snapshot (the specs control/mapper.py made) without
    readings, runtime state or memory. `feeds` maps ("zone", id) / ("collector", id) /
    ("tank", id) / ("outside", id) / ("flow", id) to the feed to read."""
    return {
        "format": CONFIG_FORMAT,
        "cached_at": snapshot.now,
        "time_zone": snapshot.time_zone,
        "zones": [
            {
                "spec": _tagged(z, reading=None, window_contact=None),
                "feed_id": feeds.get(("zone", z.id)),
                "contact_feed_id": feeds.get(("window_contact", z.id)),
            }
            for z in snapshot.zones
        ],
        "actuators": [
            {
                "spec": _tagged(spec, **_ACTUATOR_RUNTIME),
                "driver": {name: getattr(actuators[aid], name) for name in _DRIVER_FIELDS},
                "bacnet": _controller_of(actuators[aid]),
            }
            for aid, spec in snapshot.actuators.items()
        ],
        "plants": [_plant_config(p, feeds) for p in snapshot.plants],
        "heat_mains": [
            {"spec": _tagged(m, flow=None), "flow_feed_id": feeds.get(("heatmain_flow", m.id))}
            for m in snapshot.heat_mains
        ],
        "stores": [
            {
                "spec": _tagged(t, top=None, bottom=None),
                "top_feed_id": feeds.get(("store_top", t.id)),
                "bottom_feed_id": feeds.get(("store_bottom", t.id)),
            }
            for t in snapshot.stores
        ],
        "solars": [
            {
                "spec": _tagged(s, collector=None, tank=None),
                "collector_feed_id": feeds.get(("collector", s.id)),
                "tank_feed_id": feeds.get(("tank", s.id)),
            }
            for s in snapshot.solars
        ],
    }


def _controller_of(actuator: Actuator) -> dict | None:
    """A BACnet output's controller as its driver needs it (drivers/bacnet.py), so the output
    is still switched, and handed back, while the database is away."""
    device = actuator.bacnet_device if actuator.bacnet_device_id else None
    if device is None:
        return None
    return {
        "address": device.address,
        "timeout_s": device.timeout_s,
        "node_id": device.node_id,
        "name": device.node.name,
    }


def _plant_config(plant: PlantSpec, feeds: dict) -> dict:
    return {
        "spec": _tagged(plant, outside=None, flow=None),
        "outside_feed_id": feeds.get(("outside", plant.id)),
        "flow_feed_id": feeds.get(("flow", plant.id)),
    }


def save(config: dict) -> None:
    get_redis().set(CONFIG_KEY, dumps(config))


def load() -> dict | None:
    raw = get_redis().get(CONFIG_KEY)
    if not raw:
        return None
    config = loads(raw)
    return config if config.get("format") == CONFIG_FORMAT else None


def rebuild(config: dict, now: datetime):
    """A LiveSnapshot from the cached configuration and Redis only (no database query): the
    cached specs with this tick's readings and runtime state put back by the mapper."""
    from control.snapshot import LiveSnapshot

    feed_ids = {z["feed_id"] for z in config["zones"]}
    feed_ids |= {z.get("contact_feed_id") for z in config["zones"]}
    for s in config["solars"]:
        feed_ids |= {s["collector_feed_id"], s["tank_feed_id"]}
    feed_ids |= {p["outside_feed_id"] for p in config["plants"]}
    feed_ids |= {p["flow_feed_id"] for p in config["plants"]}
    feed_ids |= {m["flow_feed_id"] for m in config.get("heat_mains", [])}
    for t in config.get("stores", []):
        feed_ids |= {t["top_feed_id"], t["bottom_feed_id"]}
    feed_ids.discard(None)
    last = feed_service.last_values(feed_ids)

    zones = tuple(
        mapper.with_readings(
            z["spec"], last, reading=z["feed_id"], window_contact=z.get("contact_feed_id")
        )
        for z in config["zones"]
    )
    ids = [a["spec"].id for a in config["actuators"]]
    states = runtime.load_actuators(ids)
    rows: dict[int, Actuator] = {}
    acts = {}
    for a in config["actuators"]:
        spec = a["spec"]
        # What the drivers need to switch it without its database row.
        rows[spec.id] = Actuator(
            pk=spec.id,
            name=spec.name,
            kind=spec.kind,
            min_on_s=spec.min_on_s,
            min_off_s=spec.min_off_s,
            **a["driver"],
        )
        if a.get("bacnet"):
            c = a["bacnet"]
            rows[spec.id].bacnet_device = BacnetDevice(
                pk=rows[spec.id].bacnet_device_id,
                address=c["address"],
                timeout_s=c["timeout_s"],
                node=Node(pk=c["node_id"], name=c["name"]),
            )
        acts[spec.id] = mapper.with_runtime(spec, states[spec.id])
    plants = tuple(
        mapper.with_readings(p["spec"], last, outside=p["outside_feed_id"], flow=p["flow_feed_id"])
        for p in config["plants"]
    )
    solars = tuple(
        mapper.with_readings(
            s["spec"], last, collector=s["collector_feed_id"], tank=s["tank_feed_id"]
        )
        for s in config["solars"]
    )
    snapshot = Snapshot(
        now=now,
        time_zone=config["time_zone"],
        zones=zones,
        actuators=acts,
        plants=plants,
        solars=solars,
        memory=runtime.load_memory(),
        heat_mains=tuple(
            mapper.with_readings(m["spec"], last, flow=m["flow_feed_id"])
            for m in config.get("heat_mains", [])
        ),
        stores=tuple(
            mapper.with_readings(t["spec"], last, top=t["top_feed_id"], bottom=t["bottom_feed_id"])
            for t in config.get("stores", [])
        ),
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


def hold_alarm(key: str, action: dict, due: float) -> None:
    """An alarm raised during an outage, held until `due` (unix s) when the database is back:
    raised then only if nothing cleared it meanwhile (control/runner.py _raise_held)."""
    get_redis().hset(HELD_ALARMS_KEY, key, json.dumps({**action, "due": due}))


def held_alarms() -> dict[str, dict]:
    raw = get_redis().hgetall(HELD_ALARMS_KEY)
    return {k.decode(): json.loads(v) for k, v in raw.items()}


def drop_held(key: str) -> None:
    get_redis().hdel(HELD_ALARMS_KEY, key)


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
