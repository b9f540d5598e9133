"""Celery tasks of the sensors app (queue `ingest`, routed by module in settings).

- drain_ingest_shard: processes the requests the web appended to a shard's streams
  (sensors/ingest/stream.py, sensors/ingest/drain.py); queued by the web and by
- kick_ingest_drains (beat): the safety net, and the ingest backlog alarm.
- check_silent_nodes (beat): alarm for nodes silent for 3× their interval; clear on return.
- poll_bacnet_devices (beat): hands each due BACnet controller to its own short poll task.
- discover_bacnet: a Who-Is an engineer asked for on the staff BACnet page.
- browse_bacnet: a controller's object list an engineer asked for on the staff BACnet page.
- poll_modbus_meters (beat): hands each due Modbus TCP meter to its own short poll task, and
  each RS-485 bus with due meters to one bus task (the meters share the line).
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime

from celery import shared_task
from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from alarms.lifecycle import clear_alarm, in_startup_grace, raise_alarm
from alarms.models import Alarm
from core.dates import when_text
from core.redis import get_redis
from sensors import cache as _cache  # noqa: F401  (connects the invalidation signals)
from sensors.ingest import node_state as state
from sensors.models import Node, Site

log = logging.getLogger(__name__)


@shared_task(
    name="sensors.tasks.drain_ingest_shard",
    ignore_result=True,
    # The requests are in their streams until processed (sensors/ingest/drain.py): a drain task
    # lost with its worker is replaced by the next kick or beat's safety net, so the message
    # needs no redelivery.
    acks_late=False,
)
def drain_ingest_shard(shard: int) -> dict:
    """Process the shard's accepted requests: streams -> sensors -> conversions -> feeds."""
    from sensors.ingest.drain import drain_shard

    return drain_shard(shard).as_dict()


BACKLOG_ALARM_KEY = "ingest-backlog"


@shared_task(name="sensors.tasks.kick_ingest_drains", ignore_result=True, acks_late=False)
def kick_ingest_drains() -> dict:
    """Beat, every few seconds: the safety net of the web's kicks. Queue a drain for every shard
    with waiting requests and no drain holding it (a kicked task lost with its worker, a drain
    stopped by an outage or killed), and raise an alarm when the backlog passes
    BMS_INGEST_BACKLOG_ALARM requests (cleared below half of it)."""
    from sensors.ingest import stream as stream
    from sensors.ingest.drain import backlog

    redis = get_redis()
    per_shard = backlog()
    pipe = redis.pipeline(transaction=False)
    for shard in per_shard:
        pipe.exists(stream.lease_key(shard))
    held = dict(zip(per_shard, pipe.execute(), strict=True))
    kicked = [s for s, n in per_shard.items() if n and not held[s]]
    for shard in kicked:
        redis.set(stream.kick_key(shard), 1, ex=stream.KICK_TTL_S)
        stream.kick(shard)
    total = sum(per_shard.values())
    limit = int(settings.BMS_INGEST_BACKLOG_ALARM)
    if total > limit:
        raise_alarm(
            BACKLOG_ALARM_KEY,
            f"{total} ingest requests waiting (alarm above {limit}): workers are behind",
            source="system",
        )
    elif total < limit // 2:
        clear_alarm(BACKLOG_ALARM_KEY)
    return {"kicked": kicked, "backlog": total}


GATEWAY_SILENT_PREFIX = "gateway-nodes-silent:"
SILENT_NAMED = 5  # node names in a gateway's silent alarm; the rest are counted


