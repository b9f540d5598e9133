"""Inputs as emoncms shapes them (Modules/input/input_model.php), and process lists in
emoncms's two notations, for the /input/* paths its clients read (sensors/emoncms_input_views.py).

An emoncms input is our Sensor: its `id` is the sensor's, `nodeid` its node's name, `name` the
key posted, `description` the sensor's name. Its last time and value are the node's
`sensors:last` hash in Redis (sensors/ingest/node_state.py), as emoncms keeps them in
`input:lastvalue:<id>`. emoncms holds inputs as Redis hashes too, so every field is a string
except `time` and `value` (input_model.php `redis_getlist`).

A process list is stored here as steps ({"process": "log_to_feed", "feed": 5}); emoncms writes
it as text (`1:5,2:0.5,process__power_to_kwh:6`, Process::encode_processlist) and 11.16's
editor posts JSON ([{"fn": "process__log_to_feed", "args": [5]}], Process::validate_processlist).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from django.db.models import QuerySet

from core.parsers import NestedTooDeeply, loads_bounded
from core.redis import get_redis
from feeds.processes import catalog
from sensors.ingest import node_state
from sensors.models import Node, Sensor

# A process list as text or JSON from a client: 64 steps (catalog.MAX_STEPS) of emoncms's
# longest ("process__power_to_kwh_custom:1440:9223372036854775807") fit well inside this.
MAX_PROCESSLIST_CHARS = 8_000


def node_labels(nodes: Iterable[Node]) -> dict[int, str]:
    """emoncms's `nodeid` per node: its name, or `<site slug>/<name>` when nodes of two sites
    listed together share a name (emoncms keys inputs by node name; two would collide)."""
    nodes = list(nodes)
    counts: dict[str, int] = {}
    for node in nodes:
        counts[node.name] = counts.get(node.name, 0) + 1
    return {
        n.pk: n.name if counts[n.name] == 1 or n.site is None else f"{n.site.slug}/{n.name}"
        for n in nodes
    }


def sites_of_node(found: list[Sensor], name: str) -> list[str]:
    """The slugs of the sites whose node `name` has inputs among `found` (sorted)."""
    return sorted(
        {s.node.site.slug if s.node.site else "(no site)" for s in found if s.node.name == name}
    )


def sensors(site_slug: str | None = None) -> QuerySet[Sensor]:
    found = Sensor.objects.select_related("node", "node__site").order_by("node__name", "key")
    return found.filter(node__site__slug=site_slug) if site_slug else found


def last_values(node_ids: Iterable[int]) -> dict[int, dict[str, tuple[int, float]]]:
    """{node: {input key: (t, value)}} in one Redis round trip however many nodes."""
    ids = sorted(set(node_ids))
    pipe = get_redis().pipeline(transaction=False)
    for node_id in ids:
        pipe.hgetall(node_state.last_key(node_id))
    out: dict[int, dict[str, tuple[int, float]]] = {}
    for node_id, raw in zip(ids, pipe.execute(), strict=True):
        values = out[node_id] = {}
        for key, text in raw.items():
            t, _, value = text.decode().partition(" ")
            values[key.decode()] = (int(t), float(value))
    return out


def _timevalue(last: tuple[int, float] | None) -> tuple[int | None, float | None]:
    if last is None or not math.isfinite(last[1]):
        return None, None
    return int(last[0]), float(last[1])


def rows(found: list[Sensor]) -> list[dict]:
    """input/list.json: one row per input (Input::getlist)."""
    labels = node_labels({s.node.pk: s.node for s in found}.values())
    last = last_values(s.node_id for s in found)
    out = []
    for s in found:
        t, v = _timevalue(last[s.node_id].get(s.key))
        out.append({"id": str(s.pk), "nodeid": labels[s.node_id], "name": s.key,
                    "description": s.name, "processList": encode(s.processes),
                    "time": t, "value": v})  # fmt: skip
    return out


def by_node(found: list[Sensor], *, with_values: bool) -> dict[str, dict[str, dict]]:
    """input/get (Input::get_inputs_v2, with_values) or input/getinputs.json (get_inputs):
    {nodeid: {name: {...}}}."""
    labels = node_labels({s.node.pk: s.node for s in found}.values())
    last = last_values(s.node_id for s in found) if with_values else {}
    out: dict[str, dict[str, dict]] = {}
    for s in found:
        if with_values:
            t, v = _timevalue(last[s.node_id].get(s.key))
            entry = {"time": t, "value": v, "processList": encode(s.processes)}
        else:
            entry = {"id": str(s.pk), "processList": encode(s.processes)}
        out.setdefault(labels[s.node_id], {})[s.key] = entry
    return out


# --- process lists ----------------------------------------------------------------------------


def _number_text(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def encode(steps: object) -> str:
    """Our steps as emoncms's text: `<id>:<arg>` joined by commas; a process emoncms lists
    with no id (error_found) by its key `process__<name>`; a step with no argument `:0`, as
    emoncms's editor writes it."""
    if not isinstance(steps, list):
        return ""
    parts = []
    for step in steps:
        name = catalog.process_name(step.get("process")) if isinstance(step, dict) else None
        if name is None:
            continue  # never saved so: every list is checked before it is stored
        spec = catalog.PROCESSES[name]
        key = str(spec.id) if catalog.BY_ID.get(spec.id) == name else f"process__{name}"
        args = []
        for arg in spec.args or spec.optional:
            value = step.get(arg, 0)
            args.append(value if isinstance(value, str) else _number_text(value))
        parts.append(":".join([key, *(args or ["0"])]))
    return ",".join(parts)


