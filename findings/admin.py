from django.contrib import admin

from findings.models import Finding


@admin.register(Finding)
class FindingAdmin(admin.ModelAdmin):
    """Read-mostly: findings come from the rules; people set the state on the staff page."""

    list_display = ["subject", "rule", "waste_money_week", "waste_kwh_week", "state", "closed_at"]
    list_filter = ["rule", "state", "site"]
    readonly_fields = [f.name for f in Finding._meta.fields if f.name not in ("state",)]

    def has_add_permission(self, request) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # a record of who marked what
