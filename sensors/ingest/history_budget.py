"""What a site's history costs on disk, and the per-site budget that bounds it (issue #26).

A PHPFina file holds a slot for every interval from its first point to now, so a reading costs
nothing on disk when it lands where the file already reaches, and a reading from the past costs
every slot between it and the file's start: a point in 1990 pads 36 years of NaN per feed. An
age bound (refuse history older than 7 days) stopped that, but refused real history too and
only at commit, after the sender had been answered `ok` and the processes had run on it.

So history is accepted as emoncms accepts it (any age PHPFina can hold) and charged, before the
answer, against its site's budget in bytes:

- A node's *reach* is the earliest reading time already charged for it (Redis hash REACH_KEY,
  node id -> unix seconds). A reading at or after it costs nothing: live readings never do.
- A reading before it moves it back, costing (reach - t) x the node's bytes per second: 4 bytes
  per slot of every feed its inputs write (log_to_feed and any step naming a feed, each at its
  own interval; an input not created yet at the node's interval). That is what its files grow
  by, counted as if they started at the reach (imported data already on disk is counted again,
  so the figure errs on the safe side).
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

from core.redis import get_redis
from feeds.models import Feed
from feeds.store import phpfina
from sensors.cache import ProcessCache
from sensors.ingest import input_errors
from sensors.ingest.emoncms_input import Skipped
from sensors.models import Node, Sensor, Site

USED_KEY = "sensors:history:used"  # site id ('none': nodes without a site) -> bytes charged
REACH_KEY = "sensors:history:reach"  # node id -> earliest unix second charged
MIB = 1 << 20
SLOT_BYTES = 4  # one float32 per slot (feeds/store/phpfina.py)

# The check and the charge at once. KEYS: used, reach. ARGV: site, budget bytes, now, then
# (node, earliest t, bytes per second) per node. Returns {1 | 0, cost, used after | before}.
CHARGE_LUA = """
local used = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
local now = tonumber(ARGV[3])
local cost = 0
local moved = {}
for i = 4, #ARGV, 3 do
  local node, t, rate = ARGV[i], tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])
  local reach = tonumber(redis.call('HGET', KEYS[2], node) or ARGV[3])
  if t < reach then
    cost = cost + math.ceil((reach - t) * rate)
    table.insert(moved, node)
    table.insert(moved, ARGV[i + 1])
  end
end
if cost == 0 then return {1, 0, used} end
if used + cost > tonumber(ARGV[2]) then return {0, cost, used} end
redis.call('HSET', KEYS[2], unpack(moved))
return {1, cost, redis.call('HINCRBY', KEYS[1], ARGV[1], cost)}
"""

_rates = ProcessCache()  # node id -> (bytes/s of its inputs' feeds, their keys, node interval)


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


def node_rate(node_id: int, keys: Iterable[str]) -> float:
    """Bytes per second the node's files grow by for each second of its history: every feed
    its inputs write, plus an input's feed at the node's interval for each key not seen yet."""
    cached = _rates.get(node_id)
    if cached is None:
        sensors = list(
            Sensor.objects.filter(node_id=node_id).values_list("key", "feed_id", "processes")
        )
        feed_ids: set[int] = set()
        for _key, feed_id, steps in sensors:
            if not steps and feed_id:
                feed_ids.add(int(feed_id))
            for step in steps if isinstance(steps, list) else []:
                if isinstance(step, dict) and isinstance(step.get("feed"), int):
                    feed_ids.add(step["feed"])
        intervals = [
            max(1, i)
            for i in Feed.objects.filter(pk__in=feed_ids).values_list("interval", flat=True)
        ]
        rate = sum(SLOT_BYTES / i for i in intervals)
        interval = Node.objects.filter(pk=node_id).values_list("interval", flat=True).first()
        interval = max(1, int(interval or 10))
        # How far back every file of the node can still reach (the finest interval rules).
        reach_s = min(phpfina.max_prepend_slots(i) * i for i in [*intervals, interval])
        cached = (rate, frozenset(k for k, _f, _s in sensors), interval, reach_s)
        _rates.set(node_id, cached)
    rate, known, interval, _reach_s = cached
    return rate + SLOT_BYTES / interval * len(set(keys) - known)


def holdable_s(node_id: int) -> int:
    """How far before now the node's feed files can hold a reading: a PHPFina file pads at most
    MAX_PADDING_SLOTS (emoncms's bound) before its start or up to now, so the commit would
    refuse an older one after `ok`; it is refused before instead (node_rate fills the cache)."""
    cached = _rates.get(node_id)
    if cached is None:
        node_rate(node_id, ())
        cached = _rates.get(node_id)
    return cached[3]


def reaches_back(earliest: dict[int, tuple[float, Iterable[str]]], now: float) -> bool:
    """Whether any node of a request reaches further back than it has been charged for. The
    usual request does not: one Redis round trip, no query (so live readings pass through a
    database outage). A node never charged reaches back to now (its files start with its first
    reading)."""
    nodes = list(earliest)
    if not nodes:
        return False
    reaches = get_redis().hmget(REACH_KEY, [str(n) for n in nodes])
    reach = [now if r is None else float(r) for r in reaches]
    return not all(earliest[n][0] >= r for n, r in zip(nodes, reach, strict=True))


def charge(
    site_id: int | None, earliest: dict[int, tuple[float, Iterable[str]]], now: float
) -> Refusal | None:
    """Charge the history of one request (node id -> (earliest reading time, its keys)) to its
    site: None when it fits (charged; free when it reaches no further back than before), else
    what would not fit (nothing charged)."""
    if not reaches_back(earliest, now):
        return None
    client = get_redis()
    nodes = list(earliest)
    args: list = []
    for node_id in nodes:
        t, keys = earliest[node_id]
        rate = node_rate(node_id, keys)
        if t < now - holdable_s(node_id):
            return Refusal(site_id, 0, 0, 0, too_old_s=holdable_s(node_id))
        args += [node_id, math.floor(t), repr(rate)]
    budget = budget_bytes(site_id)
    ok, cost, used = client.eval(
        CHARGE_LUA, 2, USED_KEY, REACH_KEY, site_key(site_id), budget, math.floor(now), *args
    )
    if ok:
        return None
    return Refusal(site_id, int(cost), int(used), budget)


_node_sites = ProcessCache()  # node id -> (site id, name)


def _node_site(node_id: int) -> tuple[int | None, str]:
    found = _node_sites.get(node_id)
    if found is None:
        row = Node.objects.filter(pk=node_id).values_list("site_id", "name").first()
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
    # Keep the newest rows the budget's rest can pay for (cost is linear in how far back they
    # reach), so the live readings of a batch with refused history in it still go through.
    reach = float(get_redis().hget(REACH_KEY, str(node_id)) or now)
    rate = node_rate(node_id, keys)
    if refusal.too_old_s:  # older than the files can hold: the rest may still fit the budget
        cutoff = now - refusal.too_old_s
    else:
        left = max(0, refusal.budget - refusal.used)
        cutoff = reach - left / rate + 1 if rate > 0 else reach
    newest = [row[0] for row in rows if row[0] >= cutoff]
    if newest and charge(site_id, {node_id: (min(newest), keys)}, now):
        cutoff = max(cutoff, reach)  # another batch took the rest meanwhile
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
