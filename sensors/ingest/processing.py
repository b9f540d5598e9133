"""The worker side of ingest: (node, key) -> Sensor -> conversion -> input processes.

Called by the ingest drain (sensors/ingest/drain.py, in the Celery task
`sensors.tasks.drain_ingest_shard`) (and directly by the Modbus poller,
which already runs in a worker). Rows are `[t, {key: number}]`, validated by the web
process. An unseen key of a known node gets a Sensor (auto_created) and a Feed
`<node>:<key>` logged with log_to_feed, so nothing is dropped before it is configured, up to
the bound of sensors/ingest/input_budget.py: beyond it a new key's readings are skipped (with an alarm).

Per batch: one cached sensor map, one Redis pipeline for pulse state, one call to
feeds.store.service.process_inputs (which pipelines the feed buffer), one script call for node
state (a drain's pass: one for all its nodes, NodeStateWrites).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from django.db import DatabaseError, transaction

from alarms.lifecycle import clear_alarm, raise_alarm
from core.redis import get_redis, redis_script
from feeds.models import Feed
from feeds.processes import catalog as process_catalog
from sensors import conversions as cv
from sensors.cache import ProcessCache, ProcessTable, bump_generation, check_generation
from sensors.devices import mqtt_publish
from sensors.ingest import input_budget, input_errors
from sensors.ingest import node_state as state
from sensors.ingest import stream as ingest_stream
from sensors.ingest.emoncms_input import Skipped
from sensors.models import Node, PulseCounterState, Sensor

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SensorSpec:
    id: int
    key: str
    kind: str
    params: dict
    scale: float
    offset: float
    steps: list[dict]
    min_valid: float | None
    max_valid: float | None

    @classmethod
    def from_row(
        cls,
        pk: int,
        key: str,
        kind: str,
        params: object,
        scale: float,
        offset: float,
        processes: list[dict] | None,
        feed_id: int | None,
        min_valid: float | None,
        max_valid: float | None,
    ) -> SensorSpec:
        steps = processes or ([{"process": "log_to_feed", "feed": feed_id}] if feed_id else [])
        return cls(
            pk,
            key,
            kind,
            params if isinstance(params, dict) else {},
            scale,
            offset,
            steps,
            min_valid,
            max_valid,
        )


@dataclass
class IngestReport:
    rows: int = 0
    values: int = 0
    items: int = 0
    created_sensors: list[str] = field(default_factory=list)
    skipped_keys: list[str] = field(default_factory=list)
    conversion_errors: int = 0
    late: int = 0  # readings a stateful step could not count (recorded in input errors)
    already_done: bool = False  # the entry was processed before (a redelivery): nothing done


_SPEC_FIELDS = (
    "node_id", "pk", "key", "kind", "params", "scale", "offset", "processes", "feed_id",
    "min_valid", "max_valid",
)  # fmt: skip


def _read_sensor_maps(node_ids: list[int] | None = None) -> dict[int, dict[str, SensorSpec]]:
    """Every node's inputs as specs (one query whatever the number of nodes), or `node_ids`'.
    Rows, not model instances: at 10,000 nodes x 5 inputs the instances cost 0.63 s of CPU a
    read, during which the drain takes nothing (bench/ingest_cpu.py --tables-only)."""
    sensors = Sensor.objects.order_by()
    if node_ids is not None:
        sensors = sensors.filter(node_id__in=node_ids)
    out: dict[int, dict[str, SensorSpec]] = {}
    for node_id, *row in sensors.values_list(*_SPEC_FIELDS):
        spec = SensorSpec.from_row(*row)
        out.setdefault(node_id, {})[spec.key] = spec
    return out


# Every node's inputs, one table per process (sensors/cache.py's ProcessTable, as the web's
# keys and feed files), dropped within a second of a config change. Each node's entry of its
# own ran out after its 60 s TTL and was read again, a query a node a minute: at 10,000 nodes
# a sixth of the drain's CPU, and the general 10,000-entry bound evicted them sooner (#29).
# Its TTL is ten minutes, not one: the config generation drops it within a second of a change,
# the TTL only covers a bump Redis missed, and each read stops the drain (one thread) for its
# length, 0.38 s of CPU at 10,000 nodes x 5 inputs: once a minute that was the freshness tail.
SENSOR_TABLE_TTL_S = 600.0
_sensor_table = ProcessTable(_read_sensor_maps, ttl_s=SENSOR_TABLE_TTL_S)
# A node the table does not know (inputs made since it was read, before this process saw the
# config generation move; or none yet): read alone, kept until the generation moves.
_new_sensor_maps = ProcessCache(keep_stale=True)


def sensor_map(node_id: int) -> dict[str, SensorSpec]:
    try:
        specs = _sensor_table.get().get(node_id)
    except DatabaseError:
        specs = None  # no table read yet and the database away: the node's own, as before
    if specs is not None:
        return specs
    specs = _new_sensor_maps.get(node_id)
    if specs is None:
        try:
            specs = _read_sensor_maps([node_id]).get(node_id, {})
        except DatabaseError:
            # Database away (issue 27 item 8): the node's sensors as last read, so readings
            # still reach their feeds (and control) instead of waiting in the stream.
            specs = _new_sensor_maps.stale(node_id)
            if specs is None:
                raise
            return specs
        _new_sensor_maps.set(node_id, specs)
    return specs


def forget_sensor_maps() -> None:
    """This process's inputs read again at their next use (inputs were just made here)."""
    _sensor_table.clear()
    _new_sensor_maps.clear()


