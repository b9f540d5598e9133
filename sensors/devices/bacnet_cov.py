"""COV subscriptions to BACnet controllers (ASHRAE 135 clause 13.14): instead of being asked
every poll, a controller tells us when a point changes. No Django here: the service
(sensors/devices/bacnet_cov_service.py) loads the points, records what arrives and tells the
poll which points it need not read.

Two parts:
- `Plan` (pure, on a clock the caller passes): which points to subscribe now, renewed at two
  thirds of the lifetime so a subscription never lapses while the controller answers; a
  refusal (a controller without COV, or that has no room) retried only after `refused_retry_s`,
  since the point is polled meanwhile; no answer retried after `retry_s`.
- `CovClient`: one bacpypes3 application on an asyncio loop in a thread of its own. It sends
  SubscribeCOV (unconfirmed notifications, a bounded lifetime: a subscription we forget about,
  because this process died, ends by itself at the controller) and puts each notification,
  decoded to plain values, on a bounded queue for the main thread. A notification whose status
  flags say fault has the point's reliability read first, so the alarm can quote it.

Each point is its own subscription, its subscriber process identifier the point's id: a
notification names the point it is for, and one from an address we did not subscribe to is
ignored. The controller sends the current value on every (re)subscription (clause 13.1.2), so
an unconfirmed notification lost on the network is made good at the next renewal at the latest.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import queue
import threading
from dataclasses import dataclass
from typing import Any

from bacpypes3.apdu import (
    ErrorRejectAbortNack,
    SimpleAckPDU,
    SubscribeCOVRequest,
)
from bacpypes3.basetypes import BinaryPV, PropertyIdentifier, StatusFlags
from bacpypes3.errors import ExecutionError
from bacpypes3.ipv4.app import NormalApplication
from bacpypes3.local.device import DeviceObject
from bacpypes3.pdu import Address, IPv4Address
from bacpypes3.primitivedata import ObjectIdentifier, Real, Unsigned

from sensors.devices.bacnet_app_thread import AppThread
from sensors.devices.bacnet_client import (
    MAX_INSTANCE,
    Condition,
    as_number,
    condition_of,
    device_words,
    parse_object,
)

log = logging.getLogger(__name__)

MIN_LIFETIME_S, MAX_LIFETIME_S = 5, 3600
MAX_PENDING = 10_000  # notifications waiting for the main thread; past it they are dropped
RENEW_AT = 2 / 3  # of the lifetime


class CovRefused(Exception):
    """The controller refused the subscription (its words): the point is polled instead."""


@dataclass(frozen=True)
class Watch:
    """A point to subscribe to. `point_id` is also the subscriber process identifier."""

    point_id: int
    address: str
    ref: str


@dataclass(frozen=True)
class Notification:
    point_id: int
    value: float | None  # None when it carried no usable present value
    condition: Condition | None  # None when it carried no status flags


@dataclass
class WatchState:
    subscribed_until: float = 0.0  # the controller forgets us then, unless renewed
    next_attempt: float = 0.0  # when to (re)subscribe
    refused: str = ""  # the controller's words, while it refuses
    error: str = ""  # the last failure to subscribe (no answer), '' after a success
    renewals: int = 0  # successful subscriptions after the first
    in_flight: bool = False


class Plan:
    """Which watches to (re)subscribe, on the caller's clock."""

    def __init__(self, lifetime_s: int, *, retry_s: float = 60.0, refused_retry_s: float = 3600.0):
        if not MIN_LIFETIME_S <= lifetime_s <= MAX_LIFETIME_S:
            raise ValueError(
                f"COV lifetime {lifetime_s} s is out of range {MIN_LIFETIME_S}-{MAX_LIFETIME_S}"
            )
        self.lifetime_s, self.retry_s, self.refused_retry_s = lifetime_s, retry_s, refused_retry_s
        self.watches: dict[int, Watch] = {}
        self.states: dict[int, WatchState] = {}

    def set_watches(self, watches: list[Watch]) -> list[Watch]:
        """Take the points to watch now; returns those no longer watched (to cancel). A point
        whose address or object changed is a new watch."""
        wanted = {w.point_id: w for w in watches}
        gone = [w for pid, w in self.watches.items() if wanted.get(pid) != w]
        for watch in gone:
            self.states.pop(watch.point_id, None)
        self.watches = wanted
        for pid in wanted:
            self.states.setdefault(pid, WatchState())
        return gone

    def due(self, now: float) -> list[Watch]:
        due = []
        for pid, state in self.states.items():
            if not state.in_flight and now >= state.next_attempt:
                state.in_flight = True
                due.append(self.watches[pid])
        return due

    def subscribed(self, point_id: int, now: float) -> None:
        state = self.states.get(point_id)
        if state is None:  # no longer watched meanwhile
            return
        if state.subscribed_until > 0:
            state.renewals += 1
        state.subscribed_until = now + self.lifetime_s
        state.next_attempt = now + self.lifetime_s * RENEW_AT
        state.refused = state.error = ""
        state.in_flight = False

    def failed(self, point_id: int, now: float, words: str, *, refused: bool) -> None:
        state = self.states.get(point_id)
        if state is None:
            return
        state.in_flight = False
        if refused:
            state.refused, state.subscribed_until = words, 0.0
            state.next_attempt = now + self.refused_retry_s
        else:
            # A lapse is not declared early: it lapses at subscribed_until, when the poll
            # takes the point back.
            state.error = words
            state.next_attempt = now + self.retry_s

    def covered(self, now: float) -> dict[int, float]:
        """Point id -> until when a subscription holds it (the poll skips it till then)."""
        return {
            pid: s.subscribed_until for pid, s in self.states.items() if s.subscribed_until > now
        }


