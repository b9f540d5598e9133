"""An independent BACnet client (bac-py, not the bacpypes3 our server uses) that reads and
writes objects of our site's BACnet device, as a head-end on the plant LAN would.

Runs under its own Python (bac-py needs 3.13; scripts/setup.sh makes .venv-bacnet-peer):

    .venv-bacnet-peer/bin/python tests/control/bacnet_peer_client.py 127.0.0.3:47808 \
        --interface 127.0.0.2 --read analog-input,1 --write analog-value,1=25

Prints one JSON object per request, in order: {"read": ref, "property": ..., "value": ...} or
{"write": ref, "ok": true} or {..., "error": "<class>: <code>"}.
"""

from __future__ import annotations

import argparse
import asyncio
import json

from bac_py import Client, DeviceConfig
from bac_py.services.errors import BACnetBaseError


def words(exc: BACnetBaseError) -> str:
    error_class = getattr(exc, "error_class", None)
    error_code = getattr(exc, "error_code", None)
    if error_class is not None and error_code is not None:
        return f"{error_class.name.lower()}: {error_code.name.lower()}"
    return f"{type(exc).__name__}: {exc}"


def plain(value: object) -> object:
    if isinstance(value, (int, float, str, bool)) or value is None:
        return value
    return str(value)


async def run(args: argparse.Namespace) -> None:
    config = DeviceConfig(instance_number=args.instance, interface=args.interface, port=0)
    async with Client(config) as client:
        for spec in args.read:
            ref, _, prop = spec.partition(":")
            kind, number = ref.split(",")
            try:
                value = await client.read(args.server, (kind, int(number)), prop or "pv")
                out = {"read": ref, "property": prop or "pv", "value": plain(value)}
            except BACnetBaseError as exc:
                out = {"read": ref, "property": prop or "pv", "error": words(exc)}
            print(json.dumps(out), flush=True)
        for spec in args.write:
            ref, _, text = spec.partition("=")
            kind, number = ref.split(",")
            try:
                await client.write(args.server, (kind, int(number)), "pv", float(text))
                out = {"write": ref, "ok": True}
            except BACnetBaseError as exc:
                out = {"write": ref, "error": words(exc)}
            print(json.dumps(out), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("server", help="HOST:PORT of our site's BACnet device")
    parser.add_argument("--interface", default="127.0.0.2")
    parser.add_argument("--instance", type=int, default=2700)
    parser.add_argument("--read", action="append", default=[], help="type,N[:property]")
    parser.add_argument("--write", action="append", default=[], help="type,N=value")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
