"""The alarm list in the admin: read-only, acknowledged by engineers, never typed in."""

from django.contrib import admin
from django.utils import timezone

from alarms.lifecycle import acknowledge
from alarms.models import Alarm


@admin.register(Alarm)
class AlarmAdmin(admin.ModelAdmin):
    list_display = [
        "raised_at",
        "severity",
        "source",
        "message",
        "occurrences",
        "is_open",
        "cleared_at",
        "acknowledged_at",
    ]
    list_filter = ["severity", "source", ("cleared_at", admin.EmptyFieldListFilter)]
    search_fields = ["message", "key"]
    readonly_fields = [f.name for f in Alarm._meta.fields]
    actions = ["acknowledge_selected"]

    @admin.display(boolean=True, description="open")
    def is_open(self, alarm: Alarm) -> bool:
        return alarm.is_open

    def has_add_permission(self, request) -> bool:
        return False  # alarms are raised by the system, not typed in

    def has_change_permission(self, request, obj: Alarm | None = None) -> bool:
        # An alarm's page is a view: nothing on it can be edited, so it shows no Save buttons
        # and refuses a POST (#25). Without an object (the list's acknowledge action) engineers
        # keep change_alarm.
        if obj is not None:
            return False
        return super().has_change_permission(request)

    def has_delete_permission(self, request, obj: Alarm | None = None) -> bool:
        # An alarm is a record of what happened (API.md: never edited): deleting one would let
        # an engineer hide a fault. Django drops delete_selected when this is False.
        return False

    # Engineers only (change_alarm), as POST /api/v1/alarms/<id>/acknowledge.
    @admin.action(description="Acknowledge selected alarms", permissions=["change"])
    def acknowledge_selected(self, request, queryset):
        for alarm in queryset.filter(acknowledged_at__isnull=True):
            acknowledge(alarm, request.user)
        self.message_user(request, f"Acknowledged at {timezone.localtime():%H:%M}.")
