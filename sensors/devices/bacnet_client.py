"""A BACnet/IP client (bacpypes3) for the controllers already on the plant LAN: find them
(Who-Is/I-Am), list their objects, read present values, and command a point at one priority
of its priority array, read it back, and relinquish it.

No Django here: callers pass plain values and get dataclasses back. Every public function opens
its own bacpypes3 application on `local` (an "ADDRESS/PREFIX:PORT" string), runs one job under
an overall deadline and closes it, so a Celery worker or a command never keeps a socket or waits
past `deadline_s` for a controller that does not answer. Discovery needs the BACnet port (I-Am
answers are broadcast to it); reads and writes are unicast, so port 0 (any free port) serves them
and several workers can talk at once.

Priorities (ASHRAE 135 clause 19.2): 1 is the highest; 16 the lowest, where a controller's own
programme usually writes. We write at one priority (8 by default, "manual operator") and
relinquish it by writing NULL there, which hands the point back to whatever holds a lower slot or
to its relinquish-default.
"""

from __future__ import annotations

import asyncio
import ipaddress
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from bacpypes3.apdu import ErrorRejectAbortNack
from bacpypes3.basetypes import BinaryPV
from bacpypes3.errors import ExecutionError
from bacpypes3.ipv4.app import ForeignApplication, NormalApplication
from bacpypes3.local.device import DeviceObject
from bacpypes3.pdu import Address, IPv4Address
from bacpypes3.primitivedata import Null, ObjectIdentifier, Real, Unsigned

from core.words import one_line

MAX_INSTANCE = 4194302  # a device or object instance: 22 bits, 4194303 is the wildcard
MAX_OBJECTS = 2000  # a browse reads at most this many objects of one device
MAX_DISCOVERED = 500  # I-Am answers kept from one Who-Is
MAX_DEADLINE_S = 120.0
PRIORITIES = range(1, 17)
DEFAULT_PRIORITY = 8
# Object types we map: inputs, outputs and values, analogue, binary and multi-state.
POINT_TYPES = (
    "analog-input",
    "analog-output",
    "analog-value",
    "binary-input",
    "binary-output",
    "binary-value",
    "multi-state-input",
    "multi-state-output",
    "multi-state-value",
)
COMMANDABLE_BINARY = ("binary-output", "binary-value")
COMMANDABLE_MULTI_STATE = ("multi-state-output", "multi-state-value")
# What the control tick commands: binary outputs (relays), and analogue or multi-state outputs
# and values (a valve position, a set point, a fan speed), each at a priority of its array.
COMMANDABLE = (*COMMANDABLE_BINARY, "analog-output", "analog-value", "multi-state-output",
               "multi-state-value")  # fmt: skip
# A commanded value: ON/OFF, an analogue value or a multi-state (1-based state number).
Value = bool | float | int

T = TypeVar("T")


class BacnetError(Exception):
    """The controller did not answer in time, refused, or answered something unusable."""


class RequestTimeout(TimeoutError):
    """One request went unanswered for its own timeout (`timeout_s`), as distinct from the
    job's overall deadline: the message names the timeout that expired, so an alarm does not
    say 'no answer within 20 s' when the controller had 3 s. A TimeoutError, so the callers
    that skip one unanswered point go on catching it."""

    def __init__(self, timeout_s: float) -> None:
        super().__init__(f"no answer within {timeout_s:g} s")
        self.timeout_s = timeout_s


async def _within(coro: Awaitable[T], timeout_s: float) -> T:
    """One request bounded by its own timeout (RequestTimeout when it expires)."""
    try:
        return await asyncio.wait_for(coro, timeout_s)
    except TimeoutError as exc:
        if isinstance(exc, RequestTimeout):  # raised further in: already named
            raise
        raise RequestTimeout(timeout_s) from exc


@dataclass(frozen=True)
class Found:
    """One I-Am: a device that answered a Who-Is."""

    instance: int
    address: str
    vendor_id: int
    max_apdu: int


@dataclass(frozen=True)
class ObjectInfo:
    object_type: str
    instance: int
    name: str = ""
    units: str = ""
    description: str = ""

    @property
    def ref(self) -> str:
        return f"{self.object_type},{self.instance}"


@dataclass
class Browse:
    device_name: str
    vendor_name: str
    model_name: str
    objects: list[ObjectInfo] = field(default_factory=list)
    truncated: int = 0  # objects past MAX_OBJECTS, not read