def create_auto_sensors(node: Node, keys: set[str]) -> list[str]:
    """A Sensor and a Feed `<node>:<key>` for each unseen key, within the bound.

    Counted and created under the site's lock (input_budget.site_lock): two nodes of one site
    creating at once used to pass the site's bound by what one batch created. The lock also
    keeps two workers from upgrading SQLite read locks to write locks at once ("database is
    locked" instead of waiting).
    """
    with input_budget.site_lock(node.site_id):
        return _create_auto_sensors(node, keys)


def _create_auto_sensors(node: Node, keys: set[str]) -> list[str]:
    existing = set(Sensor.objects.filter(node=node, key__in=keys).values_list("key", flat=True))
    created = []
    # Counted under the site's lock: the room seen here is the room there is.
    wanted = sorted(keys - existing)
    allowed = wanted[: input_budget.room(node.pk, node.site_id)]
    for key in allowed:
        with transaction.atomic():
            feed, _ = Feed.objects.get_or_create(
                tag=node.name, name=key, defaults={"interval": node.interval}
            )
            _, was_created = Sensor.objects.get_or_create(
                node=node,
                key=key,
                defaults={
                    "name": key,
                    "feed": feed,
                    "processes": [{"process": "log_to_feed", "feed": feed.pk}],
                    "auto_created": True,
                },
            )
        if was_created:
            created.append(key)
            log.info("new input %s:%s -> sensor and feed %s created", node.name, key, feed.pk)
    if created:
        bump_generation()
    return created


# A pulse counter's state goes to the database (PulseCounterState) when this many seconds of
# readings passed since it last did: at most one row write a minute per counter.
PULSE_SAVE_S = 60


def _load_pulse_states(specs: list[SensorSpec]) -> tuple[dict, dict[int, int]]:
    """(sensor id -> PulseState or None, sensor id -> t of its last database save).

    Redis first; a counter Redis has no state of (Redis lost its data) resumes from its
    database row, so its total never restarts from zero."""
    pipe = get_redis().pipeline(transaction=False)
    for spec in specs:
        pipe.hgetall(state.pulse_key(spec.id))
    result: dict[int, cv.PulseState | None] = {}
    saved: dict[int, int] = {}
    for spec, raw in zip(specs, pipe.execute(), strict=True):
        if raw:
            pending = raw.get(b"pending") or b""
            result[spec.id] = cv.PulseState(
                int(raw[b"t"]),
                int(raw[b"count"]),
                float(raw[b"total"]),
                int(pending) if pending else None,
            )
            saved[spec.id] = int(raw.get(b"saved") or 0)
        else:
            result[spec.id] = None
    missing = [sid for sid, st in result.items() if st is None]
    if missing:
        for row in PulseCounterState.objects.filter(sensor_id__in=missing):
            result[row.sensor_id] = cv.PulseState(row.t, row.count, row.total, row.pending)
            saved[row.sensor_id] = row.t
            log.info("pulse counter %s resumed from its saved state (total %g)", row.pk, row.total)
    return result, saved


