"""How many inputs ingest may still create on its own for a node.

An unseen key of a known node gets a Sensor and a Feed (sensors/ingest/processing.py), so that nothing
is dropped before an engineer configures it. Unbounded, that let one node key fill the disk: a
single request with 5,000 made-up keys made 5,000 feeds. So auto-created inputs are bounded per
node (BMS_INGEST_MAX_AUTO_INPUTS_PER_NODE) and per site (BMS_INGEST_MAX_AUTO_INPUTS_PER_SITE;
nodes without a site count as one site). Inputs an engineer creates by hand do not count.

Beyond the bound a new key's readings are skipped, never its known inputs' readings, and the
alarm `inputs-capped:<site id>` tells staff (the overview and /staff/ list open alarms): one
per site, counting the skipped readings; it clears when every node that had readings skipped
has sent a batch with none (processing._store_node_state). The worker enforces the bound
(every path, MQTT too, goes through it); the REST endpoint checks it up front too, so a client
of our own API gets a 409 naming the key instead of a silent skip. emonhub is answered `ok`
(it resends forever otherwise) and only the alarm records the skip.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import DatabaseError
from redis.lock import Lock

from alarms.lifecycle import clear_alarm, count_alarm
from core.redis import get_redis
from sensors.cache import ProcessCache
from sensors.models import Node, Sensor

log = logging.getLogger(__name__)

# Redis hash: node id -> its site id ('' for none), for nodes whose last batch had readings
# skipped; the site's alarm clears when none of its nodes is left in it.
CAPPED_NODES = "sensors:inputs-capped:nodes"
SHOWN_KEYS = 5  # keys named in a message

_known_keys = ProcessCache(keep_stale=True)


def per_node() -> int:
    return settings.BMS_INGEST_MAX_AUTO_INPUTS_PER_NODE


def per_site() -> int:
    return settings.BMS_INGEST_MAX_AUTO_INPUTS_PER_SITE


def known_keys(node_id: int) -> frozenset[str]:
    """The node's input keys, cached per process (dropped when any Sensor is saved)."""
    keys = _known_keys.get(node_id)
    if keys is None:
        try:
            keys = frozenset(Sensor.objects.filter(node_id=node_id).values_list("key", flat=True))
        except DatabaseError:
            # Database away (issue 27 item 8): the keys as last read, else the 503 as before.
            keys = _known_keys.stale(node_id)
            if keys is None:
                raise
            return keys
        _known_keys.set(node_id, keys)
    return keys


def room(node_id: int, site_id: int | None) -> int:
    """How many more inputs may be created automatically for this node (two COUNT queries)."""
    auto = Sensor.objects.filter(auto_created=True)
    on_node = auto.filter(node_id=node_id).count()
    if site_id is None:
        on_site = auto.filter(node__site__isnull=True).count()
    else:
        on_site = auto.filter(node__site_id=site_id).count()
    return max(0, min(per_node() - on_node, per_site() - on_site))


def site_room(site_id: int | None) -> int:
    """How many more inputs may be created automatically on a site (one COUNT query)."""
    auto = Sensor.objects.filter(auto_created=True)
    if site_id is None:
        return max(0, per_site() - auto.filter(node__site__isnull=True).count())
    return max(0, per_site() - auto.filter(node__site_id=site_id).count())


# Everything that creates inputs or nodes of a site on its own (the worker's new inputs, the
# web's new nodes) counts and creates under this one lock, so two workers, two web processes or
# one of each can never both see the last unit of room: a bound holds at the moment of the
# promise, across processes (the red team got 1,001 inputs of a bound of 1,000, and 4,052 nodes,
# when the room was counted per node and per request).
SITE_LOCK_S = 30


def site_lock(site_id: int | None, blocking_timeout: float = SITE_LOCK_S) -> Lock:
    """The Redis lock of a site's automatic creations (nodes without a site share one)."""
    return get_redis().lock(
        f"sensors:autocreate:site:{site_id if site_id is not None else 'none'}",
        timeout=SITE_LOCK_S,
        blocking_timeout=blocking_timeout,
    )


def limits_text() -> str:
    return f"{per_node()} per node, {per_site()} per site"


def shown(keys: list[str]) -> str:
    names = ", ".join(repr(k) for k in keys[:SHOWN_KEYS])
    return names + (f" and {len(keys) - SHOWN_KEYS} more" if len(keys) > SHOWN_KEYS else "")


def over_budget(node_id: int, keys: set[str]) -> list[str]:
    """The keys of a request that could not become inputs now (sorted; empty when all fit).

    The keys that fit are the first in sorted order, as the worker creates them."""
    unseen = sorted(keys - known_keys(node_id))
    if not unseen:
        return []
    site_id = Node.objects.filter(pk=node_id).values_list("site_id", flat=True).first()
    return unseen[room(node_id, site_id) :]


def site_alarm_key(site_id: int | None) -> str:
    return f"inputs-capped:{site_id if site_id is not None else 'none'}"


def record_skipped(node: Node, keys: list[str], points: int) -> None:
    """Readings of keys beyond the bound were skipped: log it and count them on the site's one
    alarm (a flood of nodes each beyond the bound used to open an alarm per node: 3,051)."""
    log.warning(
        "node %s: %d reading(s) of %d new input(s) skipped, auto-created input limit reached "
        "(%s): %s",
        node.name, points, len(keys), limits_text(), shown(keys),
    )  # fmt: skip
    site = f"site '{node.site}'" if node.site_id is not None else "nodes without a site"
    count_alarm(
        site_alarm_key(node.site_id),
        f"Readings of new inputs are skipped on {site}: the limit of automatically created "
        f"inputs ({limits_text()}) is reached. Latest: node '{node.name}', {shown(keys)}. "
        "Configure or delete inputs in the admin, or raise BMS_INGEST_MAX_AUTO_INPUTS_PER_NODE "
        "/ _PER_SITE.",
        add=points,
        source="node",
    )
    get_redis().hset(CAPPED_NODES, node.pk, "" if node.site_id is None else node.site_id)


def node_back_in_bounds(node_id: int) -> None:
    """A node that had readings skipped sent a batch with none: clear its site's alarm once no
    node of the site is still beyond the bound."""
    site_id = Node.objects.filter(pk=node_id).values_list("site_id", flat=True).first()
    tag = b"" if site_id is None else str(site_id).encode()
    if tag not in get_redis().hvals(CAPPED_NODES):
        clear_alarm(site_alarm_key(site_id))
