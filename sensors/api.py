"""CRUD for sites, nodes, sensors, Modbus registers, BACnet controllers and points, actuators."""

from django.contrib.admin.models import ADDITION, CHANGE, DELETION, LogEntry
from django.db import transaction
from django.db.models import OuterRef, Subquery
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from core.openapi import ENGINEERS_WRITE, STAFF_READ, document_viewset
from sensors.models import (
    Actuator,
    BacnetDevice,
    BacnetPoint,
    ModbusBus,
    ModbusRegister,
    Node,
    Sensor,
    Site,
)
from sensors.serializers import (
    ActuatorSerializer,
    BacnetDeviceSerializer,
    BacnetPointSerializer,
    ModbusBusSerializer,
    ModbusRegisterSerializer,
    NodeSerializer,
    RegisterMapRequestSerializer,
    SensorSerializer,
    SiteSerializer,
)


@document_viewset("sites", "site", "sites")
class SiteViewSet(viewsets.ModelViewSet):
    queryset = Site.objects.all()
    serializer_class = SiteSerializer

    @extend_schema(
        request=None,
        responses=OpenApiTypes.OBJECT,
        tags=["sites"],
        summary="A site's history budget and its use",
        description="Bytes of feed data the site's history (readings older than its nodes' "
        'first) has added, and the budget bounding it (docs/INGEST.md, "History"). '
        "Engineers raise it with PATCH on the site (`history_budget_mb`). " + STAFF_READ,
    )
    @action(detail=True, methods=["get"], url_path="history-budget")
    def history_budget(self, request, pk=None):
        from sensors.ingest.history_budget import usage  # the ingest path, not every API import

        return Response(usage(self.get_object()))


@document_viewset(
    "nodes",
    "node",
    "nodes",
    create={"description": "The answer holds `write_key` once; it is stored only as a hash."},
)
class NodeViewSet(viewsets.ModelViewSet):
    queryset = Node.objects.select_related("site")
    serializer_class = NodeSerializer

    @extend_schema(
        request=None,
        responses=NodeSerializer,
        tags=["nodes"],
        summary="Rotate a node's write key",
        description="Issues a new write key (in `write_key`, shown once); the old one stops "
        "working at once. The admin history names who rotated it. " + ENGINEERS_WRITE,
    )
    @action(detail=True, methods=["post"], url_path="rotate-key")
    def rotate_key(self, request, pk=None):
        """Issue a new write key; the old one stops working at once."""
        node = self.get_object()
        node._new_write_key = node.set_new_key()
        node.save(update_fields=["key_prefix", "key_hash"])
        # The admin's history names who rotated a key, whichever way it was done.
        LogEntry.objects.log_actions(
            request.user.pk, [node], CHANGE, change_message="Rotated the write key (API)."
        )
        return Response(self.get_serializer(node).data)

    @extend_schema(
        request=None,
        responses=OpenApiTypes.OBJECT,
        tags=["nodes"],
        summary="A node's input errors",
        description="Values of the node's accepted batches not stored as sent "
        "(docs/INGEST.md), each count in its own word: `skipped` (not stored or not counted), "
        "`processed_late` (older than a reading a step had processed, processed after all, as "
        "emoncms does), `duplicates` (a resent reading a step had counted already, passed by); "
        "`text` says them as the staff pages do, `last` the newest, `at` when (unix seconds, "
        "null if never). " + STAFF_READ,
    )
    @action(detail=True, methods=["get"], url_path="input-errors")
    def input_error_counts(self, request, pk=None):
        from sensors.ingest import input_errors  # the ingest path, not every API import

        node = self.get_object()
        return Response(
            input_errors.as_json(input_errors.summary(input_errors.node_subject(node.pk)))
        )

    @extend_schema(
        request=RegisterMapRequestSerializer,
        responses={200: OpenApiTypes.OBJECT, 400: OpenApiTypes.OBJECT},
        tags=["sensors"],
        summary="Set a Modbus meter's register map",
        description="Replaces the node's register map with a shipped template "
        '(`{"template": "eastron-sdm630"}`) or with `registers` rows, and gives each register '
        "an input (name, unit). The map is checked whole first: address 0–65535 with the "
        "registers its type takes, a `count` matching the type, a known word order "
        "(ABCD, BADC, CDAB, DCBA), unique keys, at most 200 rows; a bad one is a 400 "
        "`{error, field, row}` and nothing changes. " + ENGINEERS_WRITE,
    )
    @action(detail=True, methods=["post"], url_path="register-map")
    def register_map(self, request, pk=None):
        from sensors.devices.modbus_maps import RegisterMapError, shipped_map, validate_max_block
        from sensors.devices.modbus_meters import apply_register_map

        node = self.get_object()
        body = request.data if isinstance(request.data, dict) else {}
        try:
            if "template" in body:
                template = shipped_map(body["template"])
                rows, max_block = template["registers"], template["max_block"]
            elif "registers" in body:
                rows = body["registers"]
                max_block = validate_max_block(body["max_block"]) if "max_block" in body else None
            else:
                raise RegisterMapError("registers", "Give a template or registers.")
            count = apply_register_map(node, rows, max_block)
        except RegisterMapError as exc:
            return Response(exc.as_dict(), status=400)
        LogEntry.objects.log_actions(
            request.user.pk,
            [node],
            CHANGE,
            change_message=f"Set its register map ({count} rows, API).",
        )
        node.refresh_from_db()
        return Response({"registers": count, "modbus_max_block": node.modbus_max_block})


