"""manage.py bacnet: find BACnet/IP controllers, list their points, and record chosen points.

manage.py bacnet discover [--target 192.168.1.255] [--low 1 --high 5000]
manage.py bacnet browse 192.168.1.40 2601
manage.py bacnet add boiler-house 192.168.1.40 2601 --point analog-input,1 [--interval 30]
manage.py bacnet poll boiler-house
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from sensors.devices import bacnet_client
from sensors.devices.bacnet_client import BacnetError
from sensors.devices.bacnet_devices import (
    add_device,
    check_device,
    client_instance,
    local_address,
    map_points,
    poll_device,
)
from sensors.models import BACNET_MAX_POINTS_PER_DEVICE, BacnetDevice


class Command(BaseCommand):
    help = "Discover BACnet/IP controllers, browse their objects, map points to inputs, poll."

    def add_arguments(self, parser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        discover = sub.add_parser("discover", help="Who-Is; lists the devices that answer I-Am")
        discover.add_argument(
            "--target", help="An address or a directed broadcast (default: local broadcast)"
        )
        discover.add_argument("--low", type=int, help="Lowest device instance")
        discover.add_argument("--high", type=int, help="Highest device instance")
        discover.add_argument("--wait", type=float, default=3.0, help="Seconds to listen (≤30)")
        discover.add_argument(
            "--bbmd",
            help="Register as a foreign device with this BBMD first (a routed site; default "
            "BMS_BACNET_BBMD)",
        )
        browse = sub.add_parser("browse", help="A device's objects: names, units, descriptions")
        browse.add_argument("address")
        browse.add_argument("instance", type=int)
        add = sub.add_parser("add", help="Record a controller and map points to its inputs")
        add.add_argument("name", help="Node name, e.g. boiler-house")
        add.add_argument("address")
        add.add_argument("instance", type=int)
        add.add_argument(
            "--point", action="append", default=[], help="An object to record: analog-input,1"
        )
        add.add_argument("--interval", type=int, default=30, help="Seconds between polls (5-86400)")
        poll = sub.add_parser("poll", help="Read a recorded controller's points once, now")
        poll.add_argument("name")

    def handle(self, *args, **opts) -> None:
        try:
            getattr(self, f"_{opts['action']}")(opts)
        except BacnetError as exc:
            raise CommandError(f"The controller did not answer as expected: {exc}") from exc
        except ValueError as exc:
            raise CommandError(str(exc)) from exc

    def _discover(self, opts) -> None:
        found = bacnet_client.discover(
            opts["target"],
            low=opts["low"],
            high=opts["high"],
            local=local_address(settings.BMS_BACNET_PORT),
            client_instance=client_instance(),
            wait_s=opts["wait"],
            bbmd=opts["bbmd"] or settings.BMS_BACNET_BBMD or None,
            ttl_s=settings.BMS_BACNET_BBMD_TTL_S,
        )
        for device in found:
            self.stdout.write(
                f"device {device.instance} at {device.address} (vendor id {device.vendor_id})"
            )
        self.stdout.write(f"{len(found)} device(s) answered.")

    def _browse_objects(self, address: str, instance: int) -> bacnet_client.Browse:
        return bacnet_client.browse(
            address, instance, local=local_address(), client_instance=client_instance()
        )

    def _browse(self, opts) -> None:
        found = self._browse_objects(opts["address"], opts["instance"])
        self.stdout.write(f"{found.device_name} ({found.vendor_name}) {found.model_name}".rstrip())
        for o in found.objects:
            units = f" [{o.units}]" if o.units else ""
            about = f" — {o.description}" if o.description else ""
            self.stdout.write(f"  {o.ref}  {o.name}{units}{about}")
        if found.truncated:
            self.stdout.write(f"  ... and {found.truncated} more objects not read")

    def _add(self, opts) -> None:
        wanted = [bacnet_client.parse_object(ref) for ref in opts["point"]]
        if len(wanted) > BACNET_MAX_POINTS_PER_DEVICE:
            raise CommandError(f"At most {BACNET_MAX_POINTS_PER_DEVICE} points per controller.")
        try:  # refused before the network is asked: a browse can take its whole timeout
            check_device(opts["name"], opts["address"], opts["instance"], interval=opts["interval"])
        except ValidationError as exc:
            field, messages = next(iter(exc.message_dict.items()))
            raise CommandError(f"{field}: {' '.join(messages)}") from exc
        found = self._browse_objects(opts["address"], opts["instance"])
        by_ref = {(o.object_type, o.instance): o for o in found.objects}
        missing = [f"{k},{i}" for k, i in wanted if (k, i) not in by_ref]
        if missing:
            raise CommandError(f"The controller has no {', '.join(missing)}.")
        try:
            device = add_device(
                opts["name"],
                opts["address"],
                opts["instance"],
                interval=opts["interval"],
                vendor_name=found.vendor_name,
            )
        except ValidationError as exc:
            field, messages = next(iter(exc.message_dict.items()))
            raise CommandError(f"{field}: {' '.join(messages)}") from exc
        points = map_points(device, [by_ref[w] for w in wanted])
        for p in points:
            self.stdout.write(f"  {p.ref} '{p.name}' -> input {p.key}")
        self.stdout.write(
            f"BACnet controller '{opts['name']}' saved (node id {device.node_id}, "
            f"{len(points)} points, polled every {device.node.interval} s)."
        )

    def _poll(self, opts) -> None:
        device = BacnetDevice.objects.select_related("node").filter(node__name=opts["name"]).first()
        if device is None:
            raise CommandError(f"No BACnet controller named '{opts['name']}'.")
        report = poll_device(device)
        for key, value in report.get("values", {}).items():
            self.stdout.write(f"  {key} = {value:g}")
        for ref, error in report.get("errors", {}).items():
            self.stdout.write(f"  {ref}: {error}")
        if "error" in report:
            raise CommandError(report["error"])
