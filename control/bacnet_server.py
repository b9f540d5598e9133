"""The site as a BACnet/IP device (issue #31, server side, first slice): a head-end or another
controller on the plant LAN reads our zones as it reads any controller's points.

Objects, four per zone, the zone's id as their instance (at most MAX_ZONES zones):

    analog-input,<id>   "<zone> temperature"   °C  the zone's last reading (reliability
                                                   no-sensor and fault flag when there is none)
    analog-value,<id>   "<zone> setpoint"      °C  the target the last control tick worked to
    binary-value,<id>   "<zone> occupied"          booked or scheduled occupied now (an override:
                                                   what it holds)
    binary-input,<id>   "<zone> heat demand"       the zone calls for heat

Chosen feeds (an engineer ticks Feed.bacnet_export; at most MAX_BACNET_FEEDS) and the alarm
state, each in an instance range of its own so nothing collides:

    analog-input,<FEED_INSTANCE_BASE + feed id>  "<tag>:<name>"  the feed's last value, its
                                            unit's BACnet units (else no-units); reliability
                                            no-sensor with no value, over-range past a Real's,
                                            communication-failure when it is older than
                                            `feed_stale_s`, and the fault flag with each
    binary-input,SITE_INSTANCE   "Site alarm"     active while any alarm is open (not cleared)
    analog-value,SITE_INSTANCE   "Active alarms"  how many alarms are open

Zones are served only with ids below FEED_INSTANCE_BASE, feeds only with ids up to
MAX_FEED_ID: at most 4 × 500 + 200 + 2 = 2,202 objects besides the device. Each refresh
follows the database: a zone or feed added is made, one removed (or no longer chosen) dropped,
one renamed (a feed: or given another unit) made again under its new name.

A WriteProperty of a setpoint's or an occupancy's present-value is decoded here and handed to
the main thread through a bounded queue (MAX_PENDING_WRITES); the main thread decides it
(control/bacnet_writes.py: refused unless an engineer enabled it on the zone, else an audited
override) and the sender is answered once it has, or refused after WRITE_ANSWER_TIMEOUT_S.
Every other write is refused (property: write-access-denied; object: unknown-object for an
object we do not have) and logged with the writer's address, the object and property and why
(a read-only object, a property not writable): BACnet has no authentication.

Per sender (`sender_of`: the host the UDP datagram really came from, whatever its source port
and whatever source network and station the NPDU claims), since one chatty or hostile head-end
must not starve the others: at most `subscriptions_per_sender` of the COV subscriptions, and at
most `writes_per_minute` WriteProperty requests in any minute (`WriteRate`, which tracks at
most MAX_SENDERS senders, the least recently heard dropped). The log and the audit name a
request's sender by `name_of`: the address it claims and, when the datagram came from another,
" via " that one ("7:0x0000 via 192.168.50.31:47808"). A datagram the stack cannot decode is
dropped with one log line, at most MALFORMED_LINES_PER_MINUTE of them a minute (`LineBudget`);
every line a refused request makes is bounded the same, for each kind of line
(`SiteDevice.lines`, a `BudgetedLines`).

Names are shown on one line (`shown_name`: core/words.one_line), unique in the device. The
device object names its vendor, model, version (the project's) and location (the site's name).

Off unless BMS_BACNET_SERVER_ENABLED. It runs as its own process (`manage.py bacnet_server`):
the BACnet application runs on an asyncio loop in a thread of its own; the process's main
thread reads the database and Redis and hands plain values over (`update`), and decides the
writes (`handle_writes`), so no database access ever happens on the network's thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import math
import queue
import threading
import time
import tomllib
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any

from bacpypes3.apdu import SimpleAckPDU
from bacpypes3.basetypes import BinaryPV, PropertyIdentifier
from bacpypes3.errors import ExecutionError
from bacpypes3.ipv4.app import NormalApplication
from bacpypes3.ipv4.bvll import ForwardedNPDU
from bacpypes3.local.analog import AnalogInputObject, AnalogValueObject
from bacpypes3.local.binary import BinaryInputObject, BinaryValueObject
from bacpypes3.local.device import DeviceObject
from bacpypes3.pdu import Address, IPv4Address
from bacpypes3.primitivedata import ObjectType, Real

from control.bacnet_writes import NetworkWrite, WriteRefused
from control.engine.specs import FROST, OVER_TEMPERATURE
from core.log_budget import BudgetedLines, LineBudget
from core.words import one_line
from feeds.models import MAX_BACNET_FEEDS
from sensors.devices.bacnet_app_thread import AppThread

log = logging.getLogger(__name__)

MAX_ZONES = 500  # 2,000 objects: what a head-end browses in one go, and a bound on memory
# Instance ranges (an instance is 22 bits, 0-4194302): a zone's objects are its id (1-999,999),
# a feed's analog-input FEED_INSTANCE_BASE + its id, the alarm objects SITE_INSTANCE. A zone or
# feed whose id falls outside its range is not served rather than shown as another's object.
FEED_INSTANCE_BASE = 1_000_000
MAX_FEED_ID = 2_999_999
SITE_INSTANCE = 4_000_000
# A feed's value is stale (reliability communication-failure, the fault flag) once older than
# this many of its intervals, and never sooner than FEED_STALE_MIN_S: a node posts at its own
# pace, often slower than a 10 s feed's slots. Three, as a node is silent (sensors/tasks.py).
FEED_STALE_INTERVALS = 3
FEED_STALE_MIN_S = 300
MAX_REAL = 3.4028234663852886e38  # the largest 32-bit float: a BACnet Real
# BACnet engineering units for the units our feeds use (Feed.unit, as typed); others: no-units.
FEED_UNITS = {
    "°c": "degreesCelsius", "degc": "degreesCelsius",
    "k": "degreesKelvin", "w": "watts", "kw": "kilowatts", "mw": "megawatts",
    "wh": "wattHours", "kwh": "kilowattHours", "mwh": "megawattHours", "%": "percent",
    "%rh": "percentRelativeHumidity", "rh": "percentRelativeHumidity", "l/s": "litersPerSecond",
    "l/min": "litersPerMinute", "l/h": "litersPerHour", "l": "liters", "m3": "cubicMeters",
    "m³": "cubicMeters", "m3/h": "cubicMetersPerHour", "m³/h": "cubicMetersPerHour",
    "v": "volts", "a": "amperes", "ma": "milliamperes", "hz": "hertz", "va": "voltAmperes",
    "kva": "kilovoltAmperes", "pa": "pascals", "kpa": "kilopascals", "bar": "bars",
    "mbar": "millibars", "ppm": "partsPerMillion", "lx": "luxes", "lux": "luxes",
    "m/s": "metersPerSecond", "w/m2": "wattsPerSquareMeter", "w/m²": "wattsPerSquareMeter",
    "mm": "millimeters",
}  # fmt: skip
OCCUPIED_MODES = frozenset({"booking", "schedule", "optimum_stop"})
# The tick's modes that beat an override's setpoint (control/engine/zones.py): while one holds,
# the setpoint shown is the tick's (frost-off, or none), not the override's.
SAFETY_MODES = frozenset({FROST, OVER_TEMPERATURE})
# Writes waiting for the main thread: a flood of writes is refused (device busy), not queued
# without end. The answer timeout stays under a client's usual APDU timeout (3 s and more).
MAX_PENDING_WRITES = 16
WRITE_ANSWER_TIMEOUT_S = 2.5
MAX_COV_LIFETIME_S = 8 * 3600
# Senders whose writes are counted: a bound on the table's memory. A plant LAN has a few
# head-ends; one forging many addresses gets past any per-sender bound, and the queue's
# bound (MAX_PENDING_WRITES) still holds it.
MAX_SENDERS = 256
WRITE_WINDOW_S = 60.0
# Lines logged a minute for datagrams the stack cannot decode: each one was a full traceback,
# and anyone on the LAN can send thousands of junk packets a minute to fill the disk.
MALFORMED_LINES_PER_MINUTE = 20
MALFORMED_WINDOW_S = 60.0
# How much of a claimed station's MAC a name shows: the real origin after it must fit the audit.
MAX_MAC_SHOWN = 16

# What the device object says of itself (a head-end's device list shows these).
VENDOR_NAME = "Open BMS"
MODEL_NAME = "Open BMS site server"
UNKNOWN_VERSION = "unknown"  # no pyproject.toml beside the code
PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"

# Answer to a write: None when accepted, else the (error class, error code) it is refused with.
Refusal = tuple[str, str] | None


@dataclass(frozen=True)
class ZonePoint:
    """One zone as the BACnet device shows it: plain values, no Django."""

    zone_id: int
    name: str
    temperature: float | None
    setpoint: float | None
    occupied: bool
    demand: bool


@dataclass(frozen=True)
class FeedPoint:
    """One chosen feed as the BACnet device shows it. `stale`: its value (if any) is older
    than its staleness (`feed_points`)."""

    feed_id: int
    name: str
    unit: str
    value: float | None
    stale: bool = False


@dataclass(frozen=True)
class AlarmState:
    """The site's alarms as the BACnet device shows them: how many are open (not cleared)."""

    open: int


