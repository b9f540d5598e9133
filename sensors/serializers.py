from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import IntegrityError, transaction
from rest_framework import serializers

from core.serializers import ModelCleanSerializer
from sensors.models import (
    BACNET_MAX_INTERVAL_S,
    BACNET_MAX_POINTS_PER_DEVICE,
    BACNET_MIN_INTERVAL_S,
    Actuator,
    BacnetDevice,
    BacnetPoint,
    ModbusBus,
    ModbusRegister,
    Node,
    Sensor,
    Site,
    node_name_validator,
)


class SiteSerializer(ModelCleanSerializer):
    class Meta:
        model = Site
        fields = ["id", "name", "slug", "latitude", "longitude", "time_zone",
                  "grid_intensity_g_per_kwh", "description", "history_budget_mb"]  # fmt: skip


class NodeSerializer(ModelCleanSerializer):
    write_key = serializers.SerializerMethodField(
        help_text="Returned once, when the node is created. Only its hash is stored."
    )

    class Meta:
        model = Node
        fields = ["id", "site", "name", "node_id", "protocol", "location", "description",
                  "interval", "enabled", "modbus_host", "modbus_port", "modbus_device_id",
                  "modbus_bus", "modbus_max_block", "created", "write_key"]  # fmt: skip
        read_only_fields = ["created"]

    def get_write_key(self, node: Node) -> str | None:
        return getattr(node, "_new_write_key", None)

    def create(self, validated_data: dict) -> Node:
        node = Node(**validated_data)
        node._new_write_key = node.set_new_key()
        node.save()
        return node


class SensorSerializer(ModelCleanSerializer):
    class Meta:
        model = Sensor
        fields = ["id", "node", "key", "name", "kind", "unit", "scale", "offset", "params",
                  "feed", "processes", "min_valid", "max_valid", "brick_class", "auto_created",
                  "created"]  # fmt: skip
        read_only_fields = ["created"]

    def validate_processes(self, steps):
        from feeds.processes.catalog import normalise_steps

        if not isinstance(steps, list):
            raise serializers.ValidationError("Must be a list of process steps.")
        # Shape here; feeds and inputs against the database in Sensor.clean().
        steps, errors = normalise_steps(steps)
        if errors:
            raise serializers.ValidationError(errors)
        return steps


class ModbusRegisterSerializer(ModelCleanSerializer):
    class Meta:
        model = ModbusRegister
        fields = ["id", "node", "key", "address", "function", "data_type", "word_order", "scale",
                  "offset"]  # fmt: skip
        # One register per key and meter is checked by ModbusRegister.clean(), which names the
        # field (`key`); DRF's own validator would only say "non_field_errors".
        validators: list = []


class ModbusBusSerializer(ModelCleanSerializer):
    class Meta:
        model = ModbusBus
        fields = ["id", "site", "name", "port", "baudrate", "parity", "stopbits", "timeout",
                  "enabled"]  # fmt: skip


class RegisterMapRequestSerializer(serializers.Serializer):
    """For the schema only: the view validates with sensors/devices/modbus_maps.py (field and row)."""

    template = serializers.CharField(
        required=False, help_text="A shipped map (GET /api/v1/modbus-register-maps), or:"
    )
    registers = serializers.ListField(
        child=serializers.DictField(),
        required=False,
        help_text="Rows {key, address, function, data_type, word_order, scale, offset, count, "
        "name, unit}; at most 200.",
    )
    max_block = serializers.IntegerField(
        required=False, help_text="Most registers per request, 1–125 (a template brings its own)."
    )


class ActuatorSerializer(ModelCleanSerializer):
    class Meta:
        model = Actuator
        fields = ["id", "site", "name", "kind", "driver", "host", "port", "device_id", "coil",
                  "node", "min_on_s", "min_off_s", "feedback_sensor", "enabled", "idle_state",
                  "description", "brick_class"]  # fmt: skip
        # The one-actuator-per-coil constraint is checked by Actuator.clean(), which names the
        # field and the actuator holding the coil; DRF's own validator would only say
        # "non_field_errors". The database constraint stays as the backstop.
        validators: list = []

    def create(self, validated_data: dict) -> Actuator:
        return self._saved(lambda: super(ActuatorSerializer, self).create(validated_data))

    def update(self, instance: Actuator, validated_data: dict) -> Actuator:
        return self._saved(lambda: super(ActuatorSerializer, self).update(instance, validated_data))

    def _saved(self, save) -> Actuator:
        """Two requests for one coil both pass clean() and the second insert hits
        the database constraint; answer it with the same 400 on `coil`, not a 500."""
        try:
            with transaction.atomic():  # a savepoint: the request's transaction stays usable
                return save()
        except IntegrityError as exc:
            fields = {}
            if self.instance is not None:
                fields = {f.attname: getattr(self.instance, f.attname) for f in Actuator._meta.concrete_fields}  # fmt: skip
            candidate = Actuator(**{**fields, **self.validated_data})
            if not candidate.same_coil().exists():
                raise  # another constraint: not ours to explain
            try:
                candidate.clean()  # words it as for the first request: who holds the coil
            except DjangoValidationError as err:
                if hasattr(err, "error_dict") and "coil" in err.message_dict:
                    raise serializers.ValidationError({"coil": err.message_dict["coil"]}) from exc
            raise serializers.ValidationError(
                {"coil": ["Another enabled actuator already drives this coil."]}
            ) from exc


