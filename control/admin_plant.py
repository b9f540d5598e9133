"""Admin for the control engineer's models (imported by control/admin.py):
heating plants, solar thermal circuits, zone tuning, the optimum start log, node commands.

Also helpers for the lead's admins (list_display / readonly fields):
`zone_status_links(zone)` — links to the zone's status row, booking calendar and replay page;
`actuator_state_and_why(actuator)` — "ON — Booking 'Yoga' …" from the last control tick.
"""

from __future__ import annotations

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html

from control import runtime
from control.audited import AuditedAdmin
from control.forms import HeatingPlantForm
from control.models import (
    AnalogueCommand,
    HeatingPlant,
    NodeCommand,
    OptimumStartLog,
    RelayBoard,
    SolarCircuit,
    WeatherCompensation,
    ZoneTuning,
)
from control.outputs import output_status, watchdog_status
from control.status import watchdog_text
from core.choice_fields import BoundedIdsAdmin


def zone_status_links(zone) -> str:
    """HTML links for a zone: status, bookings, replay (for list_display / readonly fields)."""
    if zone is None or zone.pk is None:
        return "—"
    return format_html(
        '<a href="{}#zone-{}">status</a> · <a href="{}">bookings</a> · <a href="{}">replay</a>',
        reverse("control:status"),
        zone.slug,
        reverse("control:bookings", args=[zone.slug]),
        reverse("control:replay", args=[zone.slug]),
    )


def actuator_state_and_why(actuator) -> str:
    if actuator is None or actuator.pk is None:
        return "—"
    state = runtime.load_actuators([actuator.pk])[actuator.pk]
    if state.on is None:
        return "unknown — not switched by control yet"
    label = "ON" if state.on else "OFF"
    if state.fault:
        label += f" (FAULT: {state.fault})"
    elif not state.confirmed:
        label += " (unconfirmed)"
    return f"{label} — {state.reason}"


@admin.register(HeatingPlant)
class HeatingPlantAdmin(AuditedAdmin, BoundedIdsAdmin, admin.ModelAdmin):
    form = HeatingPlantForm
    list_display = ["name", "site", "boiler", "pump", "pump_overrun_s", "pump_kick", "enabled"]
    list_filter = ["site", "enabled"]
    search_fields = ["name"]
    filter_horizontal = ["zones"]
    fieldsets = [
        (None, {"fields": ["site", "name", "enabled", "boiler", "pump", "zones"]}),
        (
            "Pump",
            {
                "fields": [
                    "pump_overrun_s",
                    "has_bypass",
                    "pump_kick",
                    "pump_kick_idle_days",
                    "pump_kick_s",
                ]
            },
        ),
        (
            "Frost protection and index circuit",
            {
                "fields": [
                    "outside_sensor",
                    "frost_outside_c",
                    "flow_sensor",
                    "flow_frost_c",
                    "return_sensor",
                    "sensor_stale_after_s",
                    "index_zone",
                ]
            },
        ),
    ]
    inlines = []  # set below: WeatherCompensationInline
    readonly_fields = ["output_now"]

    @admin.display(description="weather compensation output")
    def output_now(self, plant: HeatingPlant) -> str:
        if plant is None or plant.pk is None:
            return "—"
        state = output_status([plant.pk]).get(plant.pk) or {}
        if "value" not in state:
            return "not written yet"
        value = f"{state['value']:.1f} {state['unit']}"
        if state.get("raw") is not None:
            value += f" (raw {state['raw']})"
        if state.get("fault"):
            value += f" FAULT: {state['fault']}"
        return f"{value} — {state.get('reason', '')}"