@cache
def project_version() -> str:
    """The project's version (pyproject.toml's), the device's firmware and application
    software version; UNKNOWN_VERSION without one."""
    try:
        with PYPROJECT.open("rb") as f:
            return str(tomllib.load(f)["project"]["version"])
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return UNKNOWN_VERSION


def site_location() -> str:
    """The device's location: the site's name when the database holds one site (one line,
    as a head-end shows it, at most 64 characters); else empty. Read on the caller's thread."""
    from sensors.models import Site

    sites = list(Site.objects.values_list("name", flat=True)[:2])
    return one_line(sites[0])[:64] if len(sites) == 1 else ""


def bacnet_units(unit: str) -> str:
    """The BACnet engineering units for a feed's unit as typed ("°C", "kWh"), else noUnits."""
    return FEED_UNITS.get(unit.strip().lower().replace(" ", ""), "noUnits")


def origin_of(address: Any) -> Any:
    """The address the datagram really came from: `address` itself, or the end of the route
    the stack hooks (`_keep_origins`) record on it for a routed or forwarded request."""
    while getattr(address, "addrRoute", None) is not None:
        address = address.addrRoute
    return address


def _shown(address: Any) -> str:
    """One address as the docs write it: an IPv4 station always with its port (bacpypes3 leaves
    47808 out); a remote station as network:MAC, the MAC cut to MAX_MAC_SHOWN characters."""
    addr_tuple = getattr(address, "addrTuple", None)
    if getattr(address, "addrNet", None) is None and addr_tuple:
        return f"{addr_tuple[0]}:{addr_tuple[1]}"
    if getattr(address, "addrType", None) == Address.remoteStationAddr:
        mac = bytes(address.addrAddr)
        if len(mac) == 6:  # a B/IP station behind the router: its IPv4 address and port
            shown = f"{'.'.join(str(b) for b in mac[:4])}:{int.from_bytes(mac[4:], 'big')}"
        elif len(mac) == 1:
            shown = str(mac[0])
        else:
            shown = "0x" + mac.hex()
            if len(shown) > MAX_MAC_SHOWN:
                shown = shown[: MAX_MAC_SHOWN - 1] + "…"
        return f"{address.addrNet}:{shown}"
    return str(address)


