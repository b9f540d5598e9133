"""What a site's history costs on disk, and the per-site budget that bounds it (issue #26).

A PHPFina file holds a slot for every interval from its first point to now, so a reading costs
nothing on disk when it lands where the file already reaches, and a reading from the past costs
every slot between it and the file's start: a point in 1990 pads 36 years of NaN per feed. An
age bound (refuse history older than 7 days) stopped that, but refused real history too and
only at commit, after the sender had been answered `ok` and the processes had run on it.

So history is accepted as emoncms accepts it (any age PHPFina can hold) and charged, before the
answer, against its site's budget in bytes:

- Each file's *reach* is the earliest reading time already charged for it (Redis hash
  REACH_KEY: "f<feed id>" for a feed an input writes, "k<node id>:<key>" for an input not
  created yet). A reading at or after it costs nothing: live readings never do.
- A reading before it moves it back, costing (reach - t) x 4 bytes per slot at the file's
  interval (a feed: its own; an input not created yet: the node's). That is what the file grows
  by: each file pads from its earliest point to now, so a node's *new* input at an old time is
  charged for its whole span although another input of the node was charged there before (a
  per-node reach let forty new inputs ride on one input's charge). A feed two inputs write is
  charged once; imported data already on disk is counted again (the figure errs on the safe
  side); a feed added to an input later is charged from now, as any new file is.
- The site's use (Redis hash USED_KEY, site id -> bytes) may not pass its budget:
  Site.history_budget_mb, else BMS_SITE_HISTORY_BUDGET_MB. The check and the charge are one Lua
  script, so two requests can never both take the last of it.

Where the budget refuses: our REST API and the emoncms endpoints answer 413 naming `time` and
the budget before anything is queued (sensors/ingest/views.py); what reaches the worker another
way (MQTT) is refused there before the processes run, counted on the node's input errors and
alarmed (sensors/ingest/drain.py). Either way nothing refused is stored and no process state
moves over it. Engineers see use and budget, and raise the budget, in the admin (Site), on the
REST API (`GET /api/v1/sites/<id>/history-budget`, raised by PATCH on the site's
`history_budget_mb`), docs/INGEST.md "History".
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from django.conf import settings
from django.db import DatabaseError

from core.redis import get_redis
from feeds.models import Feed
from feeds.store import phpfina
from sensors.cache import ProcessCache, ProcessTable
from sensors.ingest import input_errors
from sensors.ingest.emoncms_input import Skipped
from sensors.models import Node, Sensor, Site

USED_KEY = "sensors:history:used"  # site id ('none': nodes without a site) -> bytes charged
# Where each file's history has been charged back to: "f<feed id>" (a feed an input writes) or
# "k<node id>:<key>" (an input not created yet, whose feed will be) -> earliest unix second.
# Per feed, not per node: a node's new input at an old time pads a new file from there to now,
# so a per-node reach let a key charge one input and then add forty more at that time for
# nothing (#26 item 4 follow-up). (The per-node hash before it, sensors:history:reach, is unread.)
# A file never charged gets its first live reading's second there, free (`_mark_first`).
REACH_KEY = "sensors:history:reaches"
MIB = 1 << 20
SLOT_BYTES = 4  # one float32 per slot (feeds/store/phpfina.py)

# The check and the charge at once. KEYS: used, reaches. ARGV: site, budget bytes, now, then
# (field, fallback field or '', earliest t, bytes per second) per file the request writes.
# A field never charged falls back (an auto-created input's feed: to what its key was charged
# while it had no feed), else to now. Returns {1 | 0, cost, used after | before}.
CHARGE_LUA = """
local UNPACK_SLICE = 1000
local used = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
local cost = 0
local moved = {}
for i = 4, #ARGV, 4 do
  local field, fallback = ARGV[i], ARGV[i + 1]
  local t, rate = tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3])
  local reach = redis.call('HGET', KEYS[2], field)
  if not reach and fallback ~= '' then reach = redis.call('HGET', KEYS[2], fallback) end
  reach = tonumber(reach or ARGV[3])
  if t < reach then
    cost = cost + math.ceil((reach - t) * rate)
    table.insert(moved, field)
    table.insert(moved, ARGV[i + 2])
  end
