"""Alarms over the API: read, and acknowledge (who and when kept); never edited."""

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import mixins, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from alarms.lifecycle import acknowledge
from alarms.models import Alarm
from alarms.serializers import AlarmSerializer
from core.openapi import ENGINEERS_WRITE, document_viewset


@document_viewset(
    "alarms",
    "alarm",
    "alarms",
    list={"description": "Open alarms have `cleared_at: null`."},
)
class AlarmViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    queryset = Alarm.objects.select_related("acknowledged_by")
    serializer_class = AlarmSerializer

    @extend_schema(
        request=None,
        responses=AlarmSerializer,
        tags=["alarms"],
        summary="Acknowledge an alarm",
        description="Marks the alarm acknowledged by the caller (who and when are kept); the "
        "alarm itself is never edited. Acknowledging again changes nothing. " + ENGINEERS_WRITE,
        examples=[
            OpenApiExample(
                "acknowledged",
                value={
                    "id": 7,
                    "key": "node-silent:7",
                    "severity": "warning",
                    "source": "node",
                    "message": "Node 'emontx-pv' has not posted for 3 intervals",
                    "raised_at": "2030-01-07T09:40:00Z",
                    "acknowledged_at": "2030-01-07T10:02:00Z",
                    "acknowledged_by": 3,
                    "cleared_at": None,
                },
                response_only=True,
            )
        ],
    )
    @action(detail=True, methods=["post"])
    def acknowledge(self, request, pk=None):
        alarm = self.get_object()
        acknowledge(alarm, request.user)
        return Response(self.get_serializer(alarm).data)