def name_of(address: Any) -> str:
    """A request's sender as the log and the audit name it: the address it claims and, when
    the datagram came from another (a BACnet router's, a BBMD's, or one forging the NPDU's
    source), " via " the address it really came from: the claim alone proves nothing."""
    origin = origin_of(address)
    if origin is address:
        return _shown(address)
    return f"{_shown(address)} via {_shown(origin)}"


def sender_of(address: Any) -> str:
    """Who a request is from, for the per-sender bounds: the host the datagram really came
    from, without its port (one that takes a new source port for each request is still one
    sender), whatever source network and station its NPDU claims (made up, each would be a
    new sender). Stations behind one BACnet router are one sender, the router's host."""
    origin = origin_of(address)
    addr_tuple = getattr(origin, "addrTuple", None)
    if getattr(origin, "addrNet", None) is None and addr_tuple:
        return str(addr_tuple[0])
    return _shown(origin)


class WriteRate:
    """At most `per_minute` writes from one sender in any WRITE_WINDOW_S: a sliding window,
    each sender's last writes' times. At most `max_senders` senders are tracked; a new one
    past that drops the one heard from least recently (whose count then starts again).
    `now` is the caller's monotonic clock (the network loop's; a test's own)."""

    def __init__(self, per_minute: int, max_senders: int = MAX_SENDERS) -> None:
        self.per_minute, self.max_senders = per_minute, max_senders
        self._times: OrderedDict[str, deque[float]] = OrderedDict()

    def allow(self, sender: str, now: float) -> bool:
        """Count a write from `sender` at `now` if its window has room; False if it has not."""
        times = self._times.pop(sender, None)
        if times is None:
            times = deque(maxlen=self.per_minute)
            while len(self._times) >= self.max_senders:
                self._times.popitem(last=False)
        self._times[sender] = times  # the most recently heard last
        while times and times[0] <= now - WRITE_WINDOW_S:
            times.popleft()
        if len(times) >= self.per_minute:
            return False
        times.append(now)
        return True

    def senders(self) -> list[str]:
        """The senders tracked, the least recently heard first."""
        return list(self._times)


def _target(apdu: Any) -> str:
    """The object and property a WriteProperty names, as the docs write them
    ("analog-input,3 present-value", "[2]" after it for an array index)."""
    index = apdu.propertyArrayIndex
    shown = f"{apdu.objectIdentifier} {apdu.propertyIdentifier}"
    return shown if index is None else f"{shown}[{index}]"


class _SiteApplication(NormalApplication):
    """Answers reads and Who-Is; a WriteProperty goes to the site device's `_write` (which
    asks the main thread); WritePropertyMultiple is refused before it touches an object."""

    site: SiteDevice

    async def do_WritePropertyRequest(self, apdu: Any) -> None:
        await self.site._write(apdu)

    async def do_WritePropertyMultipleRequest(self, apdu: Any) -> None:
        self.site._refuse(
            apdu, "write refused: WritePropertyMultiple",
            "BACnet WritePropertyMultiple from %s refused: not accepted here (a setpoint or an "
            "occupancy is written one WriteProperty at a time)",
            name_of(apdu.pduSource),
        )  # fmt: skip

    async def do_SubscribeCOVRequest(self, apdu: Any) -> None:
        """bacpypes3 keeps the subscriptions and sends the notifications; we bound them: a
        lifetime of at most MAX_COV_LIFETIME_S (none "indefinite", which a head-end that
        forgets us would hold for ever), at most `max_subscriptions` at once and of those at
        most `subscriptions_per_sender` from one sender."""
        sender = sender_of(apdu.pduSource)
        key = (
            sender,
            name_of(apdu.pduSource),
            apdu.subscriberProcessIdentifier,
            str(apdu.monitoredObjectIdentifier),
        )
        now = asyncio.get_running_loop().time()
        held = self.site._subscriptions
        for stale in [k for k, until in held.items() if until <= now]:
            del held[stale]
        if apdu.issueConfirmedNotifications is None and apdu.lifetime is None:  # a cancellation
            held.pop(key, None)
            await super().do_SubscribeCOVRequest(apdu)
            return
        lifetime = apdu.lifetime
        if lifetime is None or not 1 <= lifetime <= MAX_COV_LIFETIME_S:
            self.site.lines.warning(
                "SubscribeCOV refused: lifetime",
                "BACnet SubscribeCOV from %s refused: lifetime %s s (1-%d)",
                name_of(apdu.pduSource), lifetime, MAX_COV_LIFETIME_S,
            )  # fmt: skip
            raise ExecutionError(errorClass="services", errorCode="valueOutOfRange")
        if key not in held:  # a renewal of one held is not a new one
            self.site._bound_subscriptions(apdu, sender)
        await super().do_SubscribeCOVRequest(apdu)
        held[key] = now + lifetime


def _status(fault: bool) -> list[int]:
    return [0, 1 if fault else 0, 0, 0]  # in-alarm, fault, overridden, out-of-service


