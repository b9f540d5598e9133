"""A legacy boiler controller on BACnet/IP, simulated by bac-py: an implementation independent of
the bacpypes3 our client uses, so the two check each other's reading of the standard.

Runs under its own Python (bac-py needs 3.13; scripts/setup.sh makes .venv-bacnet-peer):

    .venv-bacnet-peer/bin/python tests/sensors/bacnet_controller.py --interface 127.0.0.2

Objects: analog-input 1 "Boiler flow temperature" (°C) and binary-output 1 "Boiler enable",
which the controller's own time programme holds ACTIVE at priority 16, so a write at priority 8
wins over it and relinquishing priority 8 gives the controller its point back; binary-output 2
"Hall valve", which its programme holds INACTIVE at priority 16. Prints `ready` once it listens;
stops on SIGTERM.

Loopback has no broadcast domain, so `--broadcast-to HOST:PORT` stands in for the plant LAN:
what the controller broadcasts (its I-Am) is delivered there, to the client under test, and
nowhere else. Without it the controller would send its I-Am to 255.255.255.255, off this
machine, which a test must never do.
"""

from __future__ import annotations

import argparse
import asyncio
import signal

from bac_py import BACnetApplication, DefaultServerHandlers, DeviceConfig, DeviceObject
from bac_py.objects.analog import AnalogInputObject
from bac_py.objects.binary import BinaryOutputObject
from bac_py.transport.bip import BIPTransport
from bac_py.transport.bvll import encode_bvll
from bac_py.types.enums import BinaryPV, BvlcFunction, EngineeringUnits, PropertyIdentifier


def deliver_broadcasts_to(host: str, port: int) -> None:
    """Every broadcast of this process goes to (host, port) only: the simulated LAN."""

    def send_broadcast(self: BIPTransport, npdu: bytes) -> None:
        self._transport.sendto(
            encode_bvll(BvlcFunction.ORIGINAL_BROADCAST_NPDU, npdu), (host, port)
        )

    BIPTransport.send_broadcast = send_broadcast


async def serve(args: argparse.Namespace) -> None:
    host, _, port = args.broadcast_to.rpartition(":")
    deliver_broadcasts_to(host, int(port))
    config = DeviceConfig(
        instance_number=args.instance,
        name=args.name,
        vendor_name="Independent test controller (bac-py)",
        vendor_id=999,
        interface=args.interface,
        port=args.port,
    )
    async with BACnetApplication(config) as app:
        device = DeviceObject(
            instance_number=args.instance,
            object_name=args.name,
            vendor_name="Independent test controller (bac-py)",
            vendor_identifier=999,
            description="Simulated legacy boiler controller",
        )
        app.object_db.add(device)
        app.object_db.add(
            AnalogInputObject(
                instance_number=1,
                object_name="Boiler flow temperature",
                description="Flow sensor after the boiler",
                units=EngineeringUnits.DEGREES_CELSIUS,
                present_value=args.flow,
            )
        )
        enable = BinaryOutputObject(
            instance_number=1,
            object_name="Boiler enable",
            description="Boiler enable relay",
        )
        app.object_db.add(enable)
        # The controller's own logic: its time programme says ON, at the lowest priority.
        enable.write_property(PropertyIdentifier.PRESENT_VALUE, BinaryPV.ACTIVE, priority=16)
        valve = BinaryOutputObject(
            instance_number=2, object_name="Hall valve", description="Hall radiator circuit valve"
        )
        app.object_db.add(valve)
        valve.write_property(PropertyIdentifier.PRESENT_VALUE, BinaryPV.INACTIVE, priority=16)
        DefaultServerHandlers(app, app.object_db, device).register()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        loop.add_signal_handler(signal.SIGINT, stop.set)
        print("ready", flush=True)
        await stop.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--interface", default="127.0.0.2")
    parser.add_argument("--port", type=int, default=47808)
    parser.add_argument("--instance", type=int, default=2601)
    parser.add_argument("--name", default="Boiler house controller")
    parser.add_argument("--flow", type=float, default=61.5)
    parser.add_argument("--broadcast-to", required=True, help="HOST:PORT of the client")
    asyncio.run(serve(parser.parse_args()))


if __name__ == "__main__":
    main()