class WeatherCompensationInline(admin.StackedInline):
    model = WeatherCompensation
    extra = 0
    max_num = 1
    fieldsets = [
        (None, {"fields": ["enabled", "mode"]}),
        (
            "Heating curve",
            {
                "fields": [
                    "slope",
                    "shift_k",
                    "room_influence",
                    "flow_min_c",
                    "flow_max_c",
                    "flow_limit_c",
                ]
            },
        ),
        ("Mixing loop (PI)", {"fields": ["kp", "ti_s"]}),
        (
            "Output",
            {
                "fields": [
                    "output",
                    "register_host",
                    "register_port",
                    "register_device_id",
                    "register_address",
                    "raw_min",
                    "raw_max",
                    "scale_low",
                    "scale_high",
                    "open_actuator",
                    "close_actuator",
                    "run_time_s",
                    "min_pulse_s",
                    "bacnet_device",
                    "bacnet_object",
                    "bacnet_priority",
                ]
            },
        ),
    ]


HeatingPlantAdmin.inlines = [WeatherCompensationInline]
HeatingPlantAdmin.fieldsets = [
    *HeatingPlantAdmin.fieldsets,
    ("Weather compensation", {"fields": ["output_now"]}),
]


@admin.register(RelayBoard)
class RelayBoardAdmin(admin.ModelAdmin):
    """A relay board's own communication watchdog and its last write."""

    list_display = ["name", "host", "port", "device_id", "watchdog_register", "watchdog_now"]
    search_fields = ["name", "host"]
    readonly_fields = ["watchdog_now"]

    @admin.display(description="watchdog")
    def watchdog_now(self, board: RelayBoard) -> str:
        if board is None or board.pk is None or board.watchdog_register is None:
            return "—"
        return watchdog_text(board, watchdog_status([board.pk]).get(board.pk) or {})[0]


@admin.register(AnalogueCommand)
class AnalogueCommandAdmin(admin.ModelAdmin):
    """The audit log of weather-compensated outputs. Written by the system only."""

    list_display = ["requested_at", "plant", "value", "unit", "raw", "strategy", "error"]
    list_filter = ["plant", "strategy"]
    readonly_fields = [f.name for f in AnalogueCommand._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # the audit log is never edited

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(SolarCircuit)
class SolarCircuitAdmin(AuditedAdmin, admin.ModelAdmin):
    list_display = [
        "name",
        "site",
        "collector_sensor",
        "tank_sensor",
        "pump",
        "delta_on",
        "delta_off",
        "tank_max",
        "enabled",
    ]
    list_filter = ["site", "enabled"]
    search_fields = ["name"]
    fieldsets = [
        (None, {"fields": ["site", "name", "enabled", "collector_sensor", "tank_sensor", "pump"]}),
        ("Differential", {"fields": ["delta_on", "delta_off", "tank_max", "tank_hysteresis"]}),
        (
            "Collector protection",
            {
                "fields": [
                    "collector_emergency",
                    "emergency_hysteresis",
                    "antifreeze_on",
                    "antifreeze_off",
                    "sensor_stale_after_s",
                ]
            },
        ),
        ("Pump kick", {"fields": ["pump_kick", "pump_kick_idle_days", "pump_kick_s"]}),
    ]


@admin.register(ZoneTuning)
class ZoneTuningAdmin(admin.ModelAdmin):
    list_display = ["zone", "cooling_rate_min_per_k", "coast_allowance_k"]
    search_fields = ["zone__name"]


@admin.register(OptimumStartLog)
class OptimumStartLogAdmin(admin.ModelAdmin):
    """What optimum start learned, occupancy by occupancy. Written by the system only."""

    list_display = [
        "occupancy_start",
        "zone",
        "label",
        "setpoint",
        "temp_at_preheat",
        "temp_at_start",
        "miss_k",
        "rate_before",
        "rate_after",
        "note",
    ]
    list_filter = ["zone"]
    date_hierarchy = "occupancy_start"
    readonly_fields = [f.name for f in OptimumStartLog._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(NodeCommand)
class NodeCommandAdmin(admin.ModelAdmin):
    list_display = ["created", "node", "actuator", "state", "acknowledged_at", "superseded"]
    list_filter = ["node", "superseded"]
    readonly_fields = [f.name for f in NodeCommand._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
