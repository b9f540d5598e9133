from rest_framework import serializers

from control.audited import reason_field
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
from core.serializers import BoundedManyRelated, ModelCleanSerializer


class SchedulePeriodSerializer(ModelCleanSerializer):
    warnings = serializers.SerializerMethodField(
        help_text="What the period does on the next spring-forward day when its start or end "
        "falls inside the gap (saved anyway: it starts or ends when the clocks jump)."
    )

    class Meta:
        model = SchedulePeriod
        fields = ["id", "schedule", "weekday", "start", "end", "setpoint", "warnings"]

    def get_warnings(self, period: SchedulePeriod) -> list[str]:
        from control.schedule_warnings import period_warnings

        return period_warnings(period)


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
                  "bookable", "ical_url", "enabled", "bacnet_setpoint_writable",
                  "bacnet_occupancy_writable"]  # fmt: skip

    def validate_actuators(self, actuators: list) -> list:
        # No valve in two zones, no plant or solar actuator in a zone: two drivers of one relay
        # would flip it every tick.
        from control.claims import conflict

        problem = conflict(actuators, zone_id=self.instance.pk if self.instance else None)
        if problem:
            raise serializers.ValidationError(problem)
        return actuators


class BookingSerializer(ModelCleanSerializer):
    """Who booked and where from are set by the server, not the caller; DELETE cancels.
    The rules (clashes, length, setpoint) are Booking.clean's, as on the staff page."""

    class Meta:
        model = Booking
        fields = ["id", "zone", "title", "start", "end", "booked_by", "setpoint", "source",
                  "ical_uid", "cancelled", "cancelled_at", "cancelled_by", "created"]  # fmt: skip
        read_only_fields = ["booked_by", "source", "ical_uid", "cancelled", "cancelled_at",
                            "cancelled_by", "created"]  # fmt: skip

    def validate(self, attrs: dict) -> dict:
        if self.instance is not None:
            if self.instance.source == Booking.Source.ICAL:
                raise serializers.ValidationError(
                    {
                        "source": "A booking from an iCal feed is changed in its calendar "
                        "(or cancelled here with DELETE)."
                    }  # fmt: skip
                )
            if self.instance.cancelled:
                raise serializers.ValidationError(
                    {"cancelled": "A cancelled booking cannot be changed; make a new one."}
                )
        return super().validate(attrs)


class OverrideSerializer(ModelCleanSerializer):
    class Meta:
        model = Override
        fields = ["id", "actuator", "zone", "state", "setpoint", "starts", "expires", "reason",
                  "created_by", "cancelled", "cancelled_at", "cancelled_by", "created"]  # fmt: skip
        read_only_fields = ["created_by", "cancelled", "cancelled_at", "cancelled_by", "created"]


class ActuatorCommandSerializer(serializers.ModelSerializer):
    status = serializers.CharField(read_only=True)

    class Meta:
        model = ActuatorCommand
        fields = ["id", "actuator", "state", "reason", "strategy", "user", "requested_at",
                  "sent_at", "confirmed_at", "error", "status"]  # fmt: skip
        read_only_fields = fields


class WeatherCompensationSerializer(ModelCleanSerializer):
    """A plant's heating curve and output; the rules are WeatherCompensation.clean's."""

    reason = reason_field()  # for the change history (control/audited.py)

    class Meta:
        model = WeatherCompensation
        fields = ["id", "plant", "enabled", "mode", "slope", "shift_k", "room_influence",
                  "flow_min_c", "flow_max_c", "flow_limit_c", "kp", "ti_s", "output",
                  "register_host", "register_port", "register_device_id", "register_address",
                  "raw_min", "raw_max", "scale_low", "scale_high", "open_actuator",
                  "close_actuator", "run_time_s", "min_pulse_s", "bacnet_device",
                  "bacnet_object", "bacnet_priority", "reason"]  # fmt: skip


class HeatingPlantSerializer(ModelCleanSerializer):
    """A heating plant and its members (zones), with the admin's rules: the model's clean()
    with the zones being saved (control/plant_rules.py) and the actuator claims."""

    reason = reason_field()  # for the change history (control/audited.py)

    class Meta:
        model = HeatingPlant
        fields = ["id", "site", "name", "enabled", "boiler", "pump", "zones", "has_bypass",
                  "pump_overrun_s", "pump_kick", "pump_kick_idle_days", "pump_kick_s",
                  "outside_sensor", "frost_outside_c", "flow_sensor", "flow_frost_c",
                  "return_sensor", "sensor_stale_after_s", "index_zone", "reason"]  # fmt: skip

    def validate(self, attrs: dict) -> dict:
        zones = attrs.get("zones")
        if zones is None and self.instance is not None:
            zones = list(self.instance.zones.all())
        # Not a model field: set on the unsaved copy whose clean() runs (core/serializers.py).
        attrs["member_zone_ids"] = {z.pk for z in zones or []}
        attrs = super().validate(attrs)
        attrs.pop("member_zone_ids")
        return attrs