def _save_pulse_states(states: dict[int, cv.PulseState]) -> None:
    rows = [
        PulseCounterState(sensor_id=sid, t=ps.t, count=ps.count, total=ps.total, pending=ps.pending)
        for sid, ps in states.items()
    ]
    # Upsert; a sensor deleted meanwhile makes its row fail the foreign key: skip those.
    existing = set(Sensor.objects.filter(pk__in=states).values_list("pk", flat=True))
    PulseCounterState.objects.bulk_create(
        [r for r in rows if r.sensor_id in existing],
        update_conflicts=True,
        unique_fields=["sensor"],
        update_fields=["t", "count", "total", "pending"],
    )


def _pulse_value(
    spec: SensorSpec, states: dict[int, cv.PulseState | None], t: int, raw: float
) -> float | None:
    p = spec.params
    result = cv.pulse_step(
        states.get(spec.id),
        t,
        raw,
        pulses_per_unit=float(p.get("pulses_per_unit", 1.0)),
        bits=int(p.get("counter_bits", 32)),
        rate_scale=float(p.get("rate_scale", 1.0)),
        max_rate=float(p.get("max_pulse_rate", cv.DEFAULT_MAX_PULSE_RATE)),
    )
    if result is None:
        return None  # not newer than the counter's state: an older count tells nothing
    states[spec.id] = result.state
    if p.get("output", "total") == "rate":
        return result.rate
    return result.state.total


def ingest_rows(
    node_id: int,
    rows: list[list],
    now: float | None = None,
    entry: str | None = None,
    *,
    check_config: bool = True,
    node_state: NodeStateWrites | None = None,
) -> IngestReport:
    """Process a node's rows. `entry`: the id of the last stream entry the rows came from
    (sensors/ingest/drain.py); it is recorded with the points, and rows of an entry already
    recorded are not processed again (a drain killed before its XACK, the entry redelivered).

    A drain's pass reads the config generation once for all its nodes (`check_config=False`
    here) and sends the nodes' state in one pipeline at its end (`node_state`, flushed by the
    caller): two Redis round trips a pass instead of two a node (#29)."""
    now = time.time() if now is None else now
    if check_config:
        check_generation()
    converted = _convert(node_id, rows, now, entry, node_state)
    if isinstance(converted, IngestReport):
        return converted
    run = _run_alone(converted, node_state) if converted.items else None
    return _finish(converted, run, node_state)


@dataclass(frozen=True)
class NodeRows:
    """One node's rows for ingest_many: those of its stream entries up to `entry`."""

    node_id: int
    rows: list[list]
    entry: str


def ingest_many(
    batches: list[NodeRows], node_state: NodeStateWrites, now: float | None = None
) -> list[IngestReport]:
    """ingest_rows of several nodes (a drain's pass; the config generation read by the
    caller): every node's process lists and points in ONE Redis transaction (issue #29: one
    WATCH, one read and one EXEC for the pass, where each node cost its own three round
    trips), each node as ingest_rows would process it. A node whose process lists read other
    inputs (*_input steps) runs on its own after the others, once their last values are
    written, as it would have. The reports, in the batches' order."""
    from feeds.processes.run import RunCall
    from feeds.store import service

    now = time.time() if now is None else now
    reports: list[IngestReport | None] = [None] * len(batches)
    converted: list[tuple[int, _Converted]] = []
    for i, batch in enumerate(batches):
        got = _convert(batch.node_id, batch.rows, now, batch.entry, node_state)
        if isinstance(got, IngestReport):
            reports[i] = got
        else:
            converted.append((i, got))
    together = [(i, c) for i, c in converted if c.items and not c.refs]
    runs = service.process_many(
        [RunCall(c.items, mark=(ingest_stream.done_key(c.node_id), c.entry)) for _i, c in together]
    )
    ran = dict(zip((i for i, _c in together), runs, strict=True))
    for i, c in converted:
        if i in ran:
            reports[i] = _finish(c, ran[i], node_state)
    for i, c in converted:  # without items, or reading other inputs: after the others
        if i not in ran:
            reports[i] = _finish(c, _run_alone(c, node_state) if c.items else None, node_state)
    return [r for r in reports if r is not None]


@dataclass
class _Converted:
    """A node's rows converted to process items, and what _finish needs after the run."""

    node_id: int
    now: float
    entry: str | None
    report: IngestReport
    pulse_specs: list[SensorSpec]
    pulse_states: dict[int, cv.PulseState | None]
    pulse_saved: dict[int, int]
    items: list[tuple[str, list[dict], int, float, int]]
    last: dict[str, tuple[int, float]]
    out_of_range: dict[int, tuple[SensorSpec, float]]
    latest_checked: dict[int, tuple[SensorSpec, float]]
    late_counts: list[Skipped]
    input_ids: dict[str, int]  # of the inputs with items, when their steps read other inputs
    refs: set[int]  # the other inputs their *_input steps read


