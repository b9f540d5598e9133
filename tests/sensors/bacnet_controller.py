"""A legacy boiler controller on BACnet/IP, simulated by bac-py: an implementation independent of
the bacpypes3 our client uses, so the two check each other's reading of the standard.

Runs under its own Python (bac-py needs 3.13; scripts/setup.sh makes .venv-bacnet-peer):

    .venv-bacnet-peer/bin/python tests/sensors/bacnet_controller.py --interface 127.0.0.2

Objects: analog-input 1 "Boiler flow temperature" (°C) and binary-output 1 "Boiler enable",
which the controller's own time programme holds ACTIVE at priority 16, so a write at priority 8
wins over it and relinquishing priority 8 gives the controller its point back; binary-output 2
"Hall valve", which its programme holds INACTIVE at priority 16; analog-output 1 "Mixing
valve position" (%), which its programme holds at 20 % at priority 16; multi-state-output 1
"Heating pump command" (states 1 Off, 2 On, 3 Auto), which its programme holds at 3 (Auto) at
priority 16. Prints `ready` once it listens;
stops on SIGTERM.

It answers SubscribeCOV (bac-py's COV manager) except for the objects named by `--refuse-cov`,
which it refuses as a controller without COV support would. Its stdin stands in for the plant
and the people at the controller: one command a line, answered `ok` (or `error: ...`):

    pv analog-input,1 63.5             the sensor reads 63.5 (COV subscribers are told)
    reliability analog-input,1 over-range   the input's own fault diagnosis (no-fault-detected)
    oos analog-input,1 true            out-of-service set by hand at the controller
    write binary-output,1 active 2     a write at a priority, as a hand switch would (null: release)

Loopback has no broadcast domain, so `--broadcast-to HOST:PORT` stands in for the plant LAN:
what the controller broadcasts (its I-Am) is delivered there, to the client under test, and
nowhere else. Without it the controller would send its I-Am to 255.255.255.255, off this
machine, which a test must never do.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys

from bac_py import BACnetApplication, DefaultServerHandlers, DeviceConfig, DeviceObject
from bac_py.objects.analog import AnalogInputObject, AnalogOutputObject
from bac_py.objects.binary import BinaryOutputObject
from bac_py.objects.multistate import MultiStateOutputObject
from bac_py.services.errors import BACnetError
from bac_py.transport.bip import BIPTransport
from bac_py.transport.bvll import encode_bvll
from bac_py.types.enums import (
    BinaryPV,
    BvlcFunction,
    EngineeringUnits,
    ErrorClass,
    ErrorCode,
    ObjectType,
    PropertyIdentifier,
    Reliability,
)
from bac_py.types.primitives import ObjectIdentifier

BBMD_LAN = "127.0.0.254"  # loopback, and no one there: the BBMD's own network in the test


def deliver_broadcasts_to(host: str, port: int) -> None:
    """Every broadcast of this process goes to (host, port) only: the simulated LAN."""

    def send_broadcast(self: BIPTransport, npdu: bytes) -> None:
        self._transport.sendto(
            encode_bvll(BvlcFunction.ORIGINAL_BROADCAST_NPDU, npdu), (host, port)
        )

    BIPTransport.send_broadcast = send_broadcast


def object_id(ref: str) -> ObjectIdentifier:
    kind, _, number = ref.partition(",")
    return ObjectIdentifier(ObjectType[kind.upper().replace("-", "_")], int(number))


class Handlers(DefaultServerHandlers):
    """bac-py's handlers, with SubscribeCOV refused for the objects in `refuse_cov`."""

    refuse_cov: frozenset[ObjectIdentifier] = frozenset()

    async def handle_subscribe_cov(self, service_choice, data, source):
        from bac_py.services.cov import SubscribeCOVRequest

        if SubscribeCOVRequest.decode(data).monitored_object_identifier in self.refuse_cov:
            raise BACnetError(ErrorClass.SERVICES, ErrorCode.SERVICE_REQUEST_DENIED)
        return await super().handle_subscribe_cov(service_choice, data, source)