@dataclass(frozen=True)
class Condition:
    """What a point says of itself beside its value (its status-flags, and its reliability when
    the fault flag is set): `reliability` in the device's words ('over-range'), '' when it
    reports no fault."""

    reliability: str = ""
    out_of_service: bool = False

    @property
    def fault(self) -> bool:
        return bool(self.reliability)


NORMAL = Condition()


@dataclass
class Readings:
    values: dict[str, float] = field(default_factory=dict)  # object ref -> present value
    errors: dict[str, str] = field(default_factory=dict)  # object ref -> the device's words
    # object ref -> its condition, for each point whose value was read and that said anything
    # but "normal"; a point absent here is in no fault and in service.
    conditions: dict[str, Condition] = field(default_factory=dict)


@dataclass(frozen=True)
class CommandState:
    """A commandable point as read back: its present value and which priority holds it
    (None: no slot holds it, the relinquish-default is in force)."""

    value: Value
    priority: int | None
    ours: Value | None  # the value at our priority, None when our slot is NULL


def same(a: Value | None, b: Value | None) -> bool:
    """A value read back is the one written: exactly for binary and multi-state; for an
    analogue one within what a BACnet Real (32 bits) keeps of it (65.3 reads 65.30000305)."""
    if a is None or b is None or isinstance(a, bool) or isinstance(b, bool):
        return a == b
    return math.isclose(float(a), float(b), rel_tol=1e-6, abs_tol=1e-4)


def _family(kind: str) -> str:
    return kind.rsplit("-", 1)[0]  # "analog", "binary" or "multi-state"


def _encode(kind: str, value: Value | None) -> Any:
    """What is written: NULL relinquishes; else the point's own type."""
    if value is None:
        return Null(())
    family = _family(kind)
    if family == "binary":
        return BinaryPV("active" if value else "inactive")
    if family == "analog":
        number = float(value)
        if not math.isfinite(number):
            raise ValueError(f"{number} is not a finite number")
        return Real(number)
    if isinstance(value, bool) or int(value) != value or int(value) < 1:
        raise ValueError(f"multi-state value {value!r} is not a state number (1, 2, …)")
    return Unsigned(int(value))


def _decode(kind: str, value: Any) -> Value:
    family = _family(kind)
    if family == "binary":
        return bool(int(value))
    if family == "analog":
        return float(value)
    return int(value)


def parse_object(ref: str) -> tuple[str, int]:
    """'analog-input,1' -> ('analog-input', 1); a ValueError names what is wrong."""
    kind, _, number = ref.strip().partition(",")
    kind = kind.strip().lower()
    if kind not in POINT_TYPES:
        raise ValueError(f"object type {kind!r} is not one of {', '.join(POINT_TYPES)}")
    try:
        instance = int(number)
    except ValueError as exc:
        raise ValueError(f"object instance {number.strip()!r} is not a number") from exc
    if not 0 <= instance <= MAX_INSTANCE:
        raise ValueError(f"object instance {instance} is out of range 0-{MAX_INSTANCE}")
    return kind, instance


MULTICAST = ipaddress.IPv4Network("224.0.0.0/4")


def parse_address(address: str) -> tuple[str, int]:
    """'192.168.1.40' or '192.168.1.40:47809' -> (host, port): a BACnet/IP device is an IPv4
    address (a name would be resolved by whoever polls, each time). Refused: 0.0.0.0 (no one),
    the limited broadcast 255.255.255.255 (every host on our LAN: blank is the discovery's
    local broadcast) and multicast 224.0.0.0/4. A directed broadcast (x.x.x.255) is let
    through: without the subnet's prefix it cannot be told from a host, and Discover takes
    one."""
    text = address.strip()
    if text.count(":") > 1 or text.startswith("["):
        raise ValueError("IPv6 is not supported: give an IPv4 address")
    host, _, port_text = text.partition(":")
    try:
        ip = ipaddress.IPv4Address(host)
    except ValueError as exc:
        raise ValueError(f"{host!r} is not an IPv4 address") from exc
    if ip.is_unspecified:
        raise ValueError(f"{host} is no one's address: give the controller's IPv4 address")
    if ip == ipaddress.IPv4Address("255.255.255.255"):
        raise ValueError(f"{host} is the broadcast to every host: give one address")
    if ip in MULTICAST:
        raise ValueError(f"{host} is a multicast address (224.0.0.0/4): give one address")
    try:
        port = int(port_text) if port_text else 47808
    except ValueError as exc:
        raise ValueError(f"port {port_text!r} is not a number") from exc
    if not 1 <= port <= 65535:
        raise ValueError(f"port {port} is out of range 1-65535")
    return host, port