def _convert(
    node_id: int,
    rows: list[list],
    now: float,
    entry: str | None,
    node_state: NodeStateWrites | None,
) -> _Converted | IngestReport:
    """The node's rows as process items (new keys made inputs, within the bound); an
    IngestReport when there is nothing to run (a deleted node)."""
    report = IngestReport(rows=len(rows))
    specs = sensor_map(node_id)
    keys = {key for _, values in rows for key in values}
    unseen = keys - specs.keys()
    if unseen:
        node = Node.objects.filter(pk=node_id).first()
        if node is None:
            log.warning("batch for deleted node %s dropped (%d rows)", node_id, len(rows))
            return report
        report.created_sensors = create_auto_sensors(node, unseen)
        forget_sensor_maps()
        specs = sensor_map(node_id)
        skipped = sorted(keys - specs.keys())
        if skipped:
            # Beyond the auto-created input bound: these keys' readings are dropped, the
            # node's known inputs are processed as usual (sensors/ingest/input_budget.py).
            points = sum(1 for _, values in rows for k in values if k not in specs)
            rows = [[t, {k: v for k, v in values.items() if k in specs}] for t, values in rows]
            report.skipped_keys = skipped
            input_budget.record_skipped(node, skipped, points)
            keys -= set(skipped)

    # A pulse counter's state is read here and written after the feed store took the batch. No
    # lock: one drain at a time processes a node's requests (sensors/ingest/drain.py), and a
    # redelivered request is recognised by its stream entry (`entry`); a count not newer than
    # the state is dropped by pulse_step.
    pulse_specs = [s for s in specs.values() if s.kind == cv.PULSE_KIND and s.key in keys]
    if node_state is not None and node_id in node_state:
        node_state.flush()  # its pulse counters as the node's last chunk left them
    pulse_states, pulse_saved = _load_pulse_states(pulse_specs) if pulse_specs else ({}, {})
    items: list[tuple[str, list[dict], int, float, int]] = []
    last: dict[str, tuple[int, float]] = {}
    out_of_range: dict[int, tuple[SensorSpec, float]] = {}
    latest_checked: dict[int, tuple[SensorSpec, float]] = {}
    late_counts: list[Skipped] = []
    # In the order the rows were accepted, request by request, as emoncms processes posts: a
    # drain's chunk joins however many requests were waiting, so sorting it by time made the
    # feeds depend on the drain's timing (a future-dated post was counted before or after the
    # posts that followed it). Late rows are handled by the steps (feeds/processes/steps.py).
    # Each row is one post: its values are stored before its process lists run.
    for post, (t, values) in enumerate(rows):
        t = int(t)
        for key, raw in values.items():
            report.values += 1
            spec = specs[key]
            try:
                if spec.kind == cv.PULSE_KIND:
                    before = pulse_states.get(spec.id)
                    value = _pulse_value(spec, pulse_states, t, raw)
                    if value is None:
                        if before is not None and t < before.t:
                            late_counts.append(_late_count(key, t, before.t))
                        continue
                else:
                    value = cv.convert(spec.kind, float(raw), spec.params)
                value = cv.calibrate(value, spec.scale, spec.offset)
            except (cv.ConversionError, ValueError, TypeError, OverflowError) as exc:
                report.conversion_errors += 1
                log.warning("node %s input %s at %s: %s", node_id, key, t, exc)
                continue
            items.append((f"{node_id}:{key}", spec.steps, t, value, post))
            # The row that arrived last, as emoncms's bulk sets each input row by row: a later
            # request's *_input steps (and the inputs page) see it whatever its time, the same
            # as a row of the same request does (the drain may run requests apart or together).
            last[key] = (t, value)
            if spec.min_valid is not None or spec.max_valid is not None:
                latest_checked[spec.id] = (spec, value)
                if _outside(spec, value):
                    out_of_range[spec.id] = (spec, value)

    report.items = len(items)
    used = [specs[k] for k in {item_key.partition(":")[2] for item_key, *_ in items}]
    refs = set().union(*(process_catalog.input_ids(spec.steps) for spec in used))
    return _Converted(
        node_id=node_id,
        now=now,
        entry=entry,
        report=report,
        pulse_specs=pulse_specs,
        pulse_states=pulse_states,
        pulse_saved=pulse_saved,
        items=items,
        last=last,
        out_of_range=out_of_range,
        latest_checked=latest_checked,
        late_counts=late_counts,
        input_ids={f"{node_id}:{spec.key}": spec.id for spec in used} if refs else {},
        refs=refs,
    )


