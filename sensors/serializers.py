from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import IntegrityError, transaction
from rest_framework import serializers

from core.serializers import ModelCleanSerializer
from sensors.models import Actuator, ModbusBus, ModbusRegister, Node, Sensor, Site


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
                  "feed", "processes", "min_valid", "max_valid", "auto_created", "created"]  # fmt: skip
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
                  "description"]  # fmt: skip
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
