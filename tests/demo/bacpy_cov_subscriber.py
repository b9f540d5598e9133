"""An independent BACnet client (bac-py, as any BMS on the plant LAN could be) that subscribes to
one object's COV and prints what it is told, for tests/demo/test_bacnet_demo.py. Runs under
.venv-bacnet-peer's Python (bac-py needs 3.13):

    .venv-bacnet-peer/bin/python tests/demo/bacpy_cov_subscriber.py \
        --interface 127.0.0.3 --to 127.0.0.2:47820 --object analog-input,1

Prints `subscribed` once the controller acknowledged, then `pv VALUE` for each notification's
present value; `error: ...` and exit status 1 when the subscription is refused or unanswered.
Stops on SIGTERM or when stdin closes.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys

from bac_py import BACnetApplication, DeviceConfig
from bac_py.app.client import BACnetClient
from bac_py.encoding.primitives import decode_and_unwrap
from bac_py.network.address import parse_address
from bac_py.types.enums import ObjectType, PropertyIdentifier
from bac_py.types.primitives import ObjectIdentifier

PROCESS_ID = 17


def object_id(ref: str) -> ObjectIdentifier:
    kind, _, number = ref.partition(",")
    return ObjectIdentifier(ObjectType[kind.upper().replace("-", "_")], int(number))


def on_notification(notification, source) -> None:
    for value in notification.list_of_values:
        if value.property_identifier == PropertyIdentifier.PRESENT_VALUE:
            print(f"pv {decode_and_unwrap(value.value)}", flush=True)


async def run(args: argparse.Namespace) -> int:
    config = DeviceConfig(
        instance_number=4194100, name="Independent COV subscriber (bac-py)", vendor_id=999,
        interface=args.interface, port=0, broadcast_address="127.255.255.254",
    )  # fmt: skip
    async with BACnetApplication(config) as app:
        app.register_cov_callback(PROCESS_ID, on_notification)
        try:
            await BACnetClient(app).subscribe_cov(
                parse_address(args.to), object_id(args.object), PROCESS_ID,
                confirmed=False, lifetime=120, timeout=5,
            )  # fmt: skip
        except Exception as exc:  # the test reads why
            print(f"error: {type(exc).__name__}: {exc}", flush=True)
            return 1
        print("subscribed", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        reader = asyncio.StreamReader()
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        eof = asyncio.ensure_future(reader.read())
        await asyncio.wait([eof, asyncio.ensure_future(stop.wait())],
                           return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
        eof.cancel()
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--interface", default="127.0.0.3")
    parser.add_argument("--to", required=True, help="HOST:PORT of the controller")
    parser.add_argument("--object", required=True, help="e.g. analog-input,1")
    sys.exit(asyncio.run(run(parser.parse_args())))


if __name__ == "__main__":
    main()