class SolarCircuitSerializer(ModelCleanSerializer):
    """A solar thermal circuit, with the admin's rules (SolarCircuit.clean: the differential,
    antifreeze and tank limits, and the pump's claims)."""

    reason = reason_field()  # for the change history (control/audited.py)

    class Meta:
        model = SolarCircuit
        fields = ["id", "site", "name", "enabled", "collector_sensor", "tank_sensor", "pump",
                  "delta_on", "delta_off", "tank_max", "tank_hysteresis", "collector_emergency",
                  "emergency_hysteresis", "antifreeze_on", "antifreeze_off",
                  "sensor_stale_after_s", "pump_kick", "pump_kick_idle_days",
                  "pump_kick_s", "reason"]  # fmt: skip


MAX_HEAT_MAIN_ZONES = 2000


class HeatMainSerializer(ModelCleanSerializer):
    """A heat main and its members (zones, ids; a PATCH with `zones` replaces them). Its sources
    and store are their own resources, listed here read-only."""

    # The bench runs 500 zones on one main; a site twice that is still far below the bound.
    zones = BoundedManyRelated(
        child_relation=serializers.PrimaryKeyRelatedField(queryset=Zone.objects.all()),
        max_items=MAX_HEAT_MAIN_ZONES,
        required=False,
        help_text=f"The zones whose demand the main serves (ids, at most {MAX_HEAT_MAIN_ZONES}).",
    )
    sources = serializers.PrimaryKeyRelatedField(many=True, read_only=True)
    store = serializers.PrimaryKeyRelatedField(read_only=True, allow_null=True)

    reason = reason_field()  # for the change history (control/audited.py)

    class Meta:
        model = HeatMain
        fields = ["id", "site", "name", "enabled", "zones", "flow_sensor", "flow_setpoint_c",
                  "stage_up_k", "stage_up_s", "stage_down_k", "stage_down_s", "rotate_weekly",
                  "rotate_hours", "sensor_stale_after_s", "sources", "store", "reason"]  # fmt: skip


class HeatSourceSerializer(ModelCleanSerializer):
    """A heat source on a heat main, with the admin's rules (HeatSource.clean: a relay no zone,
    plant, solar circuit, store or other source drives; one source per relay)."""

    reason = reason_field()  # for the change history (control/audited.py)

    class Meta:
        model = HeatSource
        fields = ["id", "heat_main", "name", "actuator", "order", "rotate", "ramp_s", "reason"]


class ThermalStoreSerializer(ModelCleanSerializer):
    """A heat main's thermal store (one per main), with the admin's rules (ThermalStore.clean:
    the charge stops above where it starts, two different pumps no one else drives)."""

    reason = reason_field()  # for the change history (control/audited.py)

    class Meta:
        model = ThermalStore
        fields = ["id", "heat_main", "name", "top_sensor", "bottom_sensor", "charge_start_c",
                  "charge_stop_c", "discharge_min_c", "charge_pump", "discharge_pump",
                  "sensor_stale_after_s", "reason"]  # fmt: skip


class RelayBoardSerializer(ModelCleanSerializer):
    watchdog = serializers.SerializerMethodField(
        help_text="The watchdog as the last tick found it: ok, written_at / tried_at (unix s), "
        "read_value and read_at (what the register read back, when), rewrite_reason, error."
    )

    class Meta:
        model = RelayBoard
        fields = ["id", "name", "host", "port", "device_id", "watchdog_register",
                  "watchdog_value", "rewrite_s", "enabled", "coil_count", "watchdog"]  # fmt: skip

    def get_watchdog(self, board: RelayBoard) -> dict:
        from control.outputs import watchdog_status

        status = watchdog_status([board.pk]).get(board.pk) or {}
        keys = ("ok", "written_at", "tried_at", "read_value", "read_at", "rewrite_reason", "error")
        return {k: status.get(k) for k in keys}


class AnalogueCommandSerializer(serializers.ModelSerializer):
    class Meta:
        model = AnalogueCommand
        fields = ["id", "plant", "value", "unit", "raw", "reason", "strategy", "requested_at",
                  "sent_at", "confirmed_at", "error"]  # fmt: skip
        read_only_fields = fields


class OutputOverrideSerializer(ModelCleanSerializer):
    """An operator's hold on a plant's analogue output; the rules are OutputOverride.clean's
    (value inside the output's range, 1 min to 24 h, a reason). It starts when it is made."""

    unit = serializers.CharField(read_only=True, help_text="% (valve) or °C (flow set point)")

    class Meta:
        model = OutputOverride
        fields = ["id", "plant", "value", "unit", "starts", "expires", "reason", "created_by",
                  "cancelled", "cancelled_at", "cancelled_by", "created"]  # fmt: skip
        read_only_fields = ["starts", "created_by", "cancelled", "cancelled_at", "cancelled_by",
                            "created"]  # fmt: skip

    def validate(self, attrs: dict) -> dict:
        if self.instance is not None:
            if self.instance.cancelled:
                raise serializers.ValidationError(
                    {"cancelled": "A cancelled override cannot be changed; make a new one."}
                )
            if "plant" in attrs and attrs["plant"] != self.instance.plant:
                raise serializers.ValidationError(
                    {"plant": "An override stays on its plant; cancel it and make a new one."}
                )
        return super().validate(attrs)