class SiteDevice(AppThread):
    """The BACnet application on its own thread and loop. `start`, then `update` from any
    thread as often as the values change, `stop` at the end."""

    LABEL = "BACnet server"
    THREAD_NAME = "bacnet-server"

    def __init__(
        self,
        local: str,
        instance: int,
        name: str,
        *,
        max_subscriptions: int = 200,
        subscriptions_per_sender: int = 50,
        writes_per_minute: int = 10,
        location: str = "",
    ) -> None:
        self.local, self.instance, self.name = local, instance, name
        self.location = location
        self.max_subscriptions = max_subscriptions
        self.subscriptions_per_sender = subscriptions_per_sender
        # COV subscriptions held (sender, its address, process id, object) -> loop time they
        # end; and the writes' rate per sender: the network thread's alone.
        self._subscriptions: dict[tuple[str, str, int, str], float] = {}
        self._write_rate = WriteRate(writes_per_minute)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._app: _SiteApplication | None = None
        self._thread: threading.Thread | None = None
        self._objects: dict[int, tuple[Any, Any, Any, Any]] = {}
        self._zone_made: dict[int, str] = {}  # the name each zone's objects were made with
        # The chosen feeds' analog-inputs by feed id; the alarm objects once first given:
        # the network thread's alone (`_apply`).
        self._feeds: dict[int, AnalogInputObject] = {}
        self._feed_made: dict[int, tuple[str, str]] = {}  # the name and unit each was made with
        # Feeds not shown for a name taken, and the name they were refused, to log each once;
        # at most the feeds given (MAX_BACNET_FEEDS), dropped once it is no longer chosen.
        self._unshown: dict[int, str] = {}
        self._alarm_objects: tuple[BinaryInputObject, AnalogValueObject] | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._writes: queue.Queue[tuple[NetworkWrite, concurrent.futures.Future]] = queue.Queue(
            MAX_PENDING_WRITES
        )
        # The malformed datagrams' log lines: bounded on this clock (a test sets its own).
        self.clock: Callable[[], float] = time.monotonic
        self._malformed = LineBudget(MALFORMED_LINES_PER_MINUTE, MALFORMED_WINDOW_S)
        # Every other line a request makes us log (a refused write or subscription), bounded
        # the same way for each kind of line: anyone on the LAN chooses how many requests.
        self.lines = BudgetedLines(
            log, MALFORMED_LINES_PER_MINUTE, MALFORMED_WINDOW_S, clock=lambda: self.clock()
        )

    def _refuse(
        self,
        apdu: Any,
        kind: str,
        msg: str,
        *args: object,
        error: tuple[str, str] = ("property", "writeAccessDenied"),
    ) -> None:
        """Log why a request is refused (a line of `kind`, within its budget) and answer the
        error (bacpypes3 answers an ExecutionError raised as the request's error)."""
        self.lines.warning(kind, msg, *args)
        raise ExecutionError(errorClass=error[0], errorCode=error[1])

    def _bound_subscriptions(self, apdu: Any, sender: str) -> None:
        """Refuse a new subscription past the sender's share or the total (resources:
        no-space-to-add-list-element, what a device answers when its list is full)."""
        held = self._subscriptions
        mine = sum(1 for k in held if k[0] == sender)
        if mine >= self.subscriptions_per_sender:
            self.lines.warning(
                "SubscribeCOV refused: sender's share",
                "BACnet SubscribeCOV from %s refused: %d subscriptions held by %s (at most %d a "
                "sender)", name_of(apdu.pduSource), mine, sender, self.subscriptions_per_sender,
            )  # fmt: skip
            raise ExecutionError(errorClass="resources", errorCode="noSpaceToAddListElement")
        if len(held) >= self.max_subscriptions:
            self.lines.warning(
                "SubscribeCOV refused: total",
                "BACnet SubscribeCOV from %s refused: %d subscriptions held",
                name_of(apdu.pduSource), len(held),
            )  # fmt: skip
            raise ExecutionError(errorClass="resources", errorCode="noSpaceToAddListElement")

    async def _create_app(self) -> _SiteApplication:
        version = project_version()
        device = DeviceObject(
            objectIdentifier=("device", self.instance),
            objectName=self.name,
            # ASHRAE assigns vendor ids on request; 999 is the one bacpypes3 and other
            # unregistered stacks use, so a head-end shows the vendor by its name below.
            vendorIdentifier=999,
            vendorName=VENDOR_NAME,
            modelName=MODEL_NAME,
            firmwareRevision=version,
            applicationSoftwareVersion=version,
            location=self.location,
            description=(
                "Open BMS: zones' temperatures, setpoints, occupancy and demand; chosen feeds; "
                "alarm state"
            ),
        )
        app = _SiteApplication(device, IPv4Address(self.local))
        app.site = self
        self._keep_origins(app)
        return app

    def _keep_origins(self, app: _SiteApplication) -> None:
        """Hook bacpypes3's stack so that a request keeps the address its datagram came from.

        bacpypes3 gives a request the NPDU's source network and station (SNET/SADR) as its
        source, and a Forwarded-NPDU the original address its BVLL header claims; the UDP
        datagram's own address is kept (as the source's addrRoute) only when the global
        `settings.route_aware` is on, which also changes how every answer is sent. Both claims
        are the sender's to make up, so we record the real origin as the source's route
        ourselves, and answers go as before. The link's entry point is wrapped as well: a
        datagram the stack cannot decode is one bounded log line (`_malformed_datagram`), not
        bacpypes3's traceback for each."""
        nsap_process = app.nsap.process_npdu

        async def process_npdu(adapter: Any, npdu: Any) -> None:
            sadr = npdu.npduSADR
            if sadr is not None and sadr.addrType == Address.remoteStationAddr:
                sadr.addrRoute = npdu.pduSource
            await nsap_process(adapter, npdu)

        link_confirmation = app.normal.confirmation

        async def confirmation(lpdu: Any) -> None:
            if isinstance(lpdu, ForwardedNPDU):
                lpdu.bvlciAddress.addrRoute = lpdu.pduSource
            await link_confirmation(lpdu)

        datagram_up = app.normal.server.response

        async def response(pdu: Any) -> None:
            source, size = pdu.pduSource, len(pdu.pduData)  # the decoders consume the data
            if pdu.pduData[:1] != b"\x81":  # BACnet/IP's (Annex J): else bacpypes3 warns each
                self._malformed_datagram(source, size, "not a BACnet/IP message")
                return
            try:
                await datagram_up(pdu)
            except Exception as exc:  # whatever a crafted datagram makes the decoders raise
                self._malformed_datagram(source, size, f"{type(exc).__name__}: {str(exc)[:100]}")

        app.nsap.process_npdu = process_npdu
        app.normal.confirmation = confirmation
        app.normal.server.response = response

    def _malformed_datagram(self, source: Any, size: int, why: str) -> None:
        """Log a datagram dropped undecoded: one line, within the budget a minute."""
        left_out = self._malformed.take(self.clock())
        if left_out is None:
            return
        more = f"; {left_out} more dropped unlogged before it" if left_out else ""
        log.warning(
            "BACnet datagram from %s dropped: malformed (%s), %d bytes%s",
            _shown(source), why, size, more,
        )  # fmt: skip

    async def _write(self, apdu: Any) -> None:
        """On the network's thread: decode a WriteProperty, hand it to the main thread and
        answer with what it decided (ExecutionError raised is bacpypes3's error answer)."""
        sender, source = sender_of(apdu.pduSource), name_of(apdu.pduSource)
        if not self._write_rate.allow(sender, asyncio.get_running_loop().time()):
            # BACnet has no "too many requests"; device: device-busy is what a device answers
            # when it cannot take a request now but may later, so a head-end retries after a
            # while. A resources code (no space …) would read as a lasting lack of room.
            self._refuse(
                apdu, "write refused: rate",
                "BACnet write from %s refused: more than %d writes from %s in %g s",
                source, self._write_rate.per_minute, sender, WRITE_WINDOW_S,
                error=("device", "deviceBusy"),
            )  # fmt: skip
        target = _target(apdu)
        object_type, instance = apdu.objectIdentifier
        if self._app.get_object_id(apdu.objectIdentifier) is None:
            self._refuse(
                apdu, "write refused: unknown object",
                "BACnet write from %s refused: %s: no such object", source, target,
                error=("object", "unknownObject"),
            )  # fmt: skip
        kinds = {ObjectType.analogValue: "setpoint", ObjectType.binaryValue: "occupancy"}
        kind = kinds.get(object_type)
        if instance == SITE_INSTANCE:
            kind = None  # the alarm count: read-only like every input
        if kind is None:
            self._refuse(
                apdu, "write refused: read-only object",
                "BACnet write from %s refused: %s: a read-only object", source, target,
            )  # fmt: skip
        if apdu.propertyIdentifier != PropertyIdentifier.presentValue or (
            apdu.propertyArrayIndex is not None
        ):
            self._refuse(
                apdu, "write refused: property",
                "BACnet write from %s refused: %s: property not writable (only a setpoint's or "
                "an occupancy's present-value is)", source, target,
            )  # fmt: skip
        if instance not in self._objects:  # a refresh dropped it since (the lookup above)
            self._refuse(
                apdu, "write refused: unknown object",
                "BACnet write from %s refused: %s: no such object", source, target,
                error=("object", "unknownObject"),
            )  # fmt: skip
        try:
            if kind == "setpoint":
                # A BACnet Real is 32-bit: 27.9 arrives as 27.8999996; to the hundredth.
                value = round(float(apdu.propertyValue.cast_out(Real)), 2)
            else:
                state = int(apdu.propertyValue.cast_out(BinaryPV))
        except (TypeError, ValueError) as exc:
            self.lines.warning(
                "write refused: undecodable",
                "BACnet write from %s refused: %s: undecodable (%s)", source, target, exc,
            )  # fmt: skip
            raise ExecutionError(errorClass="property", errorCode="invalidDataType") from exc
        if kind == "occupancy":
            # BinaryPV has two values; an enumerated 2 or 7 decodes without complaint and was
            # taken as inactive, an unoccupied override nobody asked for.
            if state not in (int(BinaryPV.inactive), int(BinaryPV.active)):
                self._refuse(
                    apdu, "write refused: occupancy value",
                    "BACnet write from %s refused: %s: occupancy %d is neither inactive (0) nor "
                    "active (1)", source, target, state,
                    error=("property", "valueOutOfRange"),
                )  # fmt: skip
            value = 1.0 if state == int(BinaryPV.active) else 0.0
        answer: concurrent.futures.Future[Refusal] = concurrent.futures.Future()
        try:
            self._writes.put_nowait((NetworkWrite(kind, instance, value, source), answer))
        except queue.Full:
            self.lines.warning(
                "write refused: queue full",
                "BACnet write from %s refused: %s: %d writes waiting", source, target,
                MAX_PENDING_WRITES,
            )  # fmt: skip
            raise ExecutionError(errorClass="device", errorCode="deviceBusy") from None
        try:
            refusal = await asyncio.wait_for(asyncio.wrap_future(answer), WRITE_ANSWER_TIMEOUT_S)
        except TimeoutError:
            # Cancelling the future stops the main thread from taking it up later; one it has
            # already begun is decided and logged there, this sender is told it timed out.
            self.lines.warning(
                "write refused: timeout",
                "BACnet write from %s: %s: no answer within %g s", source, target,
                WRITE_ANSWER_TIMEOUT_S,
            )  # fmt: skip
            raise ExecutionError(errorClass="device", errorCode="timeout") from None
        except Exception as exc:  # the main thread's failure (database away): logged there
            raise ExecutionError(errorClass="device", errorCode="operationalProblem") from exc
        if refusal is not None:
            raise ExecutionError(errorClass=refusal[0], errorCode=refusal[1])
        objects = self._objects.get(instance)  # a refresh may have dropped it meanwhile
        if objects is not None:  # else it is made again, with the override's value, next refresh
            obj = objects[1 if kind == "setpoint" else 2]
            obj.presentValue = value if kind == "setpoint" else ("active" if value else "inactive")
        await self._app.response(SimpleAckPDU(context=apdu))

    def handle_writes(self, decide: Callable[[NetworkWrite], object], wait_s: float) -> int:
        """On the main thread: decide the writes waiting (waiting up to `wait_s` for the first);
        `decide` raises WriteRefused to refuse. Returns how many were decided."""
        done = 0
        block = True
        while True:
            try:
                write, answer = self._writes.get(block, wait_s if block else None)
            except queue.Empty:
                return done
            block = False
            if not answer.set_running_or_notify_cancel():
                continue  # its sender was already told it timed out
            done += 1
            try:
                decide(write)
            except WriteRefused as refused:
                answer.set_result((refused.error_class, refused.error_code))
            except Exception as exc:
                answer.set_exception(exc)
                raise
            else:
                answer.set_result(None)

    def update(
        self,
        zones: list[ZonePoint],
        feeds: list[FeedPoint] | None = None,
        alarms: AlarmState | None = None,
        timeout_s: float = 10.0,
    ) -> int:
        """Show `zones` (the first MAX_ZONES by id, ids below FEED_INSTANCE_BASE), `feeds` (the
        first MAX_BACNET_FEEDS by id, ids up to MAX_FEED_ID; None: none) and `alarms` (None:
        the alarm objects as they are, absent until first given); returns how many zones are
        served (`feeds_served`: how many feeds)."""
        if self._loop is None:
            raise RuntimeError("the BACnet server is not started")
        zones = sorted(
            (z for z in zones if 0 < z.zone_id < FEED_INSTANCE_BASE), key=lambda z: z.zone_id
        )[:MAX_ZONES]
        chosen = sorted(
            (p for p in feeds or () if 0 < p.feed_id <= MAX_FEED_ID), key=lambda p: p.feed_id
        )[:MAX_BACNET_FEEDS]
        future = asyncio.run_coroutine_threadsafe(self._apply(zones, chosen, alarms), self._loop)
        return future.result(timeout_s)

    def set_location(self, location: str, timeout_s: float = 10.0) -> None:
        """The device's location, as the site is named now: the command reads it at each
        refresh (the demo makes its site after the server started; a site is renamed)."""
        if self._loop is None:
            raise RuntimeError("the BACnet server is not started")

        async def apply() -> None:
            self.location = location
            self._app.device_object.location = location

        asyncio.run_coroutine_threadsafe(apply(), self._loop).result(timeout_s)

    @property
    def feeds_served(self) -> int:
        return len(self._feeds)

    async def _apply(
        self, zones: list[ZonePoint], feeds: list[FeedPoint], alarms: AlarmState | None
    ) -> int:
        app = self._app
        wanted = {z.zone_id: z.name for z in zones}
        # Gone or renamed: dropped (bacpypes3 indexes objects by name, and a renamed zone's
        # objects are made again with the new name, as a renamed feed's are); every drop before
        # any make, so two zones swapping names never meet a name still held.
        for zone_id in sorted(self._objects):
            if wanted.get(zone_id) != self._zone_made[zone_id]:
                for obj in self._objects.pop(zone_id):
                    app.delete_object(obj)
                del self._zone_made[zone_id]
        for z in zones:
            if z.zone_id not in self._objects:
                self._objects[z.zone_id] = self._create(z)
                self._zone_made[z.zone_id] = z.name
                for obj in self._objects[z.zone_id]:
                    self._free_name(obj.objectName)
                    app.add_object(obj)
            temperature, setpoint, occupied, demand = self._objects[z.zone_id]
            known = z.temperature is not None and math.isfinite(z.temperature)
            temperature.presentValue = z.temperature if known else 0.0
            temperature.reliability = "noFaultDetected" if known else "noSensor"
            temperature.statusFlags = _status(not known)
            setpoint.presentValue = z.setpoint if z.setpoint is not None else 0.0
            occupied.presentValue = "active" if z.occupied else "inactive"
            demand.presentValue = "active" if z.demand else "inactive"
        if alarms is not None:  # before the feeds: its fixed names go first, as the zones'
            self._apply_alarms(alarms)
        self._apply_feeds(feeds)
        return len(zones)

    def _apply_feeds(self, feeds: list[FeedPoint]) -> None:
        app = self._app
        wanted = {p.feed_id: p for p in feeds}
        for feed_id in [f for f in self._unshown if f not in wanted]:
            del self._unshown[feed_id]
        for feed_id in sorted(self._feeds):
            point = wanted.get(feed_id)
            # Gone, renamed or given another unit: made again (bacpypes3 indexes objects by
            # name); an unchanged one is kept, and with it its COV subscriptions.
            if point is None or self._feed_made[feed_id] != (point.name, point.unit):
                self._drop_feed(feed_id)
        for p in feeds:
            if p.feed_id not in self._feeds:
                name = self._feed_name(p)
                if name in app.objectName:  # its name with its id taken as well
                    # Said once for each feed and name, not at every refresh (every 10 s).
                    if self._unshown.get(p.feed_id) != name:
                        self._unshown[p.feed_id] = name
                        log.warning("BACnet server: feed %d not shown: the name %r is taken",
                                    p.feed_id, name)  # fmt: skip
                    continue
                self._unshown.pop(p.feed_id, None)
                self._feeds[p.feed_id] = self._create_feed(p, name)
                self._feed_made[p.feed_id] = (p.name, p.unit)
                app.add_object(self._feeds[p.feed_id])
            obj = self._feeds[p.feed_id]
            known = p.value is not None and math.isfinite(p.value)
            # A BACnet Real is 32-bit: a value past its range cannot be encoded in an answer.
            fits = known and abs(p.value) <= MAX_REAL
            obj.presentValue = p.value if fits else 0.0
            if not known:
                obj.reliability = "noSensor"
            elif not fits:
                obj.reliability = "overRange"
            elif p.stale:
                obj.reliability = "communicationFailure"
            else:
                obj.reliability = "noFaultDetected"
            obj.statusFlags = _status(not fits or p.stale)

    def _free_name(self, name: str) -> None:
        """A new zone's or alarm object takes its name from a feed's object holding it: names
        are unique in a device; the feed's is made again with its id (`_feed_name`)."""
        holder = self._app.objectName.get(name)
        for feed_id, obj in list(self._feeds.items()):
            if obj is holder:
                self._drop_feed(feed_id)

    def _drop_feed(self, feed_id: int) -> None:
        self._app.delete_object(self._feeds.pop(feed_id))
        del self._feed_made[feed_id]

    def _feed_name(self, p: FeedPoint) -> str:
        """The feed's object name: its own, unless a zone's object holds that name (names are
        unique in a device), then with its id."""
        taken = self._app.objectName.get(p.name)
        mine = self._feeds.get(p.feed_id)
        if taken is None or taken is mine:
            return p.name
        return f"{p.name} (feed {p.feed_id})"

    def _create_feed(self, p: FeedPoint, name: str) -> AnalogInputObject:
        return AnalogInputObject(
            objectIdentifier=("analog-input", FEED_INSTANCE_BASE + p.feed_id),
            objectName=name, presentValue=0.0, units=bacnet_units(p.unit),
            statusFlags=_status(False), eventState="normal", outOfService=False,
            covIncrement=0.1, description=f"Feed {p.feed_id}: its last value",
        )  # fmt: skip

    def _apply_alarms(self, alarms: AlarmState) -> None:
        if self._alarm_objects is None:
            self._alarm_objects = (
                BinaryInputObject(
                    objectIdentifier=("binary-input", SITE_INSTANCE), objectName="Site alarm",
                    presentValue="inactive", statusFlags=_status(False), eventState="normal",
                    outOfService=False, polarity="normal",
                    description="Active while any alarm of the site is open (not cleared)",
                ),
                AnalogValueObject(
                    objectIdentifier=("analog-value", SITE_INSTANCE),
                    objectName="Active alarms", presentValue=0.0, units="noUnits",
                    statusFlags=_status(False), eventState="normal", outOfService=False,
                    covIncrement=1.0, description="How many alarms of the site are open",
                ),
            )  # fmt: skip
            for obj in self._alarm_objects:
                self._free_name(obj.objectName)
                self._app.add_object(obj)
        site_alarm, count = self._alarm_objects
        site_alarm.presentValue = "active" if alarms.open else "inactive"
        count.presentValue = float(alarms.open)

    @staticmethod
    def _create(z: ZonePoint) -> tuple[Any, Any, Any, Any]:
        n = z.zone_id
        return (
            AnalogInputObject(
                objectIdentifier=("analog-input", n), objectName=f"{z.name} temperature",
                presentValue=0.0, units="degreesCelsius", statusFlags=_status(False),
                eventState="normal", outOfService=False, covIncrement=0.1,
                description=f"Zone '{z.name}': its temperature reading",
            ),
            AnalogValueObject(
                objectIdentifier=("analog-value", n), objectName=f"{z.name} setpoint",
                presentValue=0.0, units="degreesCelsius", statusFlags=_status(False),
                eventState="normal", outOfService=False, covIncrement=0.1,
                description=f"Zone '{z.name}': the setpoint control works to now",
            ),
            BinaryValueObject(
                objectIdentifier=("binary-value", n), objectName=f"{z.name} occupied",
                presentValue="inactive", statusFlags=_status(False), eventState="normal",
                outOfService=False,
                description=f"Zone '{z.name}': booked or scheduled occupied now",
            ),
            BinaryInputObject(
                objectIdentifier=("binary-input", n), objectName=f"{z.name} heat demand",
                presentValue="inactive", statusFlags=_status(False), eventState="normal",
                outOfService=False, polarity="normal",
                description=f"Zone '{z.name}': calls for heat",
            ),
        )  # fmt: skip

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._loop = None