def _run_alone(c: _Converted, node_state: NodeStateWrites | None):
    """The node's items through their process lists in a transaction of their own."""
    from feeds.store import service  # the feed store; imported late so web never loads numpy paths

    if c.refs and node_state is not None:
        node_state.flush()  # *_input steps read other nodes' last values: this pass's
    return service.process_inputs(
        c.items,
        input_last=input_values(c.refs) if c.refs else None,
        input_ids=c.input_ids or None,
        mark=(ingest_stream.done_key(c.node_id), c.entry) if c.entry is not None else None,
    )


def _finish(c: _Converted, run, node_state: NodeStateWrites | None) -> IngestReport:
    """After the run (None: nothing to run): what it published, its late and duplicate
    readings recorded, the node's state queued (or written), its range alarms."""
    report, node_id = c.report, c.node_id
    if run is not None:
        if run.already_done:
            report.already_done = True
            log.info("node %s: entry %s was processed before, not counted again", node_id, c.entry)
            return report
        if run.published:
            mqtt_publish.queue(run.published)
        if run.late:
            report.late = run.replayed
            _record_late(node_id, run)
        if run.duplicates:
            input_errors.record_duplicates(input_errors.node_subject(node_id), run.duplicates)
    if c.late_counts:
        _record_late_counts(node_id, c.late_counts)
    writes = NodeStateWrites() if node_state is None else node_state
    writes.queue(
        node_id,
        c.now,
        c.last,
        c.pulse_states,
        c.pulse_specs,
        bool(report.skipped_keys),
        c.pulse_saved,
    )
    if node_state is None:
        writes.flush()
    if c.latest_checked:
        _range_alarms(node_id, c.latest_checked, c.out_of_range)
    return report


def _record_late(node_id: int, run) -> None:
    """Readings a stateful step could not count go to the node's input errors, where staff see
    them (emoncms would have processed them without a word; nothing after the step is held)."""
    name = Node.objects.filter(pk=node_id).values_list("name", flat=True).first() or node_id
    skipped = [
        Skipped(
            None,
            f"input {late.input_key.partition(':')[2]}",
            f"reading at {late.t} is before the last one {late.process} processed "
            f"({late.last_t}): {_late_outcome(late)}, the later steps ran",
        )
        for late in run.late
    ]
    input_errors.record(
        input_errors.node_subject(node_id),
        f"Node '{name}'",
        skipped,
        count=run.replayed,
        processed_late=run.processed_late,
    )


def _late_outcome(late) -> str:
    if late.moved_back:
        # emoncms's rule: the next reading counts from this one, so an interval a future-dated
        # reading already covered is counted again. Staff should know the sender's clock jumped.
        return (
            "processed late: its clock moved back to it, as emoncms's does (the time up to the "
            "later one may count twice)"
        )
    return "not counted by it"


def _late_count(key: str, t: int, last_t: int) -> Skipped:
    return Skipped(
        None,
        f"input {key}",
        f"pulse count at {t} is before the counter's last reading ({last_t}): no point and no "
        f"process list for it (its pulses are in the next count)",
    )


def _record_late_counts(node_id: int, skipped: list[Skipped]) -> None:
    """An older pulse count loses no pulses (the counts are cumulative), but its reading gets
    no point and its process list does not run; after a future-dated count that lasts until
    the clock passes it. Recorded where staff see it, as the late readings of process steps."""
    name = Node.objects.filter(pk=node_id).values_list("name", flat=True).first() or node_id
    input_errors.record(input_errors.node_subject(node_id), f"Node '{name}'", skipped)


def input_values(sensor_ids: set[int]) -> dict[int, float]:
    """Last value of each sensor (its node's sensors:last hash) for the *_input steps."""
    where = dict(
        (pk, (node_id, key))
        for pk, node_id, key in Sensor.objects.filter(pk__in=sensor_ids).values_list(
            "pk", "node_id", "key"
        )
    )
    if not where:
        return {}
    pipe = get_redis().pipeline(transaction=False)
    for node_id, key in where.values():
        pipe.hget(state.last_key(node_id), key)
    out = {}
    for pk, raw in zip(where, pipe.execute(), strict=True):
        if raw is not None:
            out[pk] = float(raw.split(b" ", 1)[1])
    return out


