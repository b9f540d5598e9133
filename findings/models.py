"""A finding: something wrong this week, with its cost and what to check (docs/FINDINGS.md).

Not an alarm: alarms are for now, findings for this week. One open finding per rule and
subject (`key`); the evaluator updates it while the fault recurs and closes it when a whole
evaluated range passes without it. People mark it acknowledged, fixed or a false alarm, and
who and when is kept; which marks a finding takes in which state is `Finding.refusal`
(docs/FINDINGS.md, "States").
"""

from __future__ import annotations

from django.conf import settings
from django.db import models, transaction
from django.utils import timezone


class StateRefused(ValueError):
    """A mark the finding's state does not take (Finding.refusal says why)."""


class Finding(models.Model):
    class State(models.TextChoices):
        NEW = "new"
        ACKNOWLEDGED = "acknowledged"
        FIXED = "fixed"
        FALSE_ALARM = "false_alarm", "False alarm"

    # What a person may set; `new` is the evaluator's alone.
    MARKS = (State.ACKNOWLEDGED, State.FIXED, State.FALSE_ALARM)

    rule = models.CharField(max_length=64, db_index=True)
    key = models.CharField(max_length=200, db_index=True, help_text="rule:subject, e.g. 'x:zone:3'")
    subject = models.CharField(max_length=200, help_text="The thing, in plain words.")
    subject_url = models.CharField(max_length=300, blank=True)
    # The site the subject is at: whose staff the weekly digest goes to (findings/digest.py).
    site = models.ForeignKey(
        "sensors.Site", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    period_start = models.DateTimeField()
    period_end = models.DateTimeField()
    last_seen = models.DateTimeField(help_text="End of the last span the fault held.")
    detail = models.TextField(help_text="What was seen, in words.")
    evidence = models.JSONField(
        default=list,
        blank=True,
        help_text="Series that tripped it: [{'feed': id} | {'actuator': id}]",
    )
    waste_kwh_week = models.FloatField(null=True, blank=True)
    waste_money_week = models.FloatField(null=True, blank=True, help_text="In the site's currency.")
    waste_kg_co2_week = models.FloatField(null=True, blank=True)
    currency = models.CharField(max_length=3, blank=True)
    cost_method = models.TextField(blank=True)
    what_to_check = models.TextField()
    state = models.CharField(max_length=16, choices=State.choices, default=State.NEW)
    state_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    state_at = models.DateTimeField(null=True, blank=True)
    closed_at = models.DateTimeField(
        null=True, blank=True, help_text="Set when it stopped recurring or was marked fixed."
    )
    created = models.DateTimeField(default=timezone.now)

    class Meta:
        # Most costly first on every database: PostgreSQL puts NULLs (no estimate) first in a
        # descending sort unless told.
        ordering = [
            models.F("waste_money_week").desc(nulls_last=True),
            models.F("waste_kwh_week").desc(nulls_last=True),
            "-last_seen",
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["key"], condition=models.Q(closed_at__isnull=True), name="finding_open_key"
            )
        ]

    def __str__(self) -> str:
        return f"{self.rule}: {self.subject}"

    def evidence_links(self) -> list[tuple[str, str]]:
        """(label, URL) of each series that tripped it, over the finding's period: a feed in
        the feed explorer, an actuator's audit rows in the admin's command log."""
        start, end = int(self.period_start.timestamp()), int(self.period_end.timestamp())
        links = []
        for item in self.evidence if isinstance(self.evidence, list) else []:
            name = str(item.get("name", ""))[:100]
            if isinstance(item.get("feed"), int):
                url = f"/staff/feeds/#feeds={item['feed']}&start={start - 3600}&end={end + 3600}"
                links.append((name or f"feed {item['feed']}", url))
            elif isinstance(item.get("actuator"), int):
                url = f"/admin/control/actuatorcommand/?actuator__id__exact={item['actuator']}"
                links.append((f"{name or 'actuator'}: commands", url))
        return links

    def refusal(self, state: str) -> str | None:
        """Why a person may not mark this finding `state` now, or None if they may.

        Marking the state it already has is allowed and changes nothing (a second click, a
        retried request). *Fixed* is final: the finding is closed and stays as the record of
        what was done; if the fault comes back the evaluator opens a new finding, so nobody
        reopens one by hand. A finding that closed by itself (it stopped recurring) may still
        be marked fixed or a false alarm, to say why it stopped, but not acknowledged: there is
        nothing left to look at. A false alarm may become acknowledged or fixed on a second
        look, and an acknowledged one fixed or a false alarm.
        """
        if state not in self.MARKS:
            return "'state' is one of acknowledged, fixed, false_alarm"
        if state == self.state:
            return None
        if self.state == self.State.FIXED:
            return (
                f"finding {self.pk} is fixed and closed: a fixed finding is not marked again "
                "(if the fault comes back, a new finding opens)"
            )
        if self.closed_at is not None and state == self.State.ACKNOWLEDGED:
            return (
                f"finding {self.pk} closed by itself (it stopped recurring): mark it fixed or "
                "a false alarm, not acknowledged"
            )
        return None

    def mark(self, state: str, user) -> bool:
        """A person's verdict, with who and when; 'fixed' closes it (a recurrence opens a new one).

        Raises StateRefused for a mark `refusal` does not allow. The row is read again under a
        lock, so two people marking at once are judged one after the other, each against what
        the other left. Returns False when the finding already had that state (who and when
        stay those of the first)."""
        with transaction.atomic():
            current = type(self).objects.select_for_update().get(pk=self.pk)
            refused = current.refusal(state)
            if refused:
                raise StateRefused(refused)
            changed = current.state != state
            if changed:
                now = timezone.now()
                current.state, current.state_by, current.state_at = state, user, now
                if state == self.State.FIXED and current.closed_at is None:
                    current.closed_at = now
                current.save(update_fields=["state", "state_by", "state_at", "closed_at"])
        self.refresh_from_db(fields=["state", "state_by", "state_at", "closed_at"])
        return changed
