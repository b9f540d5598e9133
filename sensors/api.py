"""CRUD for sites, nodes, sensors, Modbus registers, actuators; alarms (read + acknowledge)."""

from django.contrib.admin.models import CHANGE, LogEntry
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from sensors.alarms import acknowledge
from sensors.models import Actuator, Alarm, ModbusRegister, Node, Sensor, Site
from sensors.serializers import (
    ActuatorSerializer,
    AlarmSerializer,
    ModbusRegisterSerializer,
    NodeSerializer,
    SensorSerializer,
    SiteSerializer,
)


class SiteViewSet(viewsets.ModelViewSet):
    queryset = Site.objects.all()
    serializer_class = SiteSerializer


class NodeViewSet(viewsets.ModelViewSet):
    queryset = Node.objects.select_related("site")
    serializer_class = NodeSerializer

    @extend_schema(request=None, responses=NodeSerializer)
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


class SensorViewSet(viewsets.ModelViewSet):
    queryset = Sensor.objects.select_related("node", "feed")
    serializer_class = SensorSerializer


class ModbusRegisterViewSet(viewsets.ModelViewSet):
    queryset = ModbusRegister.objects.select_related("node")
    serializer_class = ModbusRegisterSerializer


class ActuatorViewSet(viewsets.ModelViewSet):
    queryset = Actuator.objects.all()
    serializer_class = ActuatorSerializer


class AlarmViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    queryset = Alarm.objects.select_related("acknowledged_by")
    serializer_class = AlarmSerializer

    @extend_schema(request=None, responses=AlarmSerializer)
    @action(detail=True, methods=["post"])
    def acknowledge(self, request, pk=None):
        alarm = self.get_object()
        acknowledge(alarm, request.user)
        return Response(self.get_serializer(alarm).data)
