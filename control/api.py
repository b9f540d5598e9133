"""CRUD for zones, schedules, bookings, overrides; the command audit log is read-only."""

from django.db import transaction
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter
from rest_framework import mixins, viewsets
from rest_framework.exceptions import ValidationError

from control import bookings, holds
from control.audited import AuditedViewSetMixin
from control.change_audit import API_REASON, record_zone_bacnet, zone_bacnet
from control.models import (
    ActuatorCommand,
    AnalogueCommand,
    Booking,
    HeatingPlant,
    HeatMain,
    HeatSource,
    OutputOverride,
    Override,
    RelayBoard,
    Schedule,
    ScheduleException,
    SchedulePeriod,
    SolarCircuit,
    ThermalStore,
    WeatherCompensation,
    Zone,
)
from control.serializers import (
    ActuatorCommandSerializer,
    AnalogueCommandSerializer,
    BookingSerializer,
    HeatingPlantSerializer,
    HeatMainSerializer,
    HeatSourceSerializer,
    OutputOverrideSerializer,
    OverrideSerializer,
    RelayBoardSerializer,
    ScheduleExceptionSerializer,
    SchedulePeriodSerializer,
    ScheduleSerializer,
    SolarCircuitSerializer,
    ThermalStoreSerializer,
    WeatherCompensationSerializer,
    ZoneSerializer,
)
from core.openapi import BOOKERS_WRITE, document_viewset
from core.serializers import model_errors_as_api_errors


@document_viewset("control", "zone", "zones")
class ZoneViewSet(viewsets.ModelViewSet):
    queryset = Zone.objects.prefetch_related("actuators")
    serializer_class = ZoneSerializer

    # Enabling BACnet writes opens the zone to an unauthenticated network: who did it is kept
    # in the change history (control/change_audit.py), as a plant's programme changes are.
    def perform_create(self, serializer) -> None:
        with transaction.atomic():
            super().perform_create(serializer)
            record_zone_bacnet(self.request.user, serializer.instance, zone_bacnet(None),
                               API_REASON)  # fmt: skip

    def perform_update(self, serializer) -> None:
        before = zone_bacnet(serializer.instance)
        with transaction.atomic():
            super().perform_update(serializer)
            record_zone_bacnet(self.request.user, serializer.instance, before, API_REASON)


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


def _changed(serializer):
    """The serializer's instance with its validated changes applied, unsaved: what its
    update() would save, handed to the object's one write path instead (none of these models
    has a many-to-many field)."""
    instance = serializer.instance
    for name, value in serializer.validated_data.items():
        setattr(instance, name, value)
    return instance


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
    bookers_may_write = True  # core.permissions.GroupPermission: bookers write bookings only

    def perform_create(self, serializer) -> None:
        booking = Booking(**serializer.validated_data)
        with model_errors_as_api_errors():
            serializer.instance = bookings.book(booking, self.request.user, Booking.Source.API)

    def perform_update(self, serializer) -> None:
        # Who moved it, as on the staff page and in the admin (docs/CONTROL.md).
        booking = _changed(serializer)
        with model_errors_as_api_errors():
            serializer.instance = bookings.move(booking, self.request.user)

    def perform_destroy(self, instance: Booking) -> None:
        bookings.cancel(instance, self.request.user)


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
        with model_errors_as_api_errors():
            serializer.instance = holds.place(
                Override(**serializer.validated_data), self.request.user
            )

    def perform_update(self, serializer) -> None:
        with model_errors_as_api_errors():
            serializer.instance = holds.change(_changed(serializer))

    def perform_destroy(self, instance: Override) -> None:
        holds.cancel(instance, self.request.user)


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
        """`?actuator=<id>` and `?strategy=<name>` narrow the log, so a client asking for
        one relay's history does not get everyone's."""
        return _audit_filtered(super().get_queryset(), self.request.query_params, "actuator")


def _audit_filtered(queryset, params, owner: str):
    """An audit log narrowed by `?<owner>=<id>` (actuator or plant) and `?strategy=<name>`;
    a malformed value is a 400 naming the parameter, not an unfiltered answer."""
    if owner in params:
        raw = params[owner]
        if not raw.isascii() or not raw.isdigit() or len(raw) > 18:
            raise ValidationError({owner: f"Must be a{'n' if owner[0] in 'aeiou' else ''} "
                                          f"{owner} id (a whole number)."})  # fmt: skip
        queryset = queryset.filter(**{f"{owner}_id": int(raw)})
    if "strategy" in params:
        strategy = params["strategy"]
        limit = queryset.model._meta.get_field("strategy").max_length
        if not strategy or len(strategy) > limit:
            raise ValidationError({"strategy": f"Must be a strategy name of 1–{limit} characters."})
        queryset = queryset.filter(strategy=strategy)
    return queryset


@document_viewset(
    "control",
    "weather compensation",
    "weather compensations",
    about="A heating plant's heating curve (flow from outside temperature) and its output: a "
    "holding register (0-10 V / 4-20 mA module) or a three-point valve.",
)
class WeatherCompensationViewSet(AuditedViewSetMixin, viewsets.ModelViewSet):
    queryset = WeatherCompensation.objects.all().order_by("pk")
    serializer_class = WeatherCompensationSerializer