def decode(raw: str) -> tuple[list[dict], list[str]]:
    """(our steps, errors naming the step) from emoncms's JSON ([{"fn", "args"}]) or text
    ("1:5,2:0.5"). Shape only: which feeds and inputs exist is checked by the caller
    (sensors/process_validation.py), as for every other way a list is saved."""
    text = raw.strip()
    try:
        parsed = loads_bounded(text) if text.startswith(("[", "{")) else None
    except NestedTooDeeply as exc:  # a RecursionError was a 500
        return [], [f"processlist: {exc}"]
    except ValueError:
        return [], ['processlist: not valid JSON (emoncms\'s [{"fn": ..., "args": [...]}])']
    if parsed is not None:
        if not isinstance(parsed, list):
            return [], ['processlist: must be a list of {"fn", "args"}']
        items = []
        for i, item in enumerate(parsed):
            if not isinstance(item, dict) or "fn" not in item:
                return [], [f"Missing process key in process list at index {i}"]
            if not isinstance(item.get("args"), list):
                return [], [f"Invalid or missing args in process list at index {i}"]
            items.append((item["fn"], item["args"]))
    else:
        items = []
        for segment in text.split(","):
            if segment.strip():
                key, *args = segment.strip().split(":")
                items.append((key.strip(), [a.strip() for a in args]))
    if len(items) > catalog.MAX_STEPS:
        return [], [f"processlist: at most {catalog.MAX_STEPS} steps, got {len(items)}"]
    steps, errors = [], []
    for i, (fn, args) in enumerate(items):
        step, problem = _step(i, fn, args)
        if problem:
            errors.append(problem)
        else:
            steps.append(step)
    return steps, errors


def _step(i: int, fn: object, args: list) -> tuple[dict, str]:
    name = catalog.process_name(fn) if isinstance(fn, str | int) else None
    if name is None:
        return {}, f"step {i}: Invalid process process key:{str(fn)[:60]}"
    spec = catalog.PROCESSES[name]
    wanted = spec.args
    if not wanted:
        # emoncms gives an argument-less process one ignored argument (ProcessArg::NONE)
        extra = args[:1] if spec.optional and args and str(args[0]) not in ("", "0") else []
        step: dict = {"process": name}
        for key, value in zip(spec.optional, extra, strict=False):
            step[key] = _as_number(value)
        return step, ""
    if len(args) != len(wanted):
        return {}, f"step {i}: Invalid number of arguments for process: {name}"
    step = {"process": name}
    for key, value in zip(wanted, args, strict=True):
        if key in ("feed", "input"):
            step[key] = _as_id(value)
        elif key == "topic":
            step[key] = value if isinstance(value, str) else str(value)
        else:
            step[key] = _as_number(value)
    return step, ""


def _as_id(value: object) -> object:
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) < 20:
        return int(value)
    return value  # left as given: the catalog names it as not a feed/input id


def _as_number(value: object) -> object:
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return value  # the catalog refuses it: "'arg' must be a finite number"
        return int(number) if number.is_integer() and abs(number) < 2**53 else number
    return value