def _outside(spec: SensorSpec, value: float) -> bool:
    return (spec.min_valid is not None and value < spec.min_valid) or (
        spec.max_valid is not None and value > spec.max_valid
    )


# The node-state writes of a flush, every queued node in one EVALSHA (#29: five to seven
# pipelined commands a node cost the drain more CPU in redis-py than the writes cost Redis).
# KEYS: sensors:seen, sensors:silent, the capped-nodes hash, then per node its last-values
# hash (when it has last values) and its pulse counters' hashes, in ARGV's order.
# ARGV per node: id, now, "1" when its capped flag is read (else ""), n last values, n pulse
# counters; then n × (input key, "t value"); then n × (t, count, total, pending, saved).
# Returns {silent, capped}: the 1-based positions of the nodes that were flagged (SREM / HDEL
# removed something); nearly always two empty lists.
# redis.pcall, as the pipeline did: a key of the wrong type fails its own write, not every
# node after it in the pass (their "seen" unwritten, they would look silent); the first error
# is raised once everything else is written.
_WRITE_NODE_STATE = """
local CHUNK = 500  -- field/value pairs an HSET: unpack() of more than Lua's stack (~8,000) fails
local silent, capped = {}, {}
local first_err
local function call(...)
  local r = redis.pcall(...)
  if type(r) == 'table' and r.err then
    first_err = first_err or r.err
    return 0
  end
  return r
end
local a, k, node = 1, 4, 0
while a <= #ARGV do
  node = node + 1
  local id, read_capped = ARGV[a], ARGV[a + 2] == '1'
  local n_last, n_pulse = tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4])
  call('HSET', KEYS[1], id, ARGV[a + 1])
  a = a + 5
  if n_last > 0 then
    for i = 0, n_last - 1, CHUNK do
      local last = a + 2 * math.min(i + CHUNK, n_last) - 1
      call('HSET', KEYS[k], unpack(ARGV, a + 2 * i, last))
    end
    a = a + 2 * n_last
    k = k + 1
  end
  for _ = 1, n_pulse do
    call('HSET', KEYS[k], 't', ARGV[a], 'count', ARGV[a + 1], 'total', ARGV[a + 2],
      'pending', ARGV[a + 3], 'saved', ARGV[a + 4])
    a = a + 5
    k = k + 1
  end
  if read_capped and call('HDEL', KEYS[3], id) == 1 then capped[#capped + 1] = node end
  if call('SREM', KEYS[2], id) == 1 then silent[#silent + 1] = node end
end
if first_err then return redis.error_reply(first_err) end
return {silent, capped}
"""