end
if cost == 0 then return {1, 0, used} end
if used + cost > tonumber(ARGV[2]) then return {0, cost, used} end
-- In slices: unpack() of more than Lua's stack (about 8,000) fails, and one post may write
-- 50,000 files (BMS_INGEST_MAX_VALUES). UNPACK_SLICE is even, so a field keeps its value.
for i = 1, #moved, UNPACK_SLICE do
  redis.call('HSET', KEYS[2], unpack(moved, i, math.min(i + UNPACK_SLICE - 1, #moved)))
end
return {1, cost, redis.call('HINCRBY', KEYS[1], ARGV[1], cost)}
"""


@dataclass(frozen=True)
class _NodeFiles:
    """What a node's inputs write, in this process's table of every node's (`_files_table`)."""

    feeds: dict[str, tuple[tuple[int, int], ...]]  # input key -> (feed id, interval) per feed
    own_feed: dict[str, int]  # input key -> its own feed (Sensor.feed: what auto-creation made)
    interval: int  # the node's: a new input's feed is created at it
    reach_s: int  # how far before now every file of the node can still reach


@dataclass(frozen=True)
class File:
    """One file a request writes: its reach field, the fallback, and its bytes per second."""

    field: str
    fallback: str
    rate: float


_request_cache = ProcessCache(
    keep_stale=True
)  # (node id, frozenset of keys) -> [File]: what files_of found


@dataclass(frozen=True)
class Refusal:
    """History a site's budget cannot take: nothing of it was charged."""

    site_id: int | None
    cost: int
    used: int
    budget: int
    too_old_s: int = 0  # set: older than the node's feed files can hold, whatever the budget

    def text(self) -> str:
        if self.too_old_s:
            return (
                f"a reading is more than {self.too_old_s // 86_400} days old: further back than "
                "this node's feed files can hold (PHPFina pads at most 15,768,000 slots, "
                "emoncms's bound, at each feed's interval)"
            )
        return (
            f"history budget of the site spent: these readings would add {_mb(self.cost)} of feed "
            f"data, {_mb(max(0, self.budget - self.used))} of {_mb(self.budget)} is left. "
            "An engineer raises the site's history budget (admin: Site, or PATCH "
            "/api/v1/sites/<id> history_budget_mb), then send it again"
        )


def _mb(n: int) -> str:
    return f"{n / MIB:.1f} MB"


def site_key(site_id: int | None) -> str:
    return str(site_id) if site_id is not None else "none"


def budget_bytes(site_id: int | None) -> int:
    """The site's budget: its own, else the default. Read only when history costs something."""
    own = None
    if site_id is not None:
        own = Site.objects.filter(pk=site_id).values_list("history_budget_mb", flat=True).first()
    return (settings.BMS_SITE_HISTORY_BUDGET_MB if own is None else own) * MIB


def used_bytes(site_id: int | None) -> int:
    return int(get_redis().hget(USED_KEY, site_key(site_id)) or 0)


SensorRow = tuple[str, int | None, object]  # key, feed id, processes


def _feeds_written(feed_id: int | None, steps: object) -> set[int]:
    """The feeds one input writes: its process list's, else (none) its own feed."""
    ids = set()
    if not steps and feed_id:
        ids.add(int(feed_id))
    for step in steps if isinstance(steps, list) else []:
        if isinstance(step, dict) and isinstance(step.get("feed"), int):
            ids.add(step["feed"])
    return ids


def _files_from(
    sensors: list[SensorRow], intervals: dict[int, int], node_interval: int | None
) -> _NodeFiles:
    """A node's _NodeFiles from its inputs' rows, the feeds' intervals and its own interval
    (None: a node not found, which is given the default 10 s)."""
    feed_ids = {key: _feeds_written(feed_id, steps) for key, feed_id, steps in sensors}
    interval = max(1, int(node_interval or 10))
    own = {pk for ids in feed_ids.values() for pk in ids if pk in intervals}
    # How far back every file of the node can still reach (the finest interval rules).
    reach_s = min(
        phpfina.max_prepend_slots(i) * i for i in [*(intervals[pk] for pk in own), interval]
    )
    return _NodeFiles(
        feeds={
            key: tuple(sorted((pk, intervals[pk]) for pk in ids if pk in intervals))
            for key, ids in feed_ids.items()
        },
        own_feed={key: int(feed_id) for key, feed_id, _s in sensors if feed_id},
        interval=interval,
        reach_s=reach_s,
    )


def _read_files(node_ids: list[int] | None = None) -> dict[int, _NodeFiles]:
    """Every node's files (three queries whatever the number of nodes), or only `node_ids`'."""
    sensors, feeds, nodes = Sensor.objects.order_by(), Feed.objects.order_by(), Node.objects
    if node_ids is not None:
        sensors, nodes = sensors.filter(node_id__in=node_ids), nodes.filter(pk__in=node_ids)
    by_node: dict[int, list[SensorRow]] = {}
    for node_id, *row in sensors.values_list("node_id", "key", "feed_id", "processes"):
        by_node.setdefault(node_id, []).append(tuple(row))
    if node_ids is not None:
        wanted = {
            pk for rows in by_node.values() for _k, f, p in rows for pk in _feeds_written(f, p)
        }
        feeds = feeds.filter(pk__in=wanted)
    intervals = {pk: max(1, int(i or 1)) for pk, i in feeds.values_list("pk", "interval")}
    return {
        pk: _files_from(by_node.get(pk, []), intervals, interval)
        for pk, interval in nodes.order_by().values_list("pk", "interval")
    }


# Every node's files, one table per process (sensors/cache.py's ProcessTable, as the keys'
# table: node_auth.py). A saved Node or Sensor drops it within a second (the config generation);
# a feed's changed interval, which bumps nothing, within its 60 s TTL, as each node's own entry
# did before. Before, each node's entry ran out after 60 s and was read again (three queries)
# by each web worker: at 10,000 nodes a third to a half of the posts paid that (issue #29).
_files_table = ProcessTable(_read_files)
# A node the table does not know yet (made by another process since the table was read, before
# this one saw the config generation move): read alone, kept until the generation moves.
_new_files = ProcessCache()


def _node_files(node_id: int) -> _NodeFiles:
    found = _files_table.get().get(node_id)
    if found is None:
        found = _new_files.get(node_id)
    if found is None:
        found = _read_files([node_id]).get(node_id) or _files_from([], {}, None)
        _new_files.set(node_id, found)
    return found


def files_of(node_id: int, keys: Iterable[str]) -> list[File]:
    """The files the node's inputs `keys` write: each feed of a known input at its own
    interval, a new input's (not created yet) at the node's interval."""
    wanted = frozenset(keys)
    cached = _request_cache.get((node_id, wanted))
    if cached is not None:  # a node posts the same keys every time: no work per request
        return cached
    try:
        config = _node_files(node_id)
    except DatabaseError:
        # The database is away: what this process last knew of these files, past its TTL,
        # so live readings still reach control (docs/CONTROL.md, database outage).
        known = _request_cache.stale((node_id, wanted))
        if known is None:
            raise
        return known
    out: list[File] = []
    for key in sorted(wanted):
        pending = f"k{node_id}:{key}"
        if key not in config.feeds:
            out.append(File(pending, "", SLOT_BYTES / config.interval))
            continue
        for feed_id, interval in config.feeds[key]:
            # The input's own feed is the one auto-creation made for the key: charged as the
            # key while it had none, so what was paid then is not paid again.
            fallback = pending if config.own_feed.get(key) == feed_id else ""
            out.append(File(f"f{feed_id}", fallback, SLOT_BYTES / interval))
    _request_cache.set((node_id, wanted), out)
    return out


def node_rate(node_id: int, keys: Iterable[str]) -> float:
    """Bytes per second the files of the node's inputs `keys` grow by per second of history."""
    return sum(f.rate for f in files_of(node_id, keys))


def holdable_s(node_id: int) -> int:
    """How far before now the node's feed files can hold a reading: a PHPFina file pads at most
    MAX_PADDING_SLOTS (emoncms's bound) before its start or up to now, so the commit would
    refuse an older one after `ok`; it is refused before instead."""
    return _node_files(node_id).reach_s


def _request_files(
    earliest: dict[int, tuple[float, Iterable[str]]],
) -> dict[str, tuple[File, int]]:
    """field -> (file, earliest t): a feed two inputs (or nodes) write is charged once."""
    out: dict[str, tuple[File, int]] = {}
    for node_id, (t, keys) in earliest.items():
        for f in files_of(node_id, keys):
            seen = out.get(f.field)
            if seen is None or math.floor(t) < seen[1]:
                out[f.field] = (f, math.floor(t))
    return out


# The reaches this process has read, (field, fallback) -> unix seconds. A reach only moves back
# (CHARGE_LUA writes a file's field only with an earlier time, and nothing else writes or
# deletes REACH_KEY), so a reach read before is at or after the reach now: a reading at or
# after it cannot reach back, and the usual request is answered without the round trip it
# cost each post (issue #29). A file never charged reaches back to `now`, which moves: not kept.
# Two caches: a feed's file (field "f<id>") exists only as the site's configuration made it, so
# its cache holds one entry a feed the site has and is sized for a large site; at the general
# 10,000-entry bound a site of 10,000 nodes x 5 feeds evicted every entry before its next post
# and every post asked Redis again (bench/ingest.py, 1,000 posts a second). Its entries live an
# hour: a reach known that long ago is still an upper bound (reaches only move back), the TTL
# only bounds how long this process misses a Redis that lost REACH_KEY. A key without a feed
# yet ("k<node>:<key>") is whatever an authenticated sender names, so it keeps the general bound.
KNOWN_FEED_REACHES_MAX = 500_000
_known_feed_reaches = ProcessCache(ttl_s=3600.0, max_entries=KNOWN_FEED_REACHES_MAX)
_known_key_reaches = ProcessCache()


def _known_reaches(f: File) -> ProcessCache:
    return _known_feed_reaches if f.field.startswith("f") else _known_key_reaches


def _reaches(files: list[File], now: float) -> list[float | None]:
    """Each file's reach as the Lua script reads it (one round trip); None: never charged."""
    backs = [f.fallback for f in files if f.fallback]
    fields = [f.field for f in files] + backs
    raw = get_redis().hmget(REACH_KEY, fields) if fields else []
    fallen = dict(zip(backs, raw[len(files) :], strict=True))
    out: list[float | None] = []
    for f, own in zip(files, raw[: len(files)], strict=True):
        stored = own if own is not None else fallen.get(f.fallback)
        if stored is not None:
            _known_reaches(f).set((f.field, f.fallback), float(stored))
        out.append(None if stored is None else float(stored))
    return out


def _mark_first(files: list[tuple[File, int]], now: float) -> None:
    """Files never charged whose reading is live (at or after now, in whole seconds, where the
    script puts an uncharged file's reach): write now as their reach, free (nothing charged,
    no budget read), so their next readings are answered from `_known_reaches` without asking
    Redis (issue #29: a post without a time, in the current second, found no reach and asked
    again with every post). An older reading is left to the charge script, which writes it.
    HSETNX: a reach another request charged meanwhile is kept, and this process then reads it
    with the next post rather than taking its own for known."""
    second = math.floor(now)
    first = [f for f, t in files if t >= second]
    if not first:
        return
    pipe = get_redis().pipeline(transaction=False)
    for f in first:
        pipe.hsetnx(REACH_KEY, f.field, second)
    for f, written in zip(first, pipe.execute(), strict=True):
        if written:
            _known_reaches(f).set((f.field, f.fallback), float(second))


def _or_now(reaches: list[float | None], now: float) -> list[float]:
    """A file never charged reaches back to now, in whole seconds as the script counts it."""
    return [math.floor(now) if r is None else r for r in reaches]


def _free_as_known(request: dict[str, tuple[File, int]]) -> bool:
    """Whether every file of the request is read at or after a reach this process knows."""
    for f, t in request.values():
        known = _known_reaches(f).get((f.field, f.fallback))
        if known is None or t < known:
            return False
    return True


def _cost(files: list[File], reaches: list[float], t: int) -> int:
    return sum(math.ceil((r - t) * f.rate) for f, r in zip(files, reaches, strict=True) if t < r)


def reaches_back(earliest: dict[int, tuple[float, Iterable[str]]], now: float) -> bool:
    """Whether any file of a request reaches further back than it has been charged for. The
    usual request does not: no round trip once this process has read its files' reaches
    (`_known_reaches`), and no query once it knows the node's files (so live readings pass
    through a database outage). A file never charged reaches back to now (it starts with its
    first reading), and a live reading writes that reach (`_mark_first`)."""
    request = _request_files(earliest)
    if _free_as_known(request):
        return False
    reaches = _reaches([f for f, _t in request.values()], now)
    _mark_first(
        [(f, t) for (f, t), r in zip(request.values(), reaches, strict=True) if r is None], now
    )
    reaches = _or_now(reaches, now)
    return not all(t >= r for (_f, t), r in zip(request.values(), reaches, strict=True))


def charge(
    site_id: int | None, earliest: dict[int, tuple[float, Iterable[str]]], now: float
) -> Refusal | None:
    """Charge the history of one request (node id -> (earliest reading time, its keys)) to its
    site, file by file: None when it fits (charged; free when no file reaches back further
    than before), else what would not fit (nothing charged)."""
    if not reaches_back(earliest, now):
        return None
    request = _request_files(earliest)
    # Only a reading that moves a file back can be further back than a file can pad to (one
    # inside a file already reaching there overwrites its slot).
    for node_id, (t, _keys) in earliest.items():
        if t < now - holdable_s(node_id):
            return Refusal(site_id, 0, 0, 0, too_old_s=holdable_s(node_id))
    args: list = []
    for f, t in request.values():
        args += [f.field, f.fallback, t, repr(f.rate)]
    budget = budget_bytes(site_id)
    ok, cost, used = get_redis().eval(
        CHARGE_LUA, 2, USED_KEY, REACH_KEY, site_key(site_id), budget, math.floor(now), *args
    )
    if ok:
        return None
    return Refusal(site_id, int(cost), int(used), budget)


_node_sites = ProcessCache(keep_stale=True)  # node id -> (site id, name)


def _node_site(node_id: int) -> tuple[int | None, str]:
    found = _node_sites.get(node_id)
    if found is None:
        try:
            row = Node.objects.filter(pk=node_id).values_list("site_id", "name").first()
        except DatabaseError:
            known = _node_sites.stale(node_id)
            if known is None:
                raise
            return known
        found = row if row is not None else (None, str(node_id))
        _node_sites.set(node_id, found)
    return found


def admit(node_id: int, rows: list[list], now: float) -> list[list]:
    """The worker's check, for rows that reached a stream without the web's (MQTT): the rows of
    a batch its site's budget can take ([t, {key: value}] each). The others are left out before
    any process runs on them, counted on the node's input errors and alarmed."""
    if not rows:
        return rows
    keys = {key for row in rows for key in row[1]}
    if not reaches_back({node_id: (min(row[0] for row in rows), keys)}, now):
        return rows  # live readings: no query, so they pass through a database outage
    site_id, name = _node_site(node_id)
    refusal = charge(site_id, {node_id: (min(row[0] for row in rows), keys)}, now)
    if refusal is None:
        return rows
    # Keep the newest rows the budget's rest can pay for (the cost only falls as the earliest
    # row gets newer), so the live readings of a batch with refused history still go through.
    files = files_of(node_id, keys)
    reaches = _or_now(_reaches(files, now), now)
    free = math.floor(max(reaches, default=now))  # from here on nothing costs anything
    floor = now - refusal.too_old_s if refusal.too_old_s else -math.inf
    left = max(0, budget_bytes(site_id) - used_bytes(site_id))
    fitting = sorted(
        t for t in {int(row[0]) for row in rows} if t >= floor and _cost(files, reaches, t) <= left
    )
    cutoff = fitting[0] if fitting else free
    if fitting and charge(site_id, {node_id: (cutoff, keys)}, now):
        cutoff = max(cutoff, free)  # another batch took the rest meanwhile
    kept = [row for row in rows if row[0] >= cutoff]
    refused = [row for row in rows if row[0] < cutoff]
    if not refused:
        return kept
    first, last = int(min(r[0] for r in refused)), int(max(r[0] for r in refused))
    skipped = [Skipped(None, f"{len(refused)} reading(s) at {first}..{last}", refusal.text())]
    input_errors.record(
        input_errors.node_subject(node_id),
        f"Node '{name}'",
        skipped,
        now=now,
        count=sum(len(row[1]) for row in refused),
    )
    return kept


def usage(site: Site) -> dict:
    """What engineers see: the budget, its use and what is left, in bytes and MB."""
    budget = budget_bytes(site.pk)
    used = used_bytes(site.pk)
    return {
        "site": site.slug,
        "budget_mb": budget // MIB,
        "own_budget_mb": site.history_budget_mb,
        "default_budget_mb": settings.BMS_SITE_HISTORY_BUDGET_MB,
        "used_bytes": used,
        "used_mb": round(used / MIB, 1),
        "left_bytes": max(0, budget - used),
    }