@document_viewset("sensors", "sensor", "sensors")
class SensorViewSet(viewsets.ModelViewSet):
    queryset = Sensor.objects.select_related("node", "feed")
    serializer_class = SensorSerializer


@document_viewset("sensors", "Modbus register", "Modbus registers")
class ModbusRegisterViewSet(viewsets.ModelViewSet):
    queryset = ModbusRegister.objects.select_related("node")
    serializer_class = ModbusRegisterSerializer


@document_viewset("sensors", "Modbus RS-485 bus", "Modbus RS-485 buses")
class ModbusBusViewSet(viewsets.ModelViewSet):
    queryset = ModbusBus.objects.all()
    serializer_class = ModbusBusSerializer


class ModbusRegisterMapViewSet(viewsets.ViewSet):
    """The register maps shipped as data (sensors/devices/meter_maps/)."""

    @extend_schema(
        tags=["sensors"],
        summary="List the shipped Modbus register maps",
        description="Each map: name, title, source of its addresses, max_block, suggested "
        "serial settings and registers. " + STAFF_READ,
        responses=OpenApiTypes.OBJECT,
    )
    def list(self, request):
        from sensors.devices.modbus_maps import shipped_maps

        return Response(list(shipped_maps().values()))


@document_viewset("control", "actuator", "actuators")
class ActuatorViewSet(viewsets.ModelViewSet):
    queryset = Actuator.objects.all()
    serializer_class = ActuatorSerializer