class NodeStateWrites:
    """The node-state writes of one or many ingest_rows calls (when each node was heard, its
    inputs' last values, its pulse counters), sent in one script call by flush(). A drain's
    pass flushes once at its end; a node processed again in the same pass (another chunk), or
    a batch whose *_input steps read last values, flushes first, so nothing reads a state
    older than what this process already computed."""

    def __init__(self) -> None:
        self._empty()

    def _empty(self) -> None:
        self._keys: list[str] = [state.SEEN_KEY, state.SILENT_KEY, input_budget.CAPPED_NODES]
        self._args: list[str | int | float] = []
        self._nodes: list[int] = []  # in queue order: the script's flags are positions in it
        self._queued: set[int] = set()  # `in` for every node of a pass: O(1), not the list

    def __contains__(self, node_id: int) -> bool:
        return node_id in self._queued

    def __len__(self) -> int:
        return len(self._nodes)

    def queue(
        self,
        node_id: int,
        now: float,
        last: dict[str, tuple[int, float]],
        pulse_states: dict[int, cv.PulseState | None],
        pulse_specs: list[SensorSpec],
        skipped_inputs: bool = False,
        pulse_saved: dict[int, int] | None = None,
    ) -> None:
        pulse_saved = pulse_saved or {}
        to_save = {
            spec.id: ps
            for spec in pulse_specs
            if (ps := pulse_states.get(spec.id)) is not None
            and ps.t - pulse_saved.get(spec.id, 0) >= PULSE_SAVE_S
        }
        if to_save:  # before Redis says "saved", so a failed write is retried next batch
            _save_pulse_states(to_save)
        pulses = [
            (spec.id, ps) for spec in pulse_specs if (ps := pulse_states.get(spec.id)) is not None
        ]
        keys, args = self._keys, self._args
        # The capped flag is cleared (and read) only after a batch with no input beyond the bound.
        args += (str(node_id), int(now), "" if skipped_inputs else "1", len(last), len(pulses))
        if last:
            keys.append(state.last_key(node_id))
            for key, (t, v) in last.items():
                args += (key, f"{t} {v!r}")
        for sensor_id, ps in pulses:
            keys.append(state.pulse_key(sensor_id))
            args += (
                ps.t,
                ps.count,
                repr(ps.total),
                "" if ps.pending is None else ps.pending,
                ps.t if sensor_id in to_save else pulse_saved.get(sensor_id, 0),
            )
        self._nodes.append(node_id)
        self._queued.add(node_id)

    def flush(self) -> None:
        """Send every queued write (one round trip); then close the alarms of nodes that came
        back (heard again, or a batch with no input beyond the bound)."""
        if not self._nodes:
            return
        nodes, keys, args = self._nodes, self._keys, self._args
        self._empty()  # before the call: a failed flush is not sent again, as the pipeline's
        # Called directly: a registered script inside a pipeline costs a SCRIPT EXISTS first.
        silent, capped = redis_script(_WRITE_NODE_STATE)(keys=keys, args=args)
        was_silent, was_capped = set(silent), set(capped)
        for position in sorted(was_silent | was_capped):
            node_id = nodes[position - 1]
            if position in was_silent:
                # The node is back: close its silent alarm now rather than at the next check.
                clear_alarm(f"node-silent:{node_id}")
            if position in was_capped:
                # A batch with no input beyond the bound: the condition may have ended.
                input_budget.node_back_in_bounds(node_id)


def range_message(sensor_id: int, spec: SensorSpec, value: float) -> str:
    """ "Seminar room temperature read 11.6 °C, outside its valid range up to 10.0 °C": the
    room (the node's location) and the sensor by their names, the value in its unit, the
    bound it crossed (#28: "Sensor temperature on node 6 read 11.55, outside −∞…10.0" named
    neither). One query, only when an alarm is raised."""
    sensor = Sensor.objects.select_related("node").filter(pk=sensor_id).first()
    unit = f" {sensor.unit}" if sensor is not None and sensor.unit else ""
    if sensor is None:
        what = f"Sensor {spec.key}"
    else:
        name = sensor.name or sensor.key
        where = sensor.node.location or f"node {sensor.node.name}"
        if not sensor.node.location:
            what = f"{name} on {where}"
        elif name.lower().startswith(where.lower()):
            what = name  # "Seminar room temperature" already says where
        else:
            what = f"{where} {name}"
        what = what[:1].upper() + what[1:]

    def shown(x: float) -> str:
        # One decimal as a thermometer shows it; small quantities keep their figures.
        return (f"{x:.1f}" if x == 0 or abs(x) >= 0.1 else f"{x:.3g}") + unit

    low, high = spec.min_valid, spec.max_valid
    if low is not None and high is not None:
        limits = f"{shown(low)} to {shown(high)}"
    elif high is not None:
        limits = f"up to {shown(high)}"
    else:
        limits = f"from {shown(low)}"  # type: ignore[arg-type]
    return (
        f"{what} read {shown(value)}, outside its valid range {limits}. The probe, its wiring "
        "or its calibration may be at fault; or the range is wrong for this sensor."
    )


def _range_alarms(
    node_id: int,
    checked: dict[int, tuple[SensorSpec, float]],
    outside: dict[int, tuple[SensorSpec, float]],
) -> None:
    redis = get_redis()
    open_ids = {int(x) for x in redis.smembers(state.RANGE_ALARMS_KEY)}
    for sensor_id, (spec, value) in outside.items():
        if sensor_id in open_ids:
            continue
        raise_alarm(
            f"sensor-range:{sensor_id}", range_message(sensor_id, spec, value), source="sensor"
        )
        redis.sadd(state.RANGE_ALARMS_KEY, sensor_id)
    for sensor_id, (spec, value) in checked.items():
        if sensor_id in open_ids and sensor_id not in outside and not _outside(spec, value):
            clear_alarm(f"sensor-range:{sensor_id}")
            redis.srem(state.RANGE_ALARMS_KEY, sensor_id)