@shared_task(name="sensors.tasks.check_silent_nodes", ignore_result=True)
def check_silent_nodes(now: float | None = None) -> dict:
    """Raise and clear the silent alarms: one per node a person registered, and one per gateway
    key for the nodes it registered itself (`gateway-nodes-silent:<key id>`, counting them), so
    a gateway that goes quiet, or a flood of made-up names, is one alarm and not one per node.
    Also sweeps the ingest streams of deleted nodes (sensors/ingest/node_cleanup.py)."""
    from sensors.ingest import node_cleanup

    now = time.time() if now is None else now
    silent_keys = Q(key__startswith="node-silent:") | Q(key__startswith=GATEWAY_SILENT_PREFIX)
    open_keys = set(Alarm.objects.open().filter(silent_keys).values_list("key", flat=True))
    raised, cleared, waiting = [], [], []
    by_gateway: dict[int, list[Node]] = {}
    redis = get_redis()
    nodes = Node.objects.filter(enabled=True).only(
        "id", "name", "location", "interval", "created", "auto_created", "registered_by_id"
    )
    # Node names are unique per site: with several sites, "Node emontx silent" twice named
    # neither, so the message names the site too.
    several_sites = Site.objects.count() > 1
    if several_sites:
        nodes = nodes.select_related("site").only(
            "id", "name", "location", "interval", "created", "auto_created",
            "registered_by_id", "site__name",
        )  # fmt: skip
    nodes = list(nodes)
    # Posts waiting behind a stopped or slow drain count (node_state.heard_times): one alarm
    # per node would bury the backlog alarm that says why.
    heard = state.heard_times({n.id: n.interval for n in nodes}, now)
    for node in nodes:
        # A node that never posted is measured from when it was registered.
        last = heard.get(node.id, node.created.timestamp())
        key = f"node-silent:{node.id}"
        silent = now - last > state.SILENT_FACTOR * node.interval
        if node.auto_created and node.registered_by_id:
            by_gateway.setdefault(node.registered_by_id, [])
            if silent and not in_startup_grace(now, state.SILENT_FACTOR * node.interval):
                by_gateway[node.registered_by_id].append(node)
            if key in open_keys:  # opened before gateway nodes were counted together
                clear_alarm(key)
            continue
        if silent:
            if key not in open_keys and in_startup_grace(now, state.SILENT_FACTOR * node.interval):
                waiting.append(node.id)  # just restarted: give it the chance to post first
                continue
            # The message says since when, not "for N s": it stays true while the alarm is
            # open (pages show the running duration from the timestamps).
            since = timezone.localtime(datetime.fromtimestamp(last, UTC))
            _, created = raise_alarm(
                key,
                f"Node {node.name}"
                f"{f' of site {node.site.name!r}' if several_sites and node.site else ''}"
                f"{f' ({node.location})' if node.location else ''} silent since "
                f"{when_text(since)} "
                f"(expected every {node.interval} s)",
                source="node",
            )
            redis.sadd(state.SILENT_KEY, node.id)
            if created:
                raised.append(node.id)
        elif key in open_keys:
            clear_alarm(key)
            redis.srem(state.SILENT_KEY, node.id)
            cleared.append(node.id)
    groups = _gateway_silent_alarms(by_gateway, open_keys)
    swept = node_cleanup.sweep_orphans()
    return {
        "raised": raised,
        "cleared": cleared,
        "waiting": waiting,
        "gateways_silent": groups,
        "streams_removed": swept,
    }


def _gateway_silent_alarms(by_gateway: dict[int, list[Node]], open_keys: set[str]) -> dict:
    """One alarm per gateway key with silent nodes it registered: {key id: silent count}."""
    from sensors.models import GatewayKey

    names = dict(GatewayKey.objects.filter(pk__in=by_gateway).values_list("pk", "name"))
    counts = {}
    for gateway_id, silent in by_gateway.items():
        key = f"gateway-nodes-silent:{gateway_id}"
        counts[gateway_id] = len(silent)
        if not silent:
            if key in open_keys:
                clear_alarm(key)
            continue
        shown = ", ".join(repr(n.name) for n in silent[:SILENT_NAMED])
        more = f" and {len(silent) - SILENT_NAMED:,} more" if len(silent) > SILENT_NAMED else ""
        raise_alarm(
            key,
            f"{len(silent):,} node{'s' if len(silent) != 1 else ''} registered by gateway key "
            f"'{names.get(gateway_id, gateway_id)}' {'are' if len(silent) != 1 else 'is'} "
            f"silent (not heard for 3 of their intervals): {shown}{more}. Is the gateway "
            "running? Delete nodes that are not real in the admin.",
            source="node",
            occurrences=len(silent),
        )
    # A gateway key whose nodes were all deleted or disabled: its alarm has nothing to count.
    for key in open_keys:
        if key.startswith(GATEWAY_SILENT_PREFIX):
            gateway_id = int(key.removeprefix(GATEWAY_SILENT_PREFIX))
            if gateway_id not in by_gateway:
                clear_alarm(key)
    return counts


@shared_task(name="sensors.tasks.poll_modbus_meters", ignore_result=True)
def poll_modbus_meters() -> list[int]:
    """Queue the meters that are due (their interval has passed since the last poll): one short
    task per TCP meter, one task per RS-485 bus with due meters (they share the line)."""
    from sensors.models import ModbusBus

    redis = get_redis()
    queued = []
    due_on_bus: dict[int, list[int]] = {}
    meters = Node.objects.filter(enabled=True, protocol=Node.Protocol.MODBUS)
    for node in meters.only("id", "interval", "modbus_host", "modbus_bus_id"):
        if not node.modbus_host and not node.modbus_bus_id:
            continue
        # The claim expires just before the next interval so beat jitter cannot skip a poll.
        claim_ms = max(node.interval * 1000 - 500, 500)
        if not redis.set(f"sensors:modbus-due:{node.id}", 1, nx=True, px=claim_ms):
            continue
        if node.modbus_bus_id:
            due_on_bus.setdefault(node.modbus_bus_id, []).append(node.id)
        else:
            poll_modbus_meter.delay(node.id)
        queued.append(node.id)
    enabled_buses = set(
        ModbusBus.objects.filter(pk__in=due_on_bus, enabled=True).values_list("pk", flat=True)
    )
    for bus_id, node_ids in due_on_bus.items():
        if bus_id in enabled_buses:
            poll_modbus_bus.delay(bus_id, node_ids)
    return queued


