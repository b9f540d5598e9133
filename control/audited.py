"""The change history for the API's and the admin's doors to the plant (control/change_audit.py
writes it; the staff pages call it themselves): heating plants with their weather
compensation, solar circuits, heat mains with their heat sources and thermal store.

API: who is the token's (or session's) user; why is the body's optional write-only `reason`,
else API_REASON; a DELETE may carry {"reason": "…"} too. Admin: who is the admin user, why is
ADMIN_REASON; a plant saved with its inline weather compensation is one entry.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from rest_framework import serializers

from control.change_audit import ADMIN_REASON, API_REASON, REASON_MAX, described, record, whole


def reason_field() -> serializers.CharField:
    return serializers.CharField(
        write_only=True,
        required=False,
        allow_blank=True,
        max_length=REASON_MAX,
        help_text=f"Why, for the change history (optional; else '{API_REASON}').",
    )


class _Reason(serializers.Serializer):
    reason = reason_field()


class AuditedViewSetMixin:
    """perform_create/update/destroy of a ModelViewSet, each recorded with who and why."""

    request: Any

    def _reason(self, data: dict) -> str:
        return (data.pop("reason", "") or "").strip() or API_REASON

    def _fresh(self, instance: Any) -> dict[str, str]:
        return described(type(instance).objects.get(pk=instance.pk))

    def perform_create(self, serializer) -> None:
        reason = self._reason(serializer.validated_data)
        with transaction.atomic():
            super().perform_create(serializer)  # type: ignore[misc]
            record(
                self.request.user,
                serializer.instance,
                None,
                self._fresh(serializer.instance),
                reason,
            )

    def perform_update(self, serializer) -> None:
        reason = self._reason(serializer.validated_data)
        before = self._fresh(serializer.instance)
        with transaction.atomic():
            super().perform_update(serializer)  # type: ignore[misc]
            after = self._fresh(serializer.instance)
            record(self.request.user, serializer.instance, before, after, reason)

    def perform_destroy(self, instance: Any) -> None:
        body = self.request.data
        said = _Reason(data=body if hasattr(body, "get") else {"reason": body})
        said.is_valid(raise_exception=True)
        reason = self._reason(dict(said.validated_data))
        with transaction.atomic():
            record(self.request.user, instance, self._fresh(instance), None, reason)
            super().perform_destroy(instance)  # type: ignore[misc]


class AuditedAdmin:
    """A ModelAdmin whose saves and deletes are recorded (the plant with its inlines as one)."""

    _before_attr = "_plant_audit_before"

    def save_model(self, request, obj, form, change) -> None:  # type: ignore[no-untyped-def]
        setattr(request, self._before_attr, whole(obj) if change else None)
        super().save_model(request, obj, form, change)  # type: ignore[misc]

    def save_related(self, request, form, formsets, change) -> None:  # type: ignore[no-untyped-def]
        super().save_related(request, form, formsets, change)  # type: ignore[misc]
        before = getattr(request, self._before_attr, None)
        record(request.user, form.instance, before, whole(form.instance), ADMIN_REASON)

    def delete_model(self, request, obj) -> None:  # type: ignore[no-untyped-def]
        record(request.user, obj, whole(obj), None, ADMIN_REASON)
        super().delete_model(request, obj)  # type: ignore[misc]

    def delete_queryset(self, request, queryset) -> None:  # type: ignore[no-untyped-def]
        for obj in queryset:
            record(request.user, obj, whole(obj), None, ADMIN_REASON)
        super().delete_queryset(request, queryset)  # type: ignore[misc]
