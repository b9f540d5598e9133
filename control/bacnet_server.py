"""The site as a BACnet/IP device (issue #31, server side, first slice): a head-end or another
controller on the plant LAN reads our zones as it reads any controller's points.

Objects, four per zone, the zone's id as their instance (at most MAX_ZONES zones):

    analog-input,<id>   "<zone> temperature"   °C  the zone's last reading (reliability
                                                   no-sensor and fault flag when there is none)
    analog-value,<id>   "<zone> setpoint"      °C  the target the last control tick worked to
    binary-value,<id>   "<zone> occupied"          booked or scheduled occupied now
    binary-input,<id>   "<zone> heat demand"       the zone calls for heat

Writes are refused, every one (property: write-access-denied), and logged with the writer's
address: BACnet has no authentication, and an outside setpoint or occupancy write is a command
to the plant. Enabling writes per object is not built yet (docs/BACNET.md).

Off unless BMS_BACNET_SERVER_ENABLED. It runs as its own process (`manage.py bacnet_server`):
the BACnet application runs on an asyncio loop in a thread of its own; the process's main
thread reads the database and Redis and hands plain values over (`update`), so no database
access ever happens on the network's thread.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
from dataclasses import dataclass
from typing import Any

from bacpypes3.errors import ExecutionError
from bacpypes3.ipv4.app import NormalApplication
from bacpypes3.local.analog import AnalogInputObject, AnalogValueObject
from bacpypes3.local.binary import BinaryInputObject, BinaryValueObject
from bacpypes3.local.device import DeviceObject
from bacpypes3.pdu import IPv4Address

log = logging.getLogger(__name__)

MAX_ZONES = 500  # 2,000 objects: what a head-end browses in one go, and a bound on memory
OCCUPIED_MODES = frozenset({"booking", "schedule", "optimum_stop"})


@dataclass(frozen=True)
class ZonePoint:
    """One zone as the BACnet device shows it: plain values, no Django."""

    zone_id: int
    name: str
    temperature: float | None
    setpoint: float | None
    occupied: bool
    demand: bool


def _refuse(apdu: Any, service: str) -> None:
    log.warning(
        "BACnet %s from %s refused: writes to this site are not enabled", service, apdu.pduSource
    )
    raise ExecutionError(errorClass="property", errorCode="writeAccessDenied")


class _ReadOnlyApplication(NormalApplication):
    """Answers reads and Who-Is; every write is refused before it touches an object."""

    async def do_WritePropertyRequest(self, apdu: Any) -> None:
        _refuse(apdu, "WriteProperty")

    async def do_WritePropertyMultipleRequest(self, apdu: Any) -> None:
        _refuse(apdu, "WritePropertyMultiple")


def _status(fault: bool) -> list[int]:
    return [0, 1 if fault else 0, 0, 0]  # in-alarm, fault, overridden, out-of-service


class SiteDevice:
    """The BACnet application on its own thread and loop. `start`, then `update` from any
    thread as often as the values change, `stop` at the end."""

    def __init__(self, local: str, instance: int, name: str) -> None:
        self.local, self.instance, self.name = local, instance, name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._app: _ReadOnlyApplication | None = None
        self._thread: threading.Thread | None = None
        self._objects: dict[int, tuple[Any, Any, Any, Any]] = {}
        self._ready = threading.Event()
        self._error: BaseException | None = None

    def start(self, timeout_s: float = 10.0) -> None:
        self._thread = threading.Thread(target=self._run, name="bacnet-server", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout_s):
            raise RuntimeError(f"BACnet server did not start within {timeout_s:g} s")
        if self._error is not None:
            raise RuntimeError(f"BACnet server cannot listen on {self.local}: {self._error}")

    def _run(self) -> None:
        loop = self._loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            # bacpypes3 binds its socket on the running loop: created inside it.
            self._app = loop.run_until_complete(self._create_app())
        except (OSError, ValueError) as exc:
            self._error = exc
            self._ready.set()
            loop.close()
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            self._app.close()
            loop.close()

    async def _create_app(self) -> _ReadOnlyApplication:
        device = DeviceObject(
            objectIdentifier=("device", self.instance),
            objectName=self.name,
            vendorIdentifier=999,  # ASHRAE's "no vendor id assigned"
            description="Open BMS: zones' temperatures, setpoints, occupancy and demand",
        )
        return _ReadOnlyApplication(device, IPv4Address(self.local))

    def update(self, zones: list[ZonePoint], timeout_s: float = 10.0) -> int:
        """Show `zones` (the first MAX_ZONES by id); returns how many are served."""
        if self._loop is None:
            raise RuntimeError("the BACnet server is not started")
        zones = sorted(zones, key=lambda z: z.zone_id)[:MAX_ZONES]
        future = asyncio.run_coroutine_threadsafe(self._apply(zones), self._loop)
        return future.result(timeout_s)

    async def _apply(self, zones: list[ZonePoint]) -> int:
        app = self._app
        wanted = {z.zone_id for z in zones}
        for zone_id in sorted(set(self._objects) - wanted):
            for obj in self._objects.pop(zone_id):
                app.delete_object(obj)
        for z in zones:
            if z.zone_id not in self._objects:
                self._objects[z.zone_id] = self._create(z)
                for obj in self._objects[z.zone_id]:
                    app.add_object(obj)
            temperature, setpoint, occupied, demand = self._objects[z.zone_id]
            known = z.temperature is not None and math.isfinite(z.temperature)
            temperature.presentValue = z.temperature if known else 0.0
            temperature.reliability = "noFaultDetected" if known else "noSensor"
            temperature.statusFlags = _status(not known)
            setpoint.presentValue = z.setpoint if z.setpoint is not None else 0.0
            occupied.presentValue = "active" if z.occupied else "inactive"
            demand.presentValue = "active" if z.demand else "inactive"
        return len(zones)

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


def zone_points() -> list[ZonePoint]:
    """Every zone's values as the last control tick left them (control/runtime.py) and its
    sensor's last reading: the database and Redis, read on the caller's thread."""
    from control import runtime
    from control.models import Zone
    from feeds.store import service as feed_service

    zones = list(Zone.objects.select_related("temperature_sensor").order_by("pk")[:MAX_ZONES])
    results = runtime.load_zones([z.pk for z in zones])
    feed_ids = [z.temperature_sensor.feed_id for z in zones if z.temperature_sensor_id]
    last = feed_service.last_values([f for f in feed_ids if f])
    points = []
    for z in zones:
        result = results.get(z.pk) if z.enabled else None
        feed_id = z.temperature_sensor.feed_id if z.temperature_sensor_id else None
        reading = last.get(feed_id) if feed_id else None
        points.append(
            ZonePoint(
                zone_id=z.pk,
                name=z.name,
                temperature=reading[1] if reading else None,
                setpoint=result.get("target") if result else None,
                occupied=bool(result and result.get("mode") in OCCUPIED_MODES),
                demand=bool(result and result.get("demand")),
            )
        )
    return points