def held_occupied(override: Any, comfort_setpoint: float) -> bool:
    """Whether a zone override holds the zone occupied: on, at its comfort setpoint or above
    (an occupancy write of active holds comfort; of inactive, setback or off)."""
    return bool(override.state) and (
        override.setpoint is None or override.setpoint >= comfort_setpoint
    )


def held_setpoint(override: Any, result: dict[str, Any] | None) -> float | None:
    """The setpoint a zone shows: an override's while it holds one (the tick works to it from
    its next run; until then the last tick's target is the one before the write), unless the
    last tick's frost protection or over-temperature cut-off beat it; else the tick's target."""
    mode = result.get("mode") if result else None
    if override is not None and override.state and override.setpoint is not None:
        if mode not in SAFETY_MODES:
            return override.setpoint
    return result.get("target") if result else None


def shown_name(name: str, fallback: str) -> str:
    """A zone's or feed's name as an object name: on one line, control characters as spaces
    and bidi controls dropped (core/words.py), as a head-end's point list shows it on one line
    and in its own direction; `fallback` when nothing is left."""
    return one_line(name) or fallback


def zone_names(zones: list[Any]) -> dict[int, str]:
    """Each zone's name as its objects show it: unique in the device, as the database keeps
    them. A name the cleaning changed that meets another zone's takes its id after it."""
    names = {z.pk: z.name for z in zones if shown_name(z.name, "") == z.name}
    taken = set(names.values())
    for z in zones:
        if z.pk in names:
            continue
        name = shown_name(z.name, f"Zone {z.pk}")
        if name in taken:
            name = f"{name} (zone {z.pk})"
        names[z.pk] = name
        taken.add(name)
    return names