def check_priority(priority: int) -> int:
    if priority not in PRIORITIES:
        raise ValueError(f"priority {priority} is out of range 1-16")
    return priority


def _app(local: str, instance: int) -> NormalApplication:
    device = DeviceObject(
        objectIdentifier=("device", instance),
        objectName=f"Open BMS {instance}",
        vendorIdentifier=999,  # ASHRAE's "no vendor id assigned"
    )
    return NormalApplication(device, IPv4Address(local))


def _run(
    local: str,
    client_instance: int,
    deadline_s: float,
    job: Callable[[NormalApplication], Awaitable[T]],
    make_app: Callable[[str, int], Any] = _app,
) -> T:
    """Run `job` on a fresh application, closed afterwards, bounded by `deadline_s` whole."""
    deadline_s = min(max(deadline_s, 0.1), MAX_DEADLINE_S)

    async def main() -> T:
        app = make_app(local, client_instance)
        try:
            return await asyncio.wait_for(job(app), deadline_s)
        except RequestTimeout as exc:  # one request's own timeout, inside the deadline
            raise BacnetError(str(exc)) from exc
        except TimeoutError as exc:
            raise BacnetError(f"no answer within {deadline_s:g} s") from exc
        except (ErrorRejectAbortNack, ExecutionError) as exc:
            raise BacnetError(device_words(exc)) from exc
        finally:
            app.close()

    try:
        return asyncio.run(main())
    except OSError as exc:  # the local address cannot be bound, the network is down
        raise BacnetError(f"network error on {local}: {exc}") from exc


def device_words(exc: BaseException) -> str:
    """The device's refusal as it put it: 'object: unknown-object', 'property: write-access-
    denied'."""
    error_class = getattr(exc, "errorClass", None)
    error_code = getattr(exc, "errorCode", None)
    if error_class is not None and error_code is not None:
        return f"{error_class}: {error_code}"
    reason = getattr(exc, "apduAbortRejectReason", None)
    return f"refused ({reason})" if reason is not None else (str(exc) or type(exc).__name__)


MIN_BBMD_TTL_S, MAX_BBMD_TTL_S = 10, 3600


def check_ttl(ttl_s: int) -> int:
    if not MIN_BBMD_TTL_S <= ttl_s <= MAX_BBMD_TTL_S:
        raise ValueError(
            f"foreign-device time-to-live {ttl_s} s is out of range "
            f"{MIN_BBMD_TTL_S}-{MAX_BBMD_TTL_S}"
        )
    return ttl_s


def _foreign_app(local: str, instance: int) -> ForeignApplication:
    device = DeviceObject(
        objectIdentifier=("device", instance),
        objectName=f"Open BMS {instance}",
        vendorIdentifier=999,
    )
    return ForeignApplication(device, IPv4Address(local))


async def _register(app: ForeignApplication, bbmd: str, ttl_s: int, wait_s: float) -> None:
    """Register with the BBMD as a foreign device and wait for its answer (Result code 0);
    bacpypes3 renews it every `ttl_s` while the application lives."""
    app.register(IPv4Address(bbmd), ttl_s)
    loop = asyncio.get_running_loop()
    ends = loop.time() + wait_s
    # bacpypes3 gives the registration's state as an attribute, not an awaitable: looked at
    # every 50 ms, within the bound.
    while app.foreign.bbmdRegistrationStatus != 0:
        if loop.time() >= ends:
            status = app.foreign.bbmdRegistrationStatus
            why = "no answer" if status < 0 else f"it answered NAK (result code {status})"
            raise BacnetError(
                f"BBMD {bbmd} did not register us as a foreign device within {wait_s:g} s: {why}"
            )
        await asyncio.sleep(0.05)


