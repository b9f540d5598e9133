"""Alarms: a condition that needs a person, one open alarm per key, cleared automatically."""

from __future__ import annotations

from django.db import models
from django.utils import timezone


class Alarm(models.Model):
    """A condition that needs a person. One open alarm per `key`; cleared automatically."""

    class Severity(models.TextChoices):
        INFO = "info"
        WARNING = "warning"
        CRITICAL = "critical"

    key = models.CharField(
        max_length=200, db_index=True, help_text="Identifies the condition, e.g. 'node-silent:7'."
    )
    severity = models.CharField(max_length=10, choices=Severity.choices, default=Severity.WARNING)
    source = models.CharField(
        max_length=50, help_text="Which part raised it: node, relay, feeds ..."
    )
    message = models.TextField()
    raised_at = models.DateTimeField(default=timezone.now)
    cleared_at = models.DateTimeField(null=True, blank=True)
    acknowledged_at = models.DateTimeField(null=True, blank=True)
    acknowledged_by = models.ForeignKey(
        "auth.User", on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )

    class Meta:
        # The model began in sensors: its table keeps that name (alarms/migrations/0001_initial.py).
        db_table = "sensors_alarm"
        ordering = ["-raised_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["key"],
                condition=models.Q(cleared_at__isnull=True),
                name="alarm_one_open_per_key",
            )
        ]

    def __str__(self) -> str:
        return f"[{self.severity}] {self.message}"

    @property
    def is_open(self) -> bool:
        return self.cleared_at is None
