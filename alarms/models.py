"""Alarms: a condition that needs a person, one open alarm per key, cleared automatically."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

# Most urgent first: a critical relay alarm stays at the top of every list, whatever number of
# warnings a flood opened after it.
SEVERITY_RANK = models.Case(
    models.When(severity="critical", then=models.Value(0)),
    models.When(severity="warning", then=models.Value(1)),
    default=models.Value(2),
    output_field=models.IntegerField(),
)


class AlarmQuerySet(models.QuerySet):
    def open(self) -> AlarmQuerySet:
        return self.filter(cleared_at__isnull=True)

    def by_urgency(self) -> AlarmQuerySet:
        """Critical first, then warning, then info; newest first within each."""
        return self.alias(rank=SEVERITY_RANK).order_by("rank", "-raised_at", "-pk")

    def counts_by_severity(self) -> dict[str, int]:
        """{severity: count} in one grouped query (for the pages' headings)."""
        rows = self.order_by().values_list("severity").annotate(n=models.Count("pk"))
        return {severity: n for severity, n in rows}


class Alarm(models.Model):
    """A condition that needs a person. One open alarm per `key`; cleared automatically."""

    objects = AlarmQuerySet.as_manager()

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
    # A condition that happens many times while open (readings refused, nodes silent) is one
    # alarm that counts, not one row per occurrence: a flood must not bury the relay alarm.
    occurrences = models.PositiveIntegerField(
        default=1, help_text="How many times the condition occurred while this alarm was open."
    )
    # Set when the alarm went out in an e-mail digest (alarms/notify.py); null: not yet sent.
    emailed_at = models.DateTimeField(null=True, blank=True, db_index=True)

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

    # What the pages show next to the message (alarms/links.py): derived from the key.
    @property
    def help_url(self) -> str:
        from alarms.links import help_url

        return help_url(self.key)

    @property
    def thing_url(self) -> str | None:
        from alarms.links import thing_url

        return thing_url(self.key)

    @property
    def thing_label(self) -> str:
        from alarms.links import thing_label

        return thing_label(self.key)

    @property
    def action(self) -> str:
        from alarms.links import action

        return action(self.key)