def discover(
    target: str | None,
    *,
    low: int | None = None,
    high: int | None = None,
    local: str,
    client_instance: int,
    wait_s: float = 3.0,
    bbmd: str | None = None,
    ttl_s: int = 60,
) -> list[Found]:
    """Who-Is to `target` (an address, a directed broadcast, or None for the local broadcast),
    for device instances low..high (both or neither). Collects I-Am answers for `wait_s`.

    With `bbmd` ('host[:port]' of a BACnet broadcast management device on a routed site) we
    first register with it as a foreign device for `ttl_s` (10-3600 s): our broadcast Who-Is
    then goes to it, it broadcasts it on its own network, and forwards the I-Am answers to us."""
    if (low is None) != (high is None):
        raise ValueError("give both ends of the instance range, or neither")
    if low is not None and not 0 <= low <= high <= MAX_INSTANCE:  # type: ignore[operator]
        raise ValueError(f"instance range {low}-{high} is not within 0-{MAX_INSTANCE}")
    wait_s = min(max(wait_s, 0.5), 30.0)
    if bbmd is not None:
        host, port = parse_address(bbmd)
        bbmd = f"{host}:{port}"
        check_ttl(ttl_s)

    async def job(app: NormalApplication) -> list[Found]:
        if bbmd is not None:
            await _register(app, bbmd, ttl_s, wait_s)
        address = Address(target) if target else None
        i_ams = await app.who_is(low, high, address, timeout=wait_s)
        found = {}
        for i_am in i_ams[:MAX_DISCOVERED]:
            _, instance = i_am.iAmDeviceIdentifier
            found[instance] = Found(
                instance=int(instance),
                address=str(i_am.pduSource),
                vendor_id=int(i_am.vendorID),
                max_apdu=int(i_am.maxAPDULengthAccepted),
            )
        if bbmd is not None:
            app.unregister()  # the BBMD forgets us now, not when the time-to-live runs out
        return sorted(found.values(), key=lambda f: f.instance)

    if bbmd is None:
        return _run(local, client_instance, wait_s + 2.0, job)
    return _run(local, client_instance, 2 * wait_s + 2.0, job, _foreign_app)


async def _optional(app: NormalApplication, address: Address, ref: Any, prop: str) -> Any:
    """A property a device may not have (units of a binary input, a description): '' if not."""
    try:
        return await app.read_property(address, ref, prop)
    except (ErrorRejectAbortNack, ExecutionError):
        return ""


# A controller's own words (names, vendor, descriptions) as we keep and show them: a device
# may send a CharacterString of any length, with line breaks, terminal escapes or bidi controls
# that would forge a line in a log or an engineer's terminal, or print a page's line backwards.
MAX_TEXT = 255


def _text(value: Any) -> str:
    """A controller's text on one line (core.words.one_line), at most MAX_TEXT characters."""
    return one_line(str(value))[:MAX_TEXT]


def browse(
    address: str,
    instance: int,
    *,
    local: str,
    client_instance: int,
    timeout_s: float = 3.0,
    max_objects: int = MAX_OBJECTS,
) -> Browse:
    """The device's name and its objects of the mapped types with name, units, description.
    One request at a time (a small controller serves one), each bounded by `timeout_s`; the
    whole browse by one deadline proportional to the objects read."""
    max_objects = min(max(max_objects, 1), MAX_OBJECTS)

    async def one(app: NormalApplication, coro: Awaitable[Any]) -> Any:
        return await _within(coro, timeout_s)

    async def job(app: NormalApplication) -> Browse:
        where = Address(address)
        device = ObjectIdentifier(("device", instance))
        name = await one(app, app.read_property(where, device, "object-name"))
        vendor = await one(app, _optional(app, where, device, "vendor-name"))
        model = await one(app, _optional(app, where, device, "model-name"))
        object_list = await one(app, app.read_property(where, device, "object-list"))
        wanted = [o for o in object_list if str(o[0]) in POINT_TYPES]
        result = Browse(
            _text(name), _text(vendor), _text(model), truncated=max(0, len(wanted) - max_objects)
        )
        for oid in wanted[:max_objects]:
            kind, number = str(oid[0]), int(oid[1])
            result.objects.append(
                ObjectInfo(
                    kind,
                    number,
                    name=_text(await one(app, _optional(app, where, oid, "object-name"))),
                    units=_text(await one(app, _optional(app, where, oid, "units"))),
                    description=_text(await one(app, _optional(app, where, oid, "description"))),
                )
            )
        return result

    return _run(local, client_instance, timeout_s * (5 + 3 * max_objects), job)


FAULT_FLAG, OUT_OF_SERVICE_FLAG = 1, 3  # StatusFlags bits (in-alarm, fault, overridden, oos)


async def _condition(
    app: NormalApplication, where: Address, oid: ObjectIdentifier, timeout_s: float
) -> Condition:
    """The point's status-flags (required of every input, output and value object), and its
    reliability when the fault flag is set, so an alarm can quote the device. A device that
    refuses status-flags is taken at its value: NORMAL."""
    try:
        flags = await _within(app.read_property(where, oid, "status-flags"), timeout_s)
    except (ErrorRejectAbortNack, ExecutionError):
        return NORMAL
    return await condition_of(app, where, oid, flags, timeout_s)