class BacnetDeviceSerializer(ModelCleanSerializer):
    """A controller and the node its points' readings arrive as. `name` and `interval` are the
    node's: created with the device (as `manage.py bacnet add` does), changed with it."""

    # Written here, read from the node (to_representation): the device row has neither.
    name = serializers.CharField(
        max_length=64,
        write_only=True,
        help_text="The node's name, e.g. 'boiler-house' (letters, digits, spaces, -_.).",
    )
    interval = serializers.IntegerField(
        min_value=BACNET_MIN_INTERVAL_S,
        max_value=BACNET_MAX_INTERVAL_S,
        default=30,
        write_only=True,
        help_text=f"Seconds between polls ({BACNET_MIN_INTERVAL_S}–{BACNET_MAX_INTERVAL_S}).",
    )

    class Meta:
        model = BacnetDevice
        fields = ["id", "node", "name", "address", "device_instance", "timeout_s", "interval",
                  "vendor_name"]  # fmt: skip
        read_only_fields = ["node"]

    def to_representation(self, device: BacnetDevice) -> dict:
        data = super().to_representation(device)
        data["name"], data["interval"] = device.node.name, device.node.interval
        return data

    def validate_name(self, name: str) -> str:
        node_name_validator(name)
        clash = Node.objects.filter(name=name)
        if self.instance is not None:
            clash = clash.exclude(pk=self.instance.node_id)
        if clash.exists():
            raise serializers.ValidationError(f"A node named '{name}' exists already.")
        return name

    def create(self, validated_data: dict) -> BacnetDevice:
        from sensors.devices.bacnet_devices import add_device

        device = add_device(
            validated_data["name"],
            validated_data["address"],
            validated_data["device_instance"],
            interval=validated_data.get("interval", 30),
            vendor_name=validated_data.get("vendor_name", ""),
        )
        if "timeout_s" in validated_data:
            device.timeout_s = validated_data["timeout_s"]
            device.save(update_fields=["timeout_s"])
        return device

    @transaction.atomic
    def update(self, device: BacnetDevice, validated_data: dict) -> BacnetDevice:
        node = device.node
        node.name = validated_data.pop("name", node.name)
        node.interval = validated_data.pop("interval", node.interval)
        node.save(update_fields=["name", "interval"])
        return super().update(device, validated_data)


class BacnetPointSerializer(ModelCleanSerializer):
    """One object of a controller recorded as its node's input `key` (made from the object:
    'analog-input-1'). Its object is fixed once mapped: delete the point and add another."""

    sensor = serializers.SerializerMethodField(help_text="The input its readings arrive as.")

    class Meta:
        model = BacnetPoint
        fields = ["id", "device", "key", "object_type", "instance", "name", "units",
                  "description", "sensor"]  # fmt: skip
        read_only_fields = ["key"]
        # The object mapped once per device is checked in validate(), naming `instance`;
        # DRF's own validator would only say "non_field_errors".
        validators: list = []

    def get_sensor(self, point: BacnetPoint) -> int | None:
        if hasattr(point, "input_id"):  # annotated by the viewset's queryset
            return point.input_id
        return (
            Sensor.objects.filter(node_id=point.device.node_id, key=point.key)
            .values_list("pk", flat=True)
            .first()
        )

    def validate(self, attrs: dict) -> dict:
        if self.instance is not None:
            for name in ("device", "object_type", "instance"):
                if name in attrs and attrs[name] != getattr(self.instance, name):
                    raise serializers.ValidationError(
                        {name: "A mapped point's object is fixed: delete it and add another."}
                    )
            return super().validate(attrs)
        device, kind, instance = attrs["device"], attrs["object_type"], attrs["instance"]
        if device.points.filter(object_type=kind, instance=instance).exists():
            raise serializers.ValidationError(
                {"instance": f"{kind},{instance} is mapped on this controller already."}
            )
        if device.points.count() >= BACNET_MAX_POINTS_PER_DEVICE:
            raise serializers.ValidationError(
                {
                    "device": f"A controller is polled for at most {BACNET_MAX_POINTS_PER_DEVICE} "
                    "points."
                }  # fmt: skip
            )
        attrs["key"] = f"{kind}-{instance}"
        return super().validate(attrs)

    def create(self, validated_data: dict) -> BacnetPoint:
        from sensors.devices.bacnet_client import ObjectInfo
        from sensors.devices.bacnet_devices import map_points

        info = ObjectInfo(
            validated_data["object_type"],
            validated_data["instance"],
            name=validated_data.get("name", ""),
            units=validated_data.get("units", ""),
            description=validated_data.get("description", ""),
        )
        device = validated_data["device"]
        try:
            map_points(device, [info])  # the point and its input, as `manage.py bacnet add`
        except ValueError as exc:  # the bound, reached by a request running alongside
            raise serializers.ValidationError({"device": str(exc)}) from exc
        return device.points.get(object_type=info.object_type, instance=info.instance)
