"""The COV side of BACnet recording (docs/BACNET.md section 4): the points of the controllers
we poll are subscribed to (sensors/devices/bacnet_cov.py), what they notify is recorded as
their readings, and the poll leaves them alone while a subscription holds them.

Bounds: at most `max_per_device` subscriptions per controller (its further points are polled);
at most one reading per point per `min_interval_s` recorded: a notification arriving sooner
waits as the point's next reading, and one it replaces is dropped and counted where staff see
it (the API's `last-read`, the staff page). The latest value is therefore never lost, only
the ones in between.

What it tells the poll and last-read is in Redis (keys in sensors/devices/bacnet_status.py).
"""

from __future__ import annotations

import concurrent.futures
import logging
import queue
import time
from collections import defaultdict
from collections.abc import Callable

from core.redis import get_redis
from sensors.devices import bacnet_status
from sensors.devices.bacnet_client import Condition
from sensors.devices.bacnet_cov import CovClient, CovRefused, Notification, Plan, Watch
from sensors.devices.bacnet_devices import record_conditions
from sensors.devices.bacnet_status import cov_key, dropped_key, refused_key
from sensors.models import BacnetDevice, BacnetPoint, Node

log = logging.getLogger(__name__)

MAX_SUBSCRIPTIONS_PER_DEVICE = 200  # the poll's own bound on a controller's points
KEY_TTL_S = 24 * 3600


