from django import forms
from django.contrib import admin, messages
from django.db import transaction

from control import bookings, holds
from control.admin_plant import actuator_state_and_why, zone_status_links
from control.audited import AuditedAdmin
from control.change_audit import ADMIN_REASON, record_zone_bacnet, zone_bacnet
from control.claims import conflict
from control.models import (
    ActuatorCommand,
    Booking,
    CalendarEntry,
    HeatMain,
    HeatSource,
    OutputOverride,
    Override,
    ProgrammeChange,
    Schedule,
    ScheduleException,
    SchedulePeriod,
    SiteCalendar,
    ThermalStore,
    WindowDetection,
    Zone,
)
from core.choice_fields import BoundedIdsAdmin
from sensors.admin import ActuatorAdmin
from sensors.models import Actuator


class SchedulePeriodInline(admin.TabularInline):
    model = SchedulePeriod
    extra = 1


class ScheduleExceptionInline(admin.TabularInline):
    model = ScheduleException
    extra = 0


@admin.register(Schedule)
class ScheduleAdmin(admin.ModelAdmin):
    list_display = ["name", "site", "description"]
    search_fields = ["name"]
    inlines = [SchedulePeriodInline, ScheduleExceptionInline]

    def save_formset(self, request, form, formset, change) -> None:
        super().save_formset(request, form, formset, change)
        if formset.model is not SchedulePeriod:
            return
        from control.schedule_warnings import period_warnings

        # A period in the spring-forward gap is saved (it is weekly: it meets the gap once a
        # year) but the engineer is told what it does that day.
        for period in form.instance.periods.all():
            for warning in period_warnings(period):
                messages.warning(request, f"{period}: {warning}")


class ZoneAdminForm(forms.ModelForm):
    class Meta:
        model = Zone
        fields = "__all__"  # the fieldsets below choose what is shown

    def clean_actuators(self):
        actuators = self.cleaned_data.get("actuators")
        problem = conflict(actuators or [], zone_id=self.instance.pk)
        if problem:
            raise forms.ValidationError(problem)
        return actuators


class WindowDetectionInline(admin.StackedInline):
    """Open-window detection, on the zone's page (off until a row is added)."""

    model = WindowDetection
    extra = 0
    max_num = 1
    fields = ["enabled", "detect_drop", "drop_k", "drop_minutes", "pause_min",
              "contact_sensor", "contact_open"]  # fmt: skip
    raw_id_fields = ["contact_sensor"]


@admin.register(Zone)
class ZoneAdmin(BoundedIdsAdmin, admin.ModelAdmin):
    form = ZoneAdminForm
    inlines = [WindowDetectionInline]
    list_display = ["name", "site", "schedule", "comfort_setpoint", "setback_setpoint",
                    "optimum_start", "heating_rate_min_per_k", "bookable", "enabled",
                    "status_links"]  # fmt: skip
    list_filter = ["site", "bookable", "enabled", "optimum_start"]
    search_fields = ["name", "slug"]
    readonly_fields = ["status_links"]
    prepopulated_fields = {"slug": ["name"]}
    filter_horizontal = ["actuators"]
    fieldsets = [
        (
            None,
            {
                "fields": [
                    "site",
                    "name",
                    "slug",
                    "enabled",
                    "temperature_sensor",
                    "actuators",
                    "schedule",
                ]
            },
        ),
        (
            "Setpoints (°C)",
            {
                "fields": [
                    "comfort_setpoint",
                    "setback_setpoint",
                    "hysteresis",
                    "frost_on",
                    "frost_off",
                    "max_temperature",
                ]
            },
        ),  # fmt: skip
        (
            "Optimum start / stop",
            {
                "fields": [
                    "optimum_start",
                    "optimum_stop",
                    "max_preheat_min",
                    "heating_rate_min_per_k",
                ]
            },
        ),  # fmt: skip
        ("Bookings and safety", {"fields": ["bookable", "ical_url", "sensor_stale_after_s"]}),
        (
            "BACnet writes (docs/BACNET.md section 7)",
            {"fields": ["bacnet_setpoint_writable", "bacnet_occupancy_writable"]},
        ),
    ]

    @admin.display(description="status · bookings · replay")
    def status_links(self, zone: Zone) -> str:
        return zone_status_links(zone)

    def save_model(self, request, obj, form, change) -> None:  # type: ignore[no-untyped-def]
        # Enabling BACnet writes is kept in the change history, as through the API.
        before = zone_bacnet(obj if change else None)
        with transaction.atomic():
            super().save_model(request, obj, form, change)
            record_zone_bacnet(request.user, obj, before, ADMIN_REASON)


# The change permission, not just view: a viewer must not cancel a booking or an override
# from the changelist (admin actions are offered to everyone who may see the list otherwise).
@admin.action(description="Cancel selected (kept in the audit trail)", permissions=["change"])
def cancel_selected(modeladmin, request, queryset) -> None:
    cancel = bookings.cancel if queryset.model is Booking else holds.cancel
    for obj in queryset.filter(cancelled=False):
        cancel(obj, request.user)