@document_viewset(
    "control",
    "relay board",
    "relay boards",
    about="A Modbus relay board's own communication watchdog (a holding register written at "
    "start, after the board comes back and periodically) and its last status.",
)
class RelayBoardViewSet(viewsets.ModelViewSet):
    queryset = RelayBoard.objects.all()
    serializer_class = RelayBoardSerializer


@document_viewset("control", "analogue output command", "analogue output commands (audit log)")
class AnalogueCommandViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet
):
    queryset = AnalogueCommand.objects.all()
    serializer_class = AnalogueCommandSerializer

    def get_queryset(self):
        """`?plant=<id>` and `?strategy=<name>`, as the relay audit log (outside test, session
        6: `?plant=` was ignored)."""
        return _audit_filtered(super().get_queryset(), self.request.query_params, "plant")


OUTPUT_OVERRIDE = {"plant": 2, "value": 40.0, "expires": "2030-01-07T16:00:00Z",
                   "reason": "Commissioning the mixing valve"}  # fmt: skip


@document_viewset(
    "overrides",
    "analogue output override",
    "analogue output overrides",
    about="An operator holds a weather-compensated plant's output: a mixing valve (register "
    "or three-point) at a position 0-100 % (0 closed, 100 open), a modulating boiler's flow set "
    "point inside its curve's flow min-max (°C). It starts now and ends by itself at `expires` "
    "(1 minute to 24 hours later); `reason` is in every audit row. Frost protection and the "
    "flow over-temperature limit still win. Each refusal is a 400 naming the field.",
    create={
        "examples": [
            OpenApiExample("hold a valve at 40 %", value=OUTPUT_OVERRIDE, request_only=True),
            OpenApiExample(
                "out of range",
                value={"success": False, "error": "value: Must be from 0 to 100 %.",
                       "fields": {"value": ["Must be from 0 to 100 %."]}},
                response_only=True,
                status_codes=["400"],
            ),
        ]
    },
    destroy={
        "summary": "Cancel an analogue output override",
        "description": "The override is kept, marked cancelled with who and when; the output "
        "returns to weather compensation at the next tick.",
    },
)  # fmt: skip
class OutputOverrideViewSet(viewsets.ModelViewSet):
    """DELETE cancels (kept, marked who and when): the audit trail never loses an override."""

    queryset = OutputOverride.objects.select_related("plant__weather", "created_by")
    serializer_class = OutputOverrideSerializer

    def perform_create(self, serializer) -> None:
        held = OutputOverride(**serializer.validated_data)
        with model_errors_as_api_errors():
            serializer.instance = holds.place(held, self.request.user)

    def perform_update(self, serializer) -> None:
        with model_errors_as_api_errors():
            serializer.instance = holds.change(_changed(serializer))

    def perform_destroy(self, instance: OutputOverride) -> None:
        holds.cancel(instance, self.request.user)


@document_viewset(
    "control",
    "heating plant",
    "heating plants",
    about="A boiler (and pump) serving zones, with the admin's rules: the pump is not the "
    "boiler, the index zone is one of the plant's `zones`, and no actuator is driven by two "
    "owners; each refusal is a 400 naming the field.",
)
class HeatingPlantViewSet(AuditedViewSetMixin, viewsets.ModelViewSet):
    queryset = HeatingPlant.objects.prefetch_related("zones")
    serializer_class = HeatingPlantSerializer


@document_viewset(
    "control",
    "solar thermal circuit",
    "solar thermal circuits",
    about="A collector, a tank and the pump between them, with the admin's rules (ΔT off below "
    "ΔT on, tank max below the collector emergency stop, antifreeze off above on, a pump no "
    "one else drives); each refusal is a 400 naming the field.",
)
class SolarCircuitViewSet(AuditedViewSetMixin, viewsets.ModelViewSet):
    queryset = SolarCircuit.objects.all()
    serializer_class = SolarCircuitSerializer


@document_viewset(
    "control",
    "heat main",
    "heat mains",
    about="A heat main: its `zones` (ids; a PATCH with `zones` replaces them), flow sensor and "
    "set point, stage-up/down thresholds and delays, lead rotation. Its sources are "
    "`/api/v1/heat-sources`, its store `/api/v1/thermal-stores`. Bounds as in the admin; each "
    "refusal is a 400 naming the field.",
)
class HeatMainViewSet(AuditedViewSetMixin, viewsets.ModelViewSet):
    queryset = HeatMain.objects.prefetch_related("zones", "sources").select_related("store")
    serializer_class = HeatMainSerializer


@document_viewset(
    "control",
    "heat source",
    "heat sources",
    about="A heat source (a boiler's relay) on a heat main, its place in the sequence, whether "
    "it takes part in the lead rotation and its ramp time; the admin's rules (a relay no zone, "
    "plant, solar circuit, store or other source drives), each refusal a 400 naming the field.",
)
class HeatSourceViewSet(AuditedViewSetMixin, viewsets.ModelViewSet):
    queryset = HeatSource.objects.all()
    serializer_class = HeatSourceSerializer


@document_viewset(
    "control",
    "thermal store",
    "thermal stores",
    about="A heat main's thermal store (one per main): top and bottom sensors, charge start / "
    "stop and discharge temperatures, charge and discharge pumps; the admin's rules (the charge "
    "stops above where it starts, two different pumps no one else drives), each refusal a 400 "
    "naming the field.",
)
class ThermalStoreViewSet(AuditedViewSetMixin, viewsets.ModelViewSet):
    queryset = ThermalStore.objects.all().order_by("pk")
    serializer_class = ThermalStoreSerializer