class CovService:
    """Load the points (`load`, every few tens of seconds), then `step` often: subscribe what
    is due, note what the controllers answered, record what they notified."""

    def __init__(
        self,
        client: CovClient,
        plan: Plan,
        *,
        max_per_device: int,
        min_interval_s: float,
        now: Callable[[], float] = time.time,
    ) -> None:
        if not 0 <= max_per_device <= MAX_SUBSCRIPTIONS_PER_DEVICE:
            raise ValueError(
                f"COV subscriptions per controller {max_per_device} is out of range "
                f"0-{MAX_SUBSCRIPTIONS_PER_DEVICE}"
            )
        self.client, self.plan, self.now = client, plan, now
        self.max_per_device, self.min_interval_s = max_per_device, min_interval_s
        self.points: dict[int, BacnetPoint] = {}
        self.devices: dict[int, BacnetDevice] = {}  # node id -> device, its points prefetched
        self.futures: dict[int, concurrent.futures.Future] = {}
        self.last_recorded: dict[int, float] = {}
        self.pending: dict[int, Notification] = {}
        self.received = 0
        self._published: dict[int, tuple[dict, dict]] = {}

    def load(self) -> int:
        """The enabled controllers' points, the first `max_per_device` of each watched.
        Returns how many are watched."""
        devices = (
            BacnetDevice.objects.filter(node__enabled=True, node__protocol=Node.Protocol.BACNET)
            .select_related("node")
            .prefetch_related("points")
        )
        self.devices, self.points, watches = {}, {}, []
        for device in devices:
            self.devices[device.node_id] = device
            for point in list(device.points.all())[: self.max_per_device]:
                point.device = device
                self.points[point.pk] = point
                watches.append(Watch(point.pk, device.address, point.ref))
        for gone in self.plan.set_watches(watches):
            self.client.cancel(gone)  # best effort: its lifetime ends it anyway
        for stale in set(self._published) - set(self.devices):
            self._publish_node(stale, {}, {})
        return len(watches)

    def step(self) -> int:
        """One pass; returns how many readings were recorded."""
        now = self.now()
        for watch in self.plan.due(now):
            self.futures[watch.point_id] = self.client.subscribe(watch, self.plan.lifetime_s)
        for point_id, future in list(self.futures.items()):
            if future.done():
                del self.futures[point_id]
                self._answered(point_id, future, now)
        self._publish(now)
        return self._drain(now)

    def close(self, timeout_s: float = 3.0) -> int:
        """On stop: cancel the subscriptions held (else the controllers notify a process that is
        gone until each lifetime ends) and remove this process's covered entries, so the poll
        reads those points again from its next run, not only once the lifetimes run out.
        Returns how many cancellations the controllers acknowledged."""
        held = [self.plan.watches[pid] for pid in self.plan.covered(self.now())]
        cancels = [self.client.cancel(w) for w in held]
        done, _ = concurrent.futures.wait(cancels, timeout=timeout_s)
        acknowledged = sum(1 for f in done if f.exception() is None)
        for node_id in set(self._published) | set(self.devices):
            self._publish_node(node_id, {}, {})
        log.info(
            "BACnet COV stopped: %d of %d subscriptions cancelled; their points are polled again",
            acknowledged, len(held),
        )  # fmt: skip
        return acknowledged

    def _answered(self, point_id: int, future: concurrent.futures.Future, now: float) -> None:
        try:
            future.result()
        except CovRefused as exc:
            point = self.points.get(point_id)
            log.info("BACnet COV refused for %s: %s (polled instead)", point, exc)
            self.plan.failed(point_id, now, str(exc), refused=True)
        except TimeoutError:
            self.plan.failed(
                point_id, now, f"no answer within {self.client.timeout_s:g} s", refused=False
            )
        except Exception as exc:  # the network thread's failure: logged, retried later
            log.warning("BACnet COV subscription of point %d failed: %s", point_id, exc)
            self.plan.failed(point_id, now, str(exc) or type(exc).__name__, refused=False)
        else:
            self.plan.subscribed(point_id, now)

    def _publish(self, now: float) -> None:
        """Tell the poll (and last-read) which points a subscription holds, and which were
        refused; written only when that changed."""
        covered = self.plan.covered(now)
        held: dict[int, dict[str, int]] = defaultdict(dict)
        refused: dict[int, dict[str, str]] = defaultdict(dict)
        for point_id, point in self.points.items():
            node_id = point.device.node_id
            if point_id in covered:
                held[node_id][point.key] = int(covered[point_id])
            state = self.plan.states.get(point_id)
            if state is not None and state.refused:
                refused[node_id][point.key] = state.refused
        for node_id in self.devices:
            self._publish_node(node_id, held.get(node_id, {}), refused.get(node_id, {}))

    def _publish_node(self, node_id: int, held: dict, refused: dict) -> None:
        if self._published.get(node_id) == (held, refused):
            return
        pipe = get_redis().pipeline(transaction=True)
        pipe.delete(cov_key(node_id), refused_key(node_id))
        if held:
            pipe.hset(cov_key(node_id), mapping=held)
            pipe.expire(cov_key(node_id), KEY_TTL_S)
        if refused:
            pipe.hset(refused_key(node_id), mapping=refused)
            pipe.expire(refused_key(node_id), KEY_TTL_S)
        pipe.execute()
        if held or refused:
            self._published[node_id] = (held, refused)
        else:
            self._published.pop(node_id, None)

    def _drain(self, now: float) -> int:
        due: list[Notification] = []
        dropped: dict[int, int] = defaultdict(int)
        while True:
            try:
                note = self.client.notifications.get_nowait()
            except queue.Empty:
                break
            self.received += 1
            if note.point_id not in self.points:
                continue
            if self._may_record(note.point_id, now):
                self.last_recorded[note.point_id] = now
                due.append(note)
            else:
                if note.point_id in self.pending:
                    dropped[note.point_id] += 1
                self.pending[note.point_id] = note
        for point_id in list(self.pending):
            if self._may_record(point_id, now):
                self.last_recorded[point_id] = now
                due.append(self.pending.pop(point_id))
        self._count_dropped(dropped)
        return self._record(due, now)

    def _may_record(self, point_id: int, now: float) -> bool:
        last = self.last_recorded.get(point_id)
        return last is None or now - last >= self.min_interval_s

    def _count_dropped(self, dropped: dict[int, int]) -> None:
        if not dropped:
            return
        pipe = get_redis().pipeline(transaction=False)
        for point_id, count in dropped.items():
            point = self.points[point_id]
            pipe.hincrby(dropped_key(point.device.node_id), point.key, count)
            pipe.expire(dropped_key(point.device.node_id), KEY_TTL_S)
        pipe.execute()

    def _record(self, notes: list[Notification], now: float) -> int:
        """The notified values as the node's readings, after judging each point's condition
        as the poll does (a point in fault is alarmed and not recorded)."""
        from sensors.ingest.processing import ingest_rows

        by_node: dict[int, list[Notification]] = defaultdict(list)
        for note in notes:
            by_node[self.points[note.point_id].device.node_id].append(note)
        recorded = 0
        for node_id, node_notes in by_node.items():
            device = self.devices[node_id]
            bacnet_status.mark_answered(node_id, now)
            values: dict[str, float] = {}
            judged: dict[str, float] = {}
            conditions: dict[str, Condition] = {}
            for note in node_notes:
                point = self.points[note.point_id]
                if note.value is None:
                    continue
                values[point.key] = note.value
                if note.condition is not None:
                    judged[point.ref] = note.value
                    conditions[point.ref] = note.condition
            faulty = (
                record_conditions(device, list(device.points.all()), judged, conditions)
                if judged
                else set()
            )
            values = {key: value for key, value in values.items() if key not in faulty}
            if values:
                ingest_rows(node_id, [[int(now), values]])
                recorded += len(values)
        return recorded
