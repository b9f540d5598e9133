"""How many inputs ingest may still create on its own for a node.

An unseen key of a known node gets a Sensor and a Feed (sensors/ingest/processing.py), so that nothing
is dropped before an engineer configures it. Unbounded, that let one node key fill the disk: a
single request with 5,000 made-up keys made 5,000 feeds. So auto-created inputs are bounded per
node (BMS_INGEST_MAX_AUTO_INPUTS_PER_NODE) and per site (BMS_INGEST_MAX_AUTO_INPUTS_PER_SITE;
nodes without a site count as one site). Inputs an engineer creates by hand do not count.

Beyond the bound a new key's readings are skipped, never its known inputs' readings, and the
alarm `node-inputs-capped:<node id>` tells staff (the overview and /staff/ list open alarms);
it clears when a batch of the node arrives with no skipped key (processing._store_node_state). The worker enforces the bound
(every path, MQTT too, goes through it); the REST endpoint checks it up front too, so a client
of our own API gets a 409 naming the key instead of a silent skip. emonhub is answered `ok`
(it resends forever otherwise) and only the alarm records the skip.
"""

from __future__ import annotations

import logging

from django.conf import settings

from alarms.lifecycle import raise_alarm
from core.redis import get_redis
from sensors.cache import ProcessCache
from sensors.models import Node, Sensor

log = logging.getLogger(__name__)

CAPPED_SET = "sensors:inputs-capped"  # Redis set of node ids with an open capped alarm
SHOWN_KEYS = 5  # keys named in a message

_known_keys = ProcessCache()


def per_node() -> int:
    return settings.BMS_INGEST_MAX_AUTO_INPUTS_PER_NODE


def per_site() -> int:
    return settings.BMS_INGEST_MAX_AUTO_INPUTS_PER_SITE


def alarm_key(node_id: int) -> str:
    return f"node-inputs-capped:{node_id}"


def known_keys(node_id: int) -> frozenset[str]:
    """The node's input keys, cached per process (dropped when any Sensor is saved)."""
    keys = _known_keys.get(node_id)
    if keys is None:
        keys = frozenset(Sensor.objects.filter(node_id=node_id).values_list("key", flat=True))
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


def record_skipped(node: Node, keys: list[str], points: int) -> None:
    """Readings of keys beyond the bound were skipped: log it and keep an alarm open."""
    log.warning(
        "node %s: %d reading(s) of %d new input(s) skipped, auto-created input limit reached "
        "(%s): %s",
        node.name, points, len(keys), limits_text(), shown(keys),
    )  # fmt: skip
    raise_alarm(
        alarm_key(node.pk),
        f"Node '{node.name}' sends inputs beyond the limit of automatically created inputs "
        f"({limits_text()}): readings of {shown(keys)} are skipped. Configure or delete "
        "the node's inputs in the admin, or raise BMS_INGEST_MAX_AUTO_INPUTS_PER_NODE / "
        "_PER_SITE.",
        source="node",
    )
    get_redis().sadd(CAPPED_SET, node.pk)
