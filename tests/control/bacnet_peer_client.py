"""An independent BACnet client (bac-py, not the bacpypes3 our server uses) that reads and
writes objects of our site's BACnet device, as a head-end on the plant LAN would.

Runs under its own Python (bac-py needs 3.13; scripts/setup.sh makes .venv-bacnet-peer):

    .venv-bacnet-peer/bin/python tests/control/bacnet_peer_client.py 127.0.0.3:47808 \
        --interface 127.0.0.2 --read analog-input,1 --write analog-value,1=25

Prints one JSON object per request: every --read first, then every --write, then every
--subscribe, whatever their order on the command line: {"read": ref, "property": ..., "value": ...} or
{"write": ref, "ok": true} or {..., "error": "<class>: <code>"}.

`--subscribe REF` (repeatable) subscribes to COV on REF (`--lifetime` s, unconfirmed), printing
{"subscribe": ref, "ok": true} or its error, then each notification as it arrives,
{"notification": ref, "value": ...}, until `--notifications` of them or `--wait` seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import json

from bac_py import Client, DeviceConfig
from bac_py.app.client import decode_cov_values
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
        if args.subscribe:
            await subscribe(client, args)


async def subscribe(client: Client, args: argparse.Namespace) -> None:
    got = asyncio.Queue()

    def on_change(notification, source) -> None:
        oid = notification.monitored_object_identifier
        ref = f"{oid.object_type.name.lower().replace('_', '-')},{oid.instance_number}"
        value = decode_cov_values(notification).get("present-value")
        got.put_nowait({"notification": ref, "value": plain(value)})

    for process_id, ref in enumerate(args.subscribe, start=1):
        kind, number = ref.split(",")
        try:
            await client.subscribe_cov_ex(
                args.server, (kind, int(number)), process_id, confirmed=False,
                lifetime=args.lifetime, callback=on_change,
            )  # fmt: skip
            out = {"subscribe": ref, "ok": True}
        except BACnetBaseError as exc:
            out = {"subscribe": ref, "error": words(exc)}
        print(json.dumps(out), flush=True)
    for _ in range(args.notifications):
        try:
            print(json.dumps(await asyncio.wait_for(got.get(), args.wait)), flush=True)
        except TimeoutError:
            return


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("server", help="HOST:PORT of our site's BACnet device")
    parser.add_argument("--interface", default="127.0.0.2")
    parser.add_argument("--instance", type=int, default=2700)
    parser.add_argument("--read", action="append", default=[], help="type,N[:property]")
    parser.add_argument("--write", action="append", default=[], help="type,N=value")
    parser.add_argument("--subscribe", action="append", default=[], help="type,N")
    parser.add_argument("--lifetime", type=int, default=60)
    parser.add_argument("--notifications", type=int, default=0)
    parser.add_argument("--wait", type=float, default=20.0)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
