"""manage.py modbus_meter: create or update a Modbus meter (TCP or on an RS-485 bus) with a
shipped register map or a map file; manage.py modbus_meter --list-maps lists the shipped maps."""

from __future__ import annotations

import json
from pathlib import Path

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from sensors.devices.modbus_maps import (
    RegisterMapError,
    shipped_map,
    shipped_maps,
    validate_max_block,
)
from sensors.devices.modbus_meters import apply_register_map
from sensors.models import ModbusBus, Node

MAX_MAP_FILE_BYTES = 256 * 1024  # 200 rows fit in a fraction of this


class Command(BaseCommand):
    help = (
        "Create (or update) a Modbus meter node and set its register map from a shipped map "
        "(--map eastron-sdm630) or a JSON file of rows (--map-file). The map is checked whole "
        "before anything is saved; a bad row is named with its field."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("name", nargs="?", help="Node name, e.g. plantroom-sdm630")
        parser.add_argument("--list-maps", action="store_true", help="List the shipped maps")
        where = parser.add_mutually_exclusive_group()
        where.add_argument("--host", help="Modbus TCP: the meter's (or gateway's) address")
        where.add_argument("--bus", help="Modbus RTU: the name of its RS-485 bus (ModbusBus)")
        parser.add_argument("--port", type=int, default=502, help="Modbus TCP port (502)")
        parser.add_argument("--unit", type=int, default=1, help="Unit (device) id, 1-247")
        parser.add_argument("--interval", type=int, default=10, help="Seconds between polls")
        maps = parser.add_mutually_exclusive_group()
        maps.add_argument("--map", help="A shipped register map (see --list-maps)")
        maps.add_argument("--map-file", help='JSON: {"registers": [...], "max_block": N}')

    def handle(self, *args, **opts) -> None:
        if opts["list_maps"]:
            for name, document in shipped_maps().items():
                count = len(document["registers"])
                self.stdout.write(f"{name}: {document['title']} ({count} registers)")
            return
        if not opts["name"]:
            raise CommandError("Give the meter's name (or --list-maps).")
        rows, max_block = self._map(opts)
        with transaction.atomic():
            node = self._meter(opts)
            if rows is not None:
                try:
                    count = apply_register_map(node, rows, max_block)
                except RegisterMapError as exc:
                    row = "" if exc.row is None else f"row {exc.row}: "
                    raise CommandError(f"{row}{exc.field}: {exc.message}") from exc
                self.stdout.write(f"Register map of '{node.name}': {count} registers.")
        self.stdout.write(f"Modbus meter '{node.name}' saved (node id {node.pk}).")

    def _map(self, opts) -> tuple[list | None, int | None]:
        try:
            if opts["map"]:
                document = shipped_map(opts["map"])
                return document["registers"], document["max_block"]
            if opts["map_file"]:
                path = Path(opts["map_file"])
                if path.stat().st_size > MAX_MAP_FILE_BYTES:
                    raise CommandError(f"{path} is larger than {MAX_MAP_FILE_BYTES} bytes.")
                document = json.loads(path.read_text())
                if not isinstance(document, dict):
                    raise RegisterMapError("registers", "The file holds an object with registers.")
                max_block = document.get("max_block")
                if max_block is not None:
                    max_block = validate_max_block(max_block)
                return document.get("registers"), max_block
        except RegisterMapError as exc:
            raise CommandError(f"{exc.field}: {exc.message}") from exc
        except (OSError, ValueError) as exc:
            raise CommandError(f"Cannot read the map file: {exc}") from exc
        return None, None

    def _meter(self, opts) -> Node:
        node = Node.objects.filter(name=opts["name"]).first()
        if node is None:
            node = Node(name=opts["name"], protocol=Node.Protocol.MODBUS)
            node.set_new_key()  # a polled meter never posts; the key only satisfies the model
        elif node.protocol != Node.Protocol.MODBUS:
            raise CommandError(f"Node '{node.name}' exists and is not a Modbus meter.")
        if opts["bus"]:
            bus = ModbusBus.objects.filter(name=opts["bus"]).first()
            if bus is None:
                raise CommandError(f"No Modbus bus named '{opts['bus']}'.")
            node.modbus_bus, node.modbus_host = bus, ""
        elif opts["host"]:
            node.modbus_host, node.modbus_bus, node.modbus_port = opts["host"], None, opts["port"]
        node.modbus_device_id = opts["unit"]
        node.interval = opts["interval"]
        try:
            node.full_clean()
        except ValidationError as exc:
            field, messages = next(iter(exc.message_dict.items()))
            raise CommandError(f"{field}: {' '.join(messages)}") from exc
        node.save()
        return node