def plant(app: BACnetApplication, line: str) -> None:
    """One stdin command (the module's docstring): the plant or a person changes a point."""
    verb, ref, value, *rest = line.split()
    obj = app.object_db.get(object_id(ref))
    if obj is None:
        raise ValueError(f"no object {ref}")
    if verb == "pv":  # the sensor's own reading: set as the hardware would, not written
        obj._properties[PropertyIdentifier.PRESENT_VALUE] = float(value)
        changed = PropertyIdentifier.PRESENT_VALUE
    elif verb == "reliability":
        obj._properties[PropertyIdentifier.RELIABILITY] = Reliability[
            value.upper().replace("-", "_")
        ]
        changed = PropertyIdentifier.RELIABILITY
    elif verb == "oos":
        obj.write_property(PropertyIdentifier.OUT_OF_SERVICE, value == "true")
        changed = PropertyIdentifier.OUT_OF_SERVICE
    elif verb == "write":
        if value == "null":
            written = None
        elif value in ("active", "inactive"):
            written = BinaryPV[value.upper()]
        elif obj.object_identifier.object_type == ObjectType.MULTI_STATE_OUTPUT:
            written = int(value)  # a state number
        else:
            written = float(value)
        obj.write_property(PropertyIdentifier.PRESENT_VALUE, written, priority=int(rest[0]))
        changed = PropertyIdentifier.PRESENT_VALUE
    else:
        raise ValueError(f"unknown command {verb!r}")
    if app.cov_manager is not None:
        app.cov_manager.check_and_notify(obj, changed)


async def read_commands(app: BACnetApplication) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while line := (await reader.readline()).decode():
        try:
            plant(app, line)
        except Exception as exc:  # the test reads why
            print(f"error: {exc}", flush=True)
        else:
            print("ok", flush=True)


async def serve(args: argparse.Namespace) -> None:
    if args.bbmd:
        # A routed site: the controller is also its network's BBMD. Its own broadcasts go to a
        # loopback address nobody listens on (its "LAN"), and the BBMD forwards them to the
        # foreign devices registered with it, which is the only way they reach our client.
        broadcast = BBMD_LAN
    else:
        host, _, port = args.broadcast_to.rpartition(":")
        deliver_broadcasts_to(host, int(port))
        broadcast = "255.255.255.255"  # never used: deliver_broadcasts_to replaces it
    config = DeviceConfig(
        instance_number=args.instance,
        name=args.name,
        vendor_name="Independent test controller (bac-py)",
        vendor_id=999,
        interface=args.interface,
        port=args.port,
        broadcast_address=broadcast,
    )
    async with BACnetApplication(config) as app:
        if args.bbmd:
            await app._transport.attach_bbmd()  # FDT only: foreign devices, no BDT peers
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
        mixing = AnalogOutputObject(
            instance_number=1,
            object_name="Mixing valve position",
            description="Heating circuit mixing valve",
            units=EngineeringUnits.PERCENT,
        )
        app.object_db.add(mixing)
        mixing.write_property(PropertyIdentifier.PRESENT_VALUE, 20.0, priority=16)
        pump = MultiStateOutputObject(
            instance_number=1, object_name="Heating pump command", number_of_states=3,
            state_text=["Off", "On", "Auto"], description="Heating pump: Off, On or Auto",
        )  # fmt: skip
        app.object_db.add(pump)
        pump.write_property(PropertyIdentifier.PRESENT_VALUE, 3, priority=16)  # its own: Auto
        handlers = Handlers(app, app.object_db, device)
        handlers.refuse_cov = frozenset(object_id(ref) for ref in args.refuse_cov)
        handlers.register()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        loop.add_signal_handler(signal.SIGINT, stop.set)
        commands = asyncio.ensure_future(read_commands(app))
        print("ready", flush=True)
        await stop.wait()
        commands.cancel()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--interface", default="127.0.0.2")
    parser.add_argument("--port", type=int, default=47808)
    parser.add_argument("--instance", type=int, default=2601)
    parser.add_argument("--name", default="Boiler house controller")
    parser.add_argument("--flow", type=float, default=61.5)
    parser.add_argument("--bbmd", action="store_true", help="also be the network's BBMD")
    parser.add_argument("--refuse-cov", action="append", default=[], metavar="REF")
    parser.add_argument("--broadcast-to", default="", help="HOST:PORT of the client")
    asyncio.run(serve(parser.parse_args()))


if __name__ == "__main__":
    main()
