"""CRUD for zones, schedules, bookings, overrides; the command audit log is read-only."""

from rest_framework import mixins, viewsets
from rest_framework.exceptions import ValidationError

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


class ZoneViewSet(viewsets.ModelViewSet):
    queryset = Zone.objects.prefetch_related("actuators")
    serializer_class = ZoneSerializer


class ScheduleViewSet(viewsets.ModelViewSet):
    queryset = Schedule.objects.prefetch_related("periods", "exceptions")
    serializer_class = ScheduleSerializer


class SchedulePeriodViewSet(viewsets.ModelViewSet):
    queryset = SchedulePeriod.objects.all()
    serializer_class = SchedulePeriodSerializer


class ScheduleExceptionViewSet(viewsets.ModelViewSet):
    queryset = ScheduleException.objects.all()
    serializer_class = ScheduleExceptionSerializer


class BookingViewSet(viewsets.ModelViewSet):
    """DELETE cancels (kept, marked who and when): the audit trail never loses a booking."""

    queryset = Booking.objects.select_related("zone")
    serializer_class = BookingSerializer
    bookers_may_write = True  # bms.permissions.GroupPermission: bookers write bookings only

    def perform_create(self, serializer) -> None:
        serializer.save(booked_by=self.request.user.get_username(), source=Booking.Source.API)

    def perform_destroy(self, instance: Booking) -> None:
        instance.cancel(by=self.request.user.get_username())


class OverrideViewSet(viewsets.ModelViewSet):
    """DELETE cancels (kept, marked who and when): the audit trail never loses an override."""

    queryset = Override.objects.select_related("actuator", "zone")
    serializer_class = OverrideSerializer

    def perform_create(self, serializer) -> None:
        serializer.save(created_by=self.request.user)

    def perform_destroy(self, instance: Override) -> None:
        instance.cancel(by=self.request.user.get_username())


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
