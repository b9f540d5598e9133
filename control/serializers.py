from rest_framework import serializers

from bms.serializers import ModelCleanSerializer
from control.models import (
    ActuatorCommand,
    Booking,
    Override,
    Schedule,
    ScheduleException,
    SchedulePeriod,
    Zone,
)


class SchedulePeriodSerializer(ModelCleanSerializer):
    class Meta:
        model = SchedulePeriod
        fields = ["id", "schedule", "weekday", "start", "end", "setpoint"]


class ScheduleExceptionSerializer(ModelCleanSerializer):
    class Meta:
        model = ScheduleException
        fields = ["id", "schedule", "date", "description", "occupied", "start", "end"]


class ScheduleSerializer(ModelCleanSerializer):
    periods = SchedulePeriodSerializer(many=True, read_only=True)
    exceptions = ScheduleExceptionSerializer(many=True, read_only=True)

    class Meta:
        model = Schedule
        fields = ["id", "site", "name", "description", "periods", "exceptions"]


class ZoneSerializer(ModelCleanSerializer):
    class Meta:
        model = Zone
        fields = ["id", "site", "name", "slug", "temperature_sensor", "actuators", "schedule",
                  "comfort_setpoint", "setback_setpoint", "frost_on", "frost_off",
                  "max_temperature", "hysteresis", "optimum_start", "optimum_stop",
                  "max_preheat_min", "heating_rate_min_per_k", "sensor_stale_after_s",
                  "bookable", "ical_url", "enabled"]  # fmt: skip

    def validate_actuators(self, actuators: list) -> list:
        # Issue #15.1: no valve in two zones, no plant or solar actuator in a zone.
        from control.claims import conflict

        problem = conflict(actuators, zone_id=self.instance.pk if self.instance else None)
        if problem:
            raise serializers.ValidationError(problem)
        return actuators


class BookingSerializer(ModelCleanSerializer):
    class Meta:
        model = Booking
        fields = ["id", "zone", "title", "start", "end", "booked_by", "setpoint", "source",
                  "ical_uid", "cancelled", "created"]  # fmt: skip
        read_only_fields = ["created", "ical_uid"]


class OverrideSerializer(ModelCleanSerializer):
    class Meta:
        model = Override
        fields = ["id", "actuator", "zone", "state", "starts", "expires", "reason",
                  "created_by", "cancelled", "created"]  # fmt: skip
        read_only_fields = ["created_by", "created"]


class ActuatorCommandSerializer(serializers.ModelSerializer):
    status = serializers.CharField(read_only=True)

    class Meta:
        model = ActuatorCommand
        fields = ["id", "actuator", "state", "reason", "strategy", "user", "requested_at",
                  "sent_at", "confirmed_at", "error", "status"]  # fmt: skip
        read_only_fields = fields