def zone_points(now: datetime | None = None) -> list[ZonePoint]:
    """Every zone's values as the last control tick left them (control/runtime.py) and its
    sensor's last reading: the database and Redis, read on the caller's thread. A zone held by
    an override shows the override's occupancy (`held_occupied`) and setpoint (`held_setpoint`)
    while it holds: an accepted write reads back as written, and is not reverted by a refresh
    that comes before the next tick."""
    from django.utils import timezone

    from control import runtime
    from control.models import Override, Zone
    from feeds.store import service as feed_service

    now = now or timezone.now()
    zones = list(
        Zone.objects.select_related("temperature_sensor")
        .filter(pk__lt=FEED_INSTANCE_BASE)
        .order_by("pk")[:MAX_ZONES]
    )
    results = runtime.load_zones([z.pk for z in zones])
    held = {
        o.zone_id: o  # the newest wins, as at the tick (control/snapshot.py)
        for o in Override.objects.active(now).filter(zone__in=zones).order_by("starts", "pk")
    }
    feed_ids = [z.temperature_sensor.feed_id for z in zones if z.temperature_sensor_id]
    last = feed_service.last_values([f for f in feed_ids if f])
    names = zone_names(zones)
    points = []
    for z in zones:
        # A disabled zone: no tick works to anything there, an override's values included
        # (one made before it was disabled still holds in the database): heating off.
        result = results.get(z.pk) if z.enabled else None
        override = held.get(z.pk) if z.enabled else None
        feed_id = z.temperature_sensor.feed_id if z.temperature_sensor_id else None
        reading = last.get(feed_id) if feed_id else None
        points.append(
            ZonePoint(
                zone_id=z.pk,
                name=names[z.pk],
                temperature=reading[1] if reading else None,
                setpoint=held_setpoint(override, result),
                occupied=(
                    held_occupied(override, z.comfort_setpoint)
                    if override is not None
                    else bool(result and result.get("mode") in OCCUPIED_MODES)
                ),
                demand=bool(result and result.get("demand")),
            )
        )
    return points