class _CovApplication(NormalApplication):
    client: CovClient

    async def do_UnconfirmedCOVNotificationRequest(self, apdu: Any) -> None:
        await self.client._notified(apdu)

    async def do_ConfirmedCOVNotificationRequest(self, apdu: Any) -> None:
        # We ask for unconfirmed ones; a controller that confirms anyway is acknowledged.
        await self.client._notified(apdu)
        await self.response(SimpleAckPDU(context=apdu))


_PRESENT_VALUE_TYPES = {"analog": Real, "binary": BinaryPV, "multi-state": Unsigned}


class CovClient(AppThread):
    """The BACnet application on its own thread and loop: `start`, `subscribe`/`cancel` from
    the main thread (each answers a concurrent Future), `notifications` to drain, `stop`."""

    LABEL = "BACnet COV client"
    THREAD_NAME = "bacnet-cov"

    def __init__(self, local: str, instance: int, *, timeout_s: float = 3.0) -> None:
        self.local, self.instance, self.timeout_s = local, instance, timeout_s
        self.notifications: queue.Queue[Notification] = queue.Queue(MAX_PENDING)
        self.dropped_full = 0  # notifications dropped because the queue was full
        self._watches: dict[int, Watch] = {}  # read on the network thread
        self._loop: asyncio.AbstractEventLoop | None = None
        self._app: _CovApplication | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None

    async def _create_app(self) -> _CovApplication:
        device = DeviceObject(
            objectIdentifier=("device", self.instance),
            objectName=f"Open BMS {self.instance}",
            vendorIdentifier=999,  # ASHRAE's "no vendor id assigned"
        )
        app = _CovApplication(device, IPv4Address(self.local))
        app.client = self
        return app

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=5)

    def _submit(self, coro: Any) -> concurrent.futures.Future:
        assert self._loop is not None, "start() first"
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def subscribe(self, watch: Watch, lifetime_s: int) -> concurrent.futures.Future:
        """SubscribeCOV for `lifetime_s`: the Future's result is None, or it raises CovRefused
        (the controller's words) or TimeoutError."""
        if not 1 <= watch.point_id <= MAX_INSTANCE:
            raise ValueError(f"point id {watch.point_id} is not a subscriber process id")
        return self._submit(self._subscribe(watch, lifetime_s))

    def cancel(self, watch: Watch) -> concurrent.futures.Future:
        """A cancellation (no lifetime): the controller stops notifying; best effort."""
        return self._submit(self._subscribe(watch, None))

    async def _subscribe(self, watch: Watch, lifetime_s: int | None) -> None:
        kind, number = parse_object(watch.ref)
        request = SubscribeCOVRequest(
            subscriberProcessIdentifier=watch.point_id,
            monitoredObjectIdentifier=ObjectIdentifier((kind, number)),
            destination=Address(watch.address),
        )
        if lifetime_s is not None:
            request.issueConfirmedNotifications = False
            request.lifetime = lifetime_s
            self._watches[watch.point_id] = watch  # before: the first notification follows fast
        else:
            self._watches.pop(watch.point_id, None)
        try:
            response = await asyncio.wait_for(self._app.request(request), self.timeout_s)
        except (ErrorRejectAbortNack, ExecutionError) as exc:
            raise CovRefused(device_words(exc)) from exc
        if isinstance(response, ErrorRejectAbortNack):
            raise CovRefused(device_words(response))

    async def _notified(self, apdu: Any) -> None:
        """On the network thread: decode, quote a fault's reliability, queue for the main
        thread; never raise back into bacpypes3 for a notification we do not want."""
        watch = self._watches.get(apdu.subscriberProcessIdentifier)
        if watch is None or apdu.pduSource != Address(watch.address):
            return
        kind, number = parse_object(watch.ref)
        value: float | None = None
        flags = None
        cast = _PRESENT_VALUE_TYPES[kind.rsplit("-", 1)[0]]
        for element in apdu.listOfValues:
            try:
                if element.propertyIdentifier == PropertyIdentifier.presentValue:
                    value = as_number(element.value.cast_out(cast))
                elif element.propertyIdentifier == PropertyIdentifier.statusFlags:
                    flags = element.value.cast_out(StatusFlags)
            except (TypeError, ValueError) as exc:
                log.warning(
                    "BACnet COV from %s, %s: undecodable (%s)", watch.address, watch.ref, exc
                )
        condition = None
        if flags is not None:
            try:
                condition = await condition_of(
                    self._app,
                    Address(watch.address),
                    ObjectIdentifier((kind, number)),
                    flags,
                    self.timeout_s,
                )
            except TimeoutError:
                condition = None  # judged at the next notification or renewal
        try:
            self.notifications.put_nowait(Notification(watch.point_id, value, condition))
        except queue.Full:
            self.dropped_full += 1
