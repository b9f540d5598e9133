"""The demo site's legacy boiler controller on BACnet/IP (#31): what a site engineer finds on
the plant LAN before the old BMS is retired, so `scripts/run-site.sh` shows the integration
working. A bacpypes3 device in the simulator's own asyncio loop; no Django.

    device,<DEMO_INSTANCE>  "Old boiler house controller"
    analog-input,1          "Boiler flow temperature", °C: the simulated plant's flow, COV increment 0.1 °C
    binary-output,1         "Boiler enable", commandable; the controller's own logic holds it
                            ON at priority 16, so a write at 8 and its release show the
                            priority array at work

Its port follows the web port (demo/ports.py); off when that UDP port is taken: the demo runs on without it (the Modbus devices, by contrast,
are the plant the control loop switches, and the simulator stops without them).
"""

from __future__ import annotations

import logging
import math
from typing import Any

from bacpypes3.ipv4.app import NormalApplication
from bacpypes3.local.analog import AnalogInputObject
from bacpypes3.local.binary import BinaryOutputObject
from bacpypes3.local.device import DeviceObject
from bacpypes3.pdu import IPv4Address

log = logging.getLogger("demo")

DEMO_INSTANCE = 2701
DEMO_NODE = "old-boiler-controller"
HOST = "127.0.0.1"
# An analogue object must have a COV increment: without one, bacpypes3 compares the new value
# against None on the first change after a SubscribeCOV, and the TypeError went up through
# `publish` and stopped the simulator, and with it the whole demo site (#31).
COV_INCREMENT_C = 0.1


def _status() -> list[int]:
    return [0, 0, 0, 0]  # in-alarm, fault, overridden, out-of-service


class BoilerController:
    """Start in a running loop, `publish` the plant's flow as often as it changes, `stop`."""

    def __init__(self, host: str, port: int, instance: int = DEMO_INSTANCE) -> None:
        self.host, self.port, self.instance = host, port, instance
        self.app: NormalApplication | None = None
        self.flow: Any = None
        self.enable: Any = None

    async def start(self) -> None:
        """Made on the running loop (bacpypes3 binds there). Probe the port first (udp_free):
        bacpypes3 retries a bind that fails, in the background, for ever."""
        self.flow = AnalogInputObject(
            objectIdentifier=("analog-input", 1), objectName="Boiler flow temperature",
            presentValue=20.0, units="degreesCelsius", statusFlags=_status(), covIncrement=COV_INCREMENT_C,
            eventState="normal", outOfService=False, reliability="noFaultDetected",
            description="Flow sensor after the boiler",
        )  # fmt: skip
        self.enable = BinaryOutputObject(
            objectIdentifier=("binary-output", 1), objectName="Boiler enable",
            presentValue="active", statusFlags=_status(), eventState="normal",
            outOfService=False, polarity="normal", relinquishDefault="inactive",
            description="Boiler enable relay (its own programme holds it at priority 16)",
        )  # fmt: skip
        # Its own programme's value, set after construction so it lands in slot 16 of the
        # priority array (the constructor's presentValue would be held by no slot at all).
        self.enable.presentValue = "active"
        device = DeviceObject(
            objectIdentifier=("device", self.instance),
            objectName="Old boiler house controller",
            vendorIdentifier=999,  # ASHRAE's "no vendor id assigned"
            vendorName="Demo legacy BMS",
            modelName="Simulated boiler controller",
            description="The demo site's legacy boiler house controller",
        )
        self.app = NormalApplication(device, IPv4Address(f"{self.host}/32:{self.port}"))
        self.app.add_object(self.flow)
        self.app.add_object(self.enable)
        log.info("Demo BACnet controller (device %d) on %s:%d", self.instance, self.host, self.port)

    def publish(self, flow_c: float) -> None:
        """Set the flow's present value; bacpypes3 tells COV subscribers from inside the
        assignment. A fault in that (a subscriber's request we did not foresee) is logged and
        this value skipped: one BACnet client must not stop the demo's plant."""
        if self.flow is None or not math.isfinite(flow_c):
            return
        try:
            self.flow.presentValue = round(flow_c, 2)
        except Exception:
            log.exception("Demo BACnet controller: publishing the flow failed; it runs on")

    async def stop(self) -> None:
        if self.app is not None:
            self.app.close()
            self.app = None
            log.info("Demo BACnet controller stopped")