@admin.register(Booking)
class BookingAdmin(admin.ModelAdmin):
    """Rules from Booking.clean (the admin form calls it); who and where from are set here;
    bookings are cancelled, never deleted."""

    list_display = ["title", "zone", "start", "end", "booked_by", "source", "cancelled"]
    list_filter = ["zone", "source", "cancelled"]
    search_fields = ["title", "booked_by"]
    date_hierarchy = "start"
    readonly_fields = [
        "booked_by", "source", "ical_uid", "cancelled", "cancelled_at", "cancelled_by", "created",
        "changed_by", "changed_at",
    ]  # fmt: skip
    actions = [cancel_selected]

    def save_model(self, request, obj, form, change):
        # The form has applied the same rules; the write path stamps who and when and saves.
        if change:
            bookings.move(obj, request.user)
        else:
            bookings.book(obj, request.user, Booking.Source.ADMIN)

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class HeldUntilAdmin(admin.ModelAdmin):
    """An operator's hold (control.models.HeldUntil): who made it is recorded, and it is
    cancelled, never deleted."""

    actions = [cancel_selected]

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # cancelled instead: the audit trail keeps every override

    def save_model(self, request, obj, form, change):
        # The form has applied the same rules; the write path stamps who and when and saves.
        if change:
            holds.change(obj)
        else:
            holds.place(obj, request.user)


@admin.register(Override)
class OverrideAdmin(HeldUntilAdmin):
    list_display = [
        "__str__",
        "actuator",
        "zone",
        "state",
        "setpoint",
        "starts",
        "expires",
        "reason",
        "created_by",
        "cancelled",
    ]
    list_filter = ["state", "cancelled"]
    search_fields = ["reason"]
    readonly_fields = ["created_by", "cancelled", "cancelled_at", "cancelled_by", "created"]


@admin.register(OutputOverride)
class OutputOverrideAdmin(HeldUntilAdmin):
    """An analogue output held by an operator (rules: OutputOverride.clean); cancelled, never
    deleted. It starts when it is made."""

    list_display = ["__str__", "plant", "value", "starts", "expires", "reason", "created_by",
                    "cancelled"]  # fmt: skip
    list_filter = ["cancelled"]
    search_fields = ["reason"]
    readonly_fields = ["starts", "created_by", "cancelled", "cancelled_at", "cancelled_by",
                       "created"]  # fmt: skip


@admin.register(ActuatorCommand)
class ActuatorCommandAdmin(admin.ModelAdmin):
    """The audit log is read-only: nobody edits history, not even a superuser."""

    list_display = ["requested_at", "actuator", "state", "reason", "strategy", "user", "status"]
    list_filter = ["actuator", "state", "strategy"]
    search_fields = ["reason", "actuator__name", "strategy"]
    date_hierarchy = "requested_at"
    readonly_fields = [f.name for f in ActuatorCommand._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class RecentCommandInline(admin.TabularInline):
    model = ActuatorCommand
    fields = ["requested_at", "state", "reason", "strategy", "user", "confirmed_at", "error"]
    readonly_fields = fields
    ordering = ["-requested_at"]
    extra = 0
    max_num = 0
    can_delete = False
    verbose_name_plural = "Recent commands (audit log)"

    def get_queryset(self, request):
        # Newest first; the full history is under Actuator commands.
        return super().get_queryset(request).order_by("-requested_at")


# control extends the sensors app's Actuator admin with what only control knows:
# the state each actuator is in, why, and its audit trail (sensors may not import control).
admin.site.unregister(Actuator)


@admin.register(Actuator)
class ControlledActuatorAdmin(ActuatorAdmin):
    list_display = [*ActuatorAdmin.list_display, "state_and_why"]
    readonly_fields = ["state_and_why"]
    inlines = [RecentCommandInline]

    @admin.display(description="state — why")
    def state_and_why(self, actuator: Actuator) -> str:
        return actuator_state_and_why(actuator)


# --- site calendars and the programme audit (issue #28; the staff pages are the usual way) ---


class CalendarEntryInline(admin.TabularInline):
    model = CalendarEntry
    extra = 0


@admin.register(SiteCalendar)
class SiteCalendarAdmin(BoundedIdsAdmin, admin.ModelAdmin):
    list_display = ["name", "country", "subdivision"]
    search_fields = ["name"]
    filter_horizontal = ["schedules"]
    inlines = [CalendarEntryInline]


@admin.register(ProgrammeChange)
class ProgrammeChangeAdmin(admin.ModelAdmin):
    """The audit is written by the staff pages, and for the plant by the API and the admin
    saves (control/audited.py): read here, never edited."""

    list_display = ["at", "by", "subject", "change", "reason"]
    list_filter = ["by"]
    search_fields = ["subject", "change", "reason"]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class HeatSourceInline(admin.TabularInline):
    model = HeatSource
    extra = 1
    fields = ["order", "name", "actuator", "rotate", "ramp_s"]


class ThermalStoreInline(admin.StackedInline):
    """The main's thermal store (one at most)."""

    model = ThermalStore
    extra = 0
    max_num = 1
    raw_id_fields = ["top_sensor", "bottom_sensor", "charge_pump", "discharge_pump"]


@admin.register(HeatMain)
class HeatMainAdmin(AuditedAdmin, BoundedIdsAdmin, admin.ModelAdmin):
    """A heat main and its sources in sequence (docs/CONTROL.md "Heat main")."""

    list_display = ["name", "site", "flow_setpoint_c", "rotate_weekly", "rotate_hours", "enabled"]
    filter_horizontal = ["zones"]
    inlines = [HeatSourceInline, ThermalStoreInline]