async def condition_of(
    app: NormalApplication, where: Address, oid: ObjectIdentifier, flags: Any, timeout_s: float
) -> Condition:
    bits = list(flags) + [0, 0, 0, 0]
    reliability = ""
    if bits[FAULT_FLAG]:
        try:
            reliability = str(
                await _within(app.read_property(where, oid, "reliability"), timeout_s)
            )
        except (ErrorRejectAbortNack, ExecutionError):
            reliability = "fault (no reliability given)"
        if reliability == "no-fault-detected":
            reliability = ""
    return Condition(reliability=reliability, out_of_service=bool(bits[OUT_OF_SERVICE_FLAG]))


def as_number(value: Any) -> float:
    if isinstance(value, BinaryPV):
        return 1.0 if int(value) else 0.0
    number = float(value)
    if not math.isfinite(number):
        raise ValueError("not a finite number")
    return number


def read_present_values(
    address: str,
    refs: list[str],
    *,
    local: str,
    client_instance: int,
    timeout_s: float = 3.0,
    deadline_s: float = 10.0,
) -> Readings:
    """Present values of `refs` ('analog-input,1', ...): one ReadProperty each, so a point the
    device refuses costs only itself, then each point's status-flags (and its reliability when
    in fault) into `conditions`. Raises BacnetError only when the device answers none."""

    async def job(app: NormalApplication) -> Readings:
        where = Address(address)
        result = Readings()
        answered = False
        for ref in refs:
            kind, number = parse_object(ref)
            try:
                value = await _within(
                    app.read_property(where, ObjectIdentifier((kind, number)), "present-value"),
                    timeout_s,
                )
            except TimeoutError:
                if not answered:
                    raise
                result.errors[ref] = f"no answer within {timeout_s:g} s"
                continue
            except (ErrorRejectAbortNack, ExecutionError) as exc:
                answered = True
                result.errors[ref] = device_words(exc)
                continue
            answered = True
            try:
                result.values[ref] = as_number(value)
            except (TypeError, ValueError) as exc:
                result.errors[ref] = f"present value {value!r}: {exc}"
                continue
            try:
                condition = await _condition(
                    app, where, ObjectIdentifier((kind, number)), timeout_s
                )
            except TimeoutError:
                continue  # its value is in; its condition is asked again next poll
            if condition != NORMAL:
                result.conditions[ref] = condition
        return result

    return _run(local, client_instance, deadline_s, job)


def _slot_value(kind: str, slot: Any) -> Value | None:
    """One entry of a priority array: None for NULL, else the value it holds."""
    choice = getattr(slot, "_choice", None)
    if choice in (None, "null"):
        return None
    return _decode(kind, getattr(slot, choice))


async def _command_state(
    app: NormalApplication, where: Address, oid: ObjectIdentifier, priority: int, timeout_s: float
) -> CommandState:
    kind = str(oid[0])
    value = await _within(app.read_property(where, oid, "present-value"), timeout_s)
    slots = await _within(app.read_property(where, oid, "priority-array"), timeout_s)
    held = [_slot_value(kind, slot) for slot in slots]
    in_force = next((index + 1 for index, slot in enumerate(held) if slot is not None), None)
    return CommandState(
        value=_decode(kind, value),
        priority=in_force,
        ours=held[priority - 1] if len(held) >= priority else None,
    )


def command_binary(
    address: str,
    ref: str,
    state: bool | None,
    *,
    priority: int = DEFAULT_PRIORITY,
    local: str,
    client_instance: int,
    timeout_s: float = 3.0,
) -> CommandState:
    """Write `state` to the point's present value at `priority` (None: relinquish, NULL there),
    then read back its present value and priority array."""
    kind, number = parse_object(ref)
    if kind not in COMMANDABLE_BINARY:
        raise ValueError(f"{ref}: only {' and '.join(COMMANDABLE_BINARY)} are commanded")
    check_priority(priority)

    async def job(app: NormalApplication) -> CommandState:
        where = Address(address)
        oid = ObjectIdentifier((kind, number))
        value = Null(()) if state is None else BinaryPV("active" if state else "inactive")
        await _within(
            app.write_property(where, oid, "present-value", value, priority=priority), timeout_s
        )
        return await _command_state(app, where, oid, priority, timeout_s)

    return _run(local, client_instance, timeout_s * 4, job)