@document_viewset(
    "sensors",
    "BACnet controller",
    "BACnet controllers",
    create={
        "description": "Creates the node its points' readings arrive as (`name`, polled every "
        "`interval` s), as `manage.py bacnet add` does."
    },
)
class BacnetDeviceViewSet(viewsets.ModelViewSet):
    queryset = BacnetDevice.objects.select_related("node")
    serializer_class = BacnetDeviceSerializer

    # Each change is kept in the controller's admin history (who, when, what), as the staff
    # page's are: the admin shows controllers read-only, so its History is where all are seen.
    @transaction.atomic
    def perform_create(self, serializer) -> None:
        device = serializer.save()
        _log_bacnet(
            self.request, device, ADDITION,
            f"Added device {device.device_instance} at {device.address}, polled every "
            f"{device.node.interval} s, timeout {device.timeout_s} s (API).",
        )  # fmt: skip

    @transaction.atomic
    def perform_update(self, serializer) -> None:
        before = _device_settings(serializer.instance)
        device = serializer.save()
        changes = _changes(before, _device_settings(device))
        if changes:  # a change that changes nothing records nothing
            _log_bacnet(self.request, device, CHANGE, changes)

    @transaction.atomic
    def perform_destroy(self, instance: BacnetDevice) -> None:
        # Logged first: the entry names the row, which the history keeps once it is gone.
        _log_bacnet(
            self.request, instance, DELETION,
            f"Deleted device {instance.device_instance} at {instance.address}; its node "
            f"'{instance.node.name}' and inputs kept (API).",
        )  # fmt: skip
        instance.delete()

    @extend_schema(
        request=None,
        responses=OpenApiTypes.OBJECT,
        tags=["sensors"],
        summary="What we last read from a BACnet controller",
        description="`answering`, `answered_at` (unix s of its last answer), `failing_since` "
        "(its first unanswered poll since) and `error` (the last failure, in plain words); "
        "per mapped point its last `value` and `time` (null until first read). " + STAFF_READ,
    )
    @action(detail=True, methods=["get"], url_path="last-read")
    def last_read(self, request, pk=None):
        from sensors.devices.bacnet_status import last_read

        device = self.get_object()
        return Response(last_read([device])[0].as_dict())


@document_viewset("sensors", "BACnet point", "BACnet points")
class BacnetPointViewSet(viewsets.ModelViewSet):
    # Each point's input id in the same query: a page of 100 points was 100 more queries.
    queryset = BacnetPoint.objects.select_related("device").annotate(
        input_id=Subquery(
            Sensor.objects.filter(node_id=OuterRef("device__node_id"), key=OuterRef("key")).values(
                "pk"
            )[:1]
        )
    )
    serializer_class = BacnetPointSerializer

    # A point's changes go to its controller's admin history, as an admin inline's would.
    @transaction.atomic
    def perform_create(self, serializer) -> None:
        point = serializer.save()
        _log_bacnet(self.request, point.device, CHANGE,
                    f"Added point {_ref(point)} '{point.name}' (API).")  # fmt: skip

    @transaction.atomic
    def perform_update(self, serializer) -> None:
        before = _point_settings(serializer.instance)
        point = serializer.save()
        changes = _changes(before, _point_settings(point), f"point {_ref(point)}: ")
        if changes:
            _log_bacnet(self.request, point.device, CHANGE, changes)

    @transaction.atomic
    def perform_destroy(self, instance: BacnetPoint) -> None:
        _log_bacnet(self.request, instance.device, CHANGE,
                    f"Deleted point {_ref(instance)}; its input kept (API).")  # fmt: skip
        instance.delete()


def _log_bacnet(request, device: BacnetDevice, action_flag: int, message: str) -> None:
    LogEntry.objects.log_actions(request.user.pk, [device], action_flag, change_message=message)


def _device_settings(device: BacnetDevice) -> dict[str, object]:
    return {
        "name": device.node.name,
        "address": device.address,
        "device_instance": device.device_instance,
        "timeout_s": device.timeout_s,
        "interval": device.node.interval,
        "vendor_name": device.vendor_name,
    }


def _point_settings(point: BacnetPoint) -> dict[str, object]:
    return {"name": point.name, "units": point.units, "description": point.description}


def _ref(point: BacnetPoint) -> str:
    return f"{point.object_type},{point.instance}"


def _changes(before: dict[str, object], after: dict[str, object], what: str = "") -> str:
    """ "Changed address 192.0.2.40 → 192.0.2.41, interval 30 → 5 (API)." in the history;
    "" when nothing changed (a PATCH of the same values, or of read-only `node`), which is
    not kept: a history of "No fields changed" told nobody anything (#31)."""
    changed = [f"{k} {before[k]!s} → {after[k]!s}" for k in before if before[k] != after[k]]
    return f"Changed {what}{', '.join(changed)} (API)." if changed else ""
