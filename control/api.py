"""CRUD for zones, schedules, bookings, overrides; the command audit log is read-only."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter
from rest_framework import mixins, viewsets
from rest_framework.exceptions import ValidationError

from bms.openapi import BOOKERS_WRITE, document_viewset
from control.models import (
    ActuatorCommand,
    Booking,
    Override,
    Schedule,
    ScheduleException,
    SchedulePeriod,
    Zone,
)
from control.serializers import (
    ActuatorCommandSerializer,
    BookingSerializer,
    OverrideSerializer,
    ScheduleExceptionSerializer,
    SchedulePeriodSerializer,
    ScheduleSerializer,
    ZoneSerializer,
)


@document_viewset("control", "zone", "zones")
class ZoneViewSet(viewsets.ModelViewSet):
    queryset = Zone.objects.prefetch_related("actuators")
    serializer_class = ZoneSerializer


@document_viewset("control", "weekly schedule", "weekly schedules")
class ScheduleViewSet(viewsets.ModelViewSet):
    queryset = Schedule.objects.prefetch_related("periods", "exceptions")
    serializer_class = ScheduleSerializer


@document_viewset("control", "schedule period", "schedule periods")
class SchedulePeriodViewSet(viewsets.ModelViewSet):
    queryset = SchedulePeriod.objects.all()
    serializer_class = SchedulePeriodSerializer


@document_viewset(
    "control",
    "schedule exception",
    "schedule exceptions (holidays)",
)
class ScheduleExceptionViewSet(viewsets.ModelViewSet):
    queryset = ScheduleException.objects.all()
    serializer_class = ScheduleExceptionSerializer


BOOKING = {"zone": 3, "title": "Yoga", "start": "2030-01-07T10:00:00Z",
           "end": "2030-01-07T12:00:00Z", "setpoint": 20.0}  # fmt: skip
BOOKED = {**BOOKING, "id": 12, "booked_by": "booker", "source": "api", "ical_uid": "",
          "cancelled": False, "cancelled_at": None, "cancelled_by": "",
          "created": "2030-01-01T09:00:00Z"}  # fmt: skip


@document_viewset(
    "bookings",
    "booking",
    "bookings",
    write=BOOKERS_WRITE,
    about="A booking ends after it starts, lasts at most BMS_BOOKING_MAX_DAYS, has a setpoint "
    "of 5-30 °C (if any) and does not overlap another booking of the zone; each refusal is a "
    "400 naming the field. `booked_by`, `source` and `cancelled*` are set by the server.",
    create={
        "examples": [
            OpenApiExample("book a room", value=BOOKING, request_only=True),
            OpenApiExample("booked", value=BOOKED, response_only=True, status_codes=["201"]),
            OpenApiExample(
                "clash",
                value={"success": False, "error": "start: clashes with 'Choir'",
                       "fields": {"start": ["clashes with 'Choir'"]}},
                response_only=True,
                status_codes=["400"],
            ),
        ]
    },
    destroy={
        "summary": "Cancel a booking",
        "description": "The booking is kept, marked cancelled with who and when; control "
        "ignores it. Also for iCal bookings (the next sync keeps it cancelled).",
    },
)  # fmt: skip
class BookingViewSet(viewsets.ModelViewSet):
    """DELETE cancels (kept, marked who and when): the audit trail never loses a booking."""

    queryset = Booking.objects.select_related("zone")
    serializer_class = BookingSerializer
    bookers_may_write = True  # bms.permissions.GroupPermission: bookers write bookings only

    def perform_create(self, serializer) -> None:
        serializer.save(booked_by=self.request.user.get_username(), source=Booking.Source.API)

    def perform_destroy(self, instance: Booking) -> None:
        instance.cancel(by=self.request.user.get_username())


OVERRIDE = {"actuator": 4, "state": True, "expires": "2030-01-07T18:00:00Z",
            "reason": "Boiler service test"}  # fmt: skip


@document_viewset(
    "overrides",
    "override",
    "overrides",
    about="A manual override: an actuator (or a zone) forced on or off until `expires`. "
    "`created_by` and `cancelled*` are set by the server.",
    create={
        "examples": [
            OpenApiExample("force a boiler on", value=OVERRIDE, request_only=True),
            OpenApiExample(
                "created",
                value={**OVERRIDE, "id": 5, "zone": None, "starts": "2030-01-07T14:00:00Z",
                       "created_by": 2, "cancelled": False, "cancelled_at": None,
                       "cancelled_by": "", "created": "2030-01-07T14:00:00Z"},
                response_only=True,
                status_codes=["201"],
            ),
        ]
    },
    destroy={
        "summary": "Cancel an override",
        "description": "The override is kept, marked cancelled with who and when; control "
        "returns to the schedule at its next tick.",
    },
)  # fmt: skip
class OverrideViewSet(viewsets.ModelViewSet):
    """DELETE cancels (kept, marked who and when): the audit trail never loses an override."""

    queryset = Override.objects.select_related("actuator", "zone")
    serializer_class = OverrideSerializer

    def perform_create(self, serializer) -> None:
        serializer.save(created_by=self.request.user)

    def perform_destroy(self, instance: Override) -> None:
        instance.cancel(by=self.request.user.get_username())


@document_viewset(
    "control",
    "actuator command",
    "actuator commands (the audit log)",
    about="Every command sent to an actuator, why, and what it answered. Never edited.",
    list={
        "parameters": [
            OpenApiParameter("actuator", OpenApiTypes.INT, description="only this actuator"),
            OpenApiParameter("strategy", OpenApiTypes.STR,
                             description="only this strategy, e.g. frost_protection"),
        ]
    },
)  # fmt: skip
class ActuatorCommandViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet
):
    """The audit log: every command, why, and what the relay answered. Never edited."""

    queryset = ActuatorCommand.objects.select_related("actuator", "user")
    serializer_class = ActuatorCommandSerializer

    def get_queryset(self):
        """`?actuator=<id>` and `?strategy=<name>` narrow the log (issue #15.8: they were
        ignored, so a client asking for one relay's history got everyone's)."""
        queryset = super().get_queryset()
        params = self.request.query_params
        if "actuator" in params:
            raw = params["actuator"]
            if not raw.isascii() or not raw.isdigit() or len(raw) > 18:
                raise ValidationError({"actuator": "Must be an actuator id (a whole number)."})
            queryset = queryset.filter(actuator_id=int(raw))
        if "strategy" in params:
            strategy = params["strategy"]
            limit = ActuatorCommand._meta.get_field("strategy").max_length
            if not strategy or len(strategy) > limit:
                raise ValidationError(
                    {"strategy": f"Must be a strategy name of 1–{limit} characters."}
                )
            queryset = queryset.filter(strategy=strategy)
        return queryset