def read_command_state(
    address: str,
    ref: str,
    *,
    priority: int = DEFAULT_PRIORITY,
    local: str,
    client_instance: int,
    timeout_s: float = 3.0,
) -> CommandState:
    kind, number = parse_object(ref)
    check_priority(priority)

    async def job(app: NormalApplication) -> CommandState:
        oid = ObjectIdentifier((kind, number))
        return await _command_state(app, Address(address), oid, priority, timeout_s)

    return _run(local, client_instance, timeout_s * 3, job)


# --- the control tick: many points of many controllers, one deadline --------------------------


@dataclass(frozen=True)
class PointCommand:
    """One commandable point as the control tick wants it: `state` at `priority` (None: our
    slot NULL). `write` False only reads it back, and rewrites it if our slot lost it (the
    controller restarted and cleared its priority array, someone wrote our slot)."""

    key: int  # the caller's id for it (an actuator id, a plant id for its analogue output)
    address: str
    ref: str
    priority: int
    state: Value | None
    write: bool = True
    timeout_s: float = 3.0  # per request to this controller


@dataclass
class PointOutcome:
    read: CommandState | None = None
    written_at: float | None = None  # unix s of the last write, None when nothing was written
    corrected: bool = False  # not planned: our slot held something else, so it was rewritten
    found: Value | None = None  # what our slot held when it had to be corrected (None: NULL)
    error: str = ""


def command_points(
    commands: list[PointCommand],
    *,
    local: str,
    client_instance: int,
    deadline_s: float,
    now: Callable[[], float],
) -> dict[int, PointOutcome]:
    """Serve `commands`: each controller's points in turn (a small controller serves one
    request at a time), the controllers side by side, all on one application and within
    `deadline_s` whole. A controller that lets one request time out is not asked again this
    time: a dead controller costs one timeout, and the others are not held up by it."""
    groups: dict[str, list[PointCommand]] = {}
    for command in commands:
        kind, _ = parse_object(command.ref)
        if kind not in COMMANDABLE:
            raise ValueError(f"{command.ref}: only {', '.join(COMMANDABLE)} are commanded")
        check_priority(command.priority)
        _encode(kind, command.state)  # a value the point cannot take: refused before sending
        groups.setdefault(command.address, []).append(command)
    outcomes = {c.key: PointOutcome() for c in commands}
    if not groups:
        return outcomes
    deadline_s = min(max(deadline_s, 0.1), MAX_DEADLINE_S)

    async def serve(app: NormalApplication, address: str, points: list[PointCommand]) -> None:
        where = Address(address)
        for index, point in enumerate(points):
            outcome = outcomes[point.key]
            try:
                await _serve_point(app, where, point, outcome, now)
            except TimeoutError:
                words = f"no answer within {point.timeout_s:g} s"
                for rest in points[index:]:
                    outcomes[rest.key].error = outcomes[rest.key].error or words
                return
            except (ErrorRejectAbortNack, ExecutionError) as exc:
                outcome.error = device_words(exc)
            except (TypeError, ValueError) as exc:  # a present value that is not binary
                outcome.error = f"answered something unusable ({exc})"

    async def job(app: NormalApplication) -> None:
        tasks = [asyncio.ensure_future(serve(app, a, p)) for a, p in groups.items()]
        done, pending = await asyncio.wait(tasks, timeout=deadline_s)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending)
        for outcome in outcomes.values():
            if outcome.read is None and not outcome.error:
                outcome.error = f"no answer within the tick's deadline ({deadline_s:g} s)"

    # The job bounds itself; _run's own deadline is a backstop a little past it.
    _run(local, client_instance, deadline_s + 1.0, job)
    return outcomes


async def _serve_point(
    app: NormalApplication,
    where: Address,
    point: PointCommand,
    outcome: PointOutcome,
    now: Callable[[], float],
) -> None:
    kind, number = parse_object(point.ref)
    oid = ObjectIdentifier((kind, number))

    async def write() -> None:
        value = _encode(kind, point.state)
        await _within(
            app.write_property(where, oid, "present-value", value, priority=point.priority),
            point.timeout_s,
        )
        outcome.written_at = now()

    if point.write:
        await write()
    read = await _command_state(app, where, oid, point.priority, point.timeout_s)
    if not point.write and not same(read.ours, point.state):
        outcome.corrected, outcome.found = True, read.ours
        await write()
        read = await _command_state(app, where, oid, point.priority, point.timeout_s)
    outcome.read = read