@shared_task(
    name="sensors.tasks.poll_modbus_meter",
    ignore_result=True,
    acks_late=False,  # a poll is cheap to lose and must not pile up after a worker crash
    soft_time_limit=30,
    time_limit=40,
)
def poll_modbus_meter(node_id: int) -> dict:
    """Poll one Modbus TCP meter (sensors/devices/modbus_meters.py)."""
    from sensors.devices.modbus_meters import poll_tcp_node

    node = Node.objects.filter(pk=node_id, enabled=True).first()
    if node is None or not node.modbus_host:
        return {"skipped": True}
    return poll_tcp_node(node)


@shared_task(
    name="sensors.tasks.poll_modbus_bus",
    ignore_result=True,
    acks_late=False,
    # A bus holds at most 32 meters of at most 8 s each (sensors/devices/modbus_meters.py).
    soft_time_limit=280,
    time_limit=300,
)
def poll_modbus_bus(bus_id: int, node_ids: list[int] | None = None) -> dict:
    """Poll the due meters of one RS-485 bus in turn, under the bus lock."""
    from sensors.devices.modbus_meters import poll_bus
    from sensors.models import ModbusBus

    bus = ModbusBus.objects.filter(pk=bus_id, enabled=True).first()
    if bus is None:
        return {"skipped": True}
    return poll_bus(bus, node_ids)


# A controller's due claim: a key that lives for its poll period, whose value is the period it
# was claimed for (ms). A period shortened since (an interval changed from 3600 s to 5 s) then
# counts from the last claim at the next beat, not once the old period has run out: due when
# that much has passed, else the claim is cut to end when it will have. A lengthened one takes
# effect from the next claim. Atomic, so two beats never both claim a controller.
_CLAIM_DUE = """
local period = tonumber(ARGV[1])
local held = tonumber(redis.call('GET', KEYS[1]) or '')
if held == nil then
  redis.call('SET', KEYS[1], period, 'PX', period)
  return 1
end
local elapsed = held - redis.call('PTTL', KEYS[1])
if elapsed >= period then
  redis.call('SET', KEYS[1], period, 'PX', period)
  return 1
end
if held > period then
  redis.call('SET', KEYS[1], period, 'PX', period - elapsed)
end
return 0
"""


def bacnet_due_key(node_id: int) -> str:
    return f"sensors:bacnet-due:{node_id}"


@shared_task(name="sensors.tasks.poll_bacnet_devices", ignore_result=True)
def poll_bacnet_devices() -> list[int]:
    """Queue the BACnet controllers that are due, one short task each. The claim per controller
    expires just before its interval (at least BACNET_MIN_INTERVAL_S), so no controller is
    asked more often than that whatever the beat does; a shorter interval set since the last
    claim counts from that claim (`_CLAIM_DUE`)."""
    from sensors.models import BACNET_MIN_INTERVAL_S

    redis = get_redis()
    claim = redis.register_script(_CLAIM_DUE)
    queued = []
    nodes = Node.objects.filter(enabled=True, protocol=Node.Protocol.BACNET, bacnet__isnull=False)
    for node in nodes.only("id", "interval"):
        period_ms = max(node.interval, BACNET_MIN_INTERVAL_S) * 1000 - 500
        if claim(keys=[bacnet_due_key(node.id)], args=[period_ms]):
            poll_bacnet_device.delay(node.id)
            queued.append(node.id)
    return queued


@shared_task(
    name="sensors.tasks.poll_bacnet_device",
    ignore_result=True,
    acks_late=False,  # a poll is cheap to lose and must not pile up after a worker crash
    soft_time_limit=50,  # BMS_BACNET_POLL_DEADLINE_S is at most 45 s
    time_limit=55,
)
def poll_bacnet_device(node_id: int) -> dict:
    """Poll one BACnet controller (sensors/devices/bacnet_devices.py)."""
    from sensors.devices.bacnet_devices import poll_device
    from sensors.models import BacnetDevice

    device = BacnetDevice.objects.filter(node_id=node_id, node__enabled=True).first()
    if device is None:
        return {"skipped": True}
    return poll_device(device)


@shared_task(
    name="sensors.tasks.discover_bacnet",
    ignore_result=True,
    acks_late=False,  # an engineer asks again; a redelivered Who-Is is no use later
    soft_time_limit=45,  # a Who-Is listens 3 s, through a BBMD at most twice that
    time_limit=50,
)
def discover_bacnet(target: str) -> dict:
    """A Who-Is asked for on the staff BACnet page (sensors/devices/bacnet_discovery.py)."""
    from sensors.devices import bacnet_discovery

    return bacnet_discovery.run(target)


@shared_task(
    name="sensors.tasks.browse_bacnet",
    ignore_result=True,
    acks_late=False,  # an engineer asks again; a redelivered browse is no use later
    # bacnet_client bounds a whole browse at 120 s (MAX_DEADLINE_S); the engineer is told
    # by the page's kept state well before bacnet_browsing.STALE_S (180 s) lets another start.
    soft_time_limit=130,
    time_limit=140,
)
def browse_bacnet(address: str, instance: int) -> dict:
    """A controller's objects asked for on the staff BACnet page
    (sensors/devices/bacnet_browsing.py)."""
    from sensors.devices import bacnet_browsing

    return bacnet_browsing.run(address, instance)