def feed_stale_s(interval: int) -> int:
    """How old a feed's last value may be before it is stale."""
    return max(FEED_STALE_INTERVALS * interval, FEED_STALE_MIN_S)


def feed_points(now: datetime | None = None) -> list[FeedPoint]:
    """The feeds an engineer chose (Feed.bacnet_export; the first MAX_BACNET_FEEDS by id) and
    their last values: one query for the feeds, one look-up for all their last values."""
    from django.utils import timezone

    from feeds.models import Feed
    from feeds.store import service as feed_service

    now_s = (now or timezone.now()).timestamp()
    feeds = list(
        Feed.objects.filter(bacnet_export=True, pk__lte=MAX_FEED_ID)
        .order_by("pk")
        .only("pk", "name", "tag", "unit", "interval")[:MAX_BACNET_FEEDS]
    )
    last = feed_service.last_values([feed.pk for feed in feeds])
    points = []
    for feed in feeds:
        t, value = last.get(feed.pk, (None, None))
        stale = t is not None and now_s - t > feed_stale_s(feed.interval)
        # One whose cleaned name meets another object's is shown with its id (`_feed_name`).
        name = shown_name(str(feed), f"feed {feed.pk}")
        points.append(FeedPoint(feed.pk, name, feed.unit, value, stale))
    return points


def alarm_state() -> AlarmState:
    """How many alarms are open (cleared_at unset), acknowledged or not: an acknowledged
    alarm's condition still holds. One query."""
    from alarms.models import Alarm

    return AlarmState(open=Alarm.objects.open().count())
