"""Raise and clear alarms: each condition is raised once (one open alarm per key), and
cleared when the condition ends.

Nothing here sends e-mail: a flood of alarms raised on the request or worker path must not
cost an SMTP round trip each (the red team's 7,106 alarms were 7,106 e-mails, sent inline).
A new alarm waits with `emailed_at` unset until the digest task (alarms/notify.py, on beat)
sends it with the others raised meanwhile.

A condition that happens many times while open counts its occurrences on the one alarm
(`count_alarm`, or `raise_alarm(..., occurrences=n)` for a level such as "n nodes silent"):
one row per cause and scope, never one per occurrence."""

from __future__ import annotations

import logging
import time

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from alarms.models import Alarm

log = logging.getLogger(__name__)

# When this process (a Celery worker: the one that judges nodes and relays) started. Right after
# a restart nothing has had a chance to report yet: see in_startup_grace().
PROCESS_STARTED_AT = time.time()


def in_startup_grace(now: float, at_least_s: float = 0.0) -> bool:
    """True while this process is younger than max(at_least_s, BMS_ALARM_STARTUP_GRACE).

    Nodes and relays are judged only after they have had a chance to report: without this,
    every restart raised (and emailed) an alarm per node and relay, all cleared seconds later.
    A grace of 0 turns it off (and with it `at_least_s`).
    """
    grace = float(settings.BMS_ALARM_STARTUP_GRACE)
    if grace <= 0:
        return False
    return now - PROCESS_STARTED_AT < max(grace, at_least_s)


def raise_alarm(
    key: str,
    message: str,
    *,
    source: str,
    severity: str = Alarm.Severity.WARNING,
    occurrences: int | None = None,
) -> tuple[Alarm, bool]:
    """Open an alarm for `key` unless one is already open. Returns (alarm, created).

    With `occurrences` (a level: how many nodes are silent now), an open alarm takes that
    figure and the new message when the figure changed; it is not raised (nor e-mailed) again."""
    existing = Alarm.objects.filter(key=key, cleared_at__isnull=True).first()
    if existing is not None:
        if occurrences is not None and existing.occurrences != occurrences:
            Alarm.objects.filter(pk=existing.pk).update(occurrences=occurrences, message=message)
            existing.occurrences, existing.message = occurrences, message
        return existing, False
    try:
        with transaction.atomic():
            alarm = Alarm.objects.create(
                key=key,
                message=message,
                source=source,
                severity=severity,
                occurrences=1 if occurrences is None else occurrences,
            )
    except IntegrityError:
        # Another worker opened the same alarm a moment ago: that one stands.
        return Alarm.objects.get(key=key, cleared_at__isnull=True), False
    log.warning("alarm raised: %s", message)
    return alarm, True


def count_alarm(
    key: str, message: str, *, add: int, source: str, severity: str = Alarm.Severity.WARNING
) -> bool:
    """Add `add` occurrences to the open alarm for `key` (its message becomes the latest), or
    open it with that many. One UPDATE when it is open. Returns True if it was opened now."""
    open_alarm = Alarm.objects.filter(key=key, cleared_at__isnull=True)
    if open_alarm.update(occurrences=F("occurrences") + add, message=message):
        return False
    try:
        with transaction.atomic():
            Alarm.objects.create(
                key=key, message=message, source=source, severity=severity, occurrences=add
            )
    except IntegrityError:
        # Opened by another worker between the UPDATE and the INSERT: count on that one.
        open_alarm.update(occurrences=F("occurrences") + add, message=message)
        return False
    log.warning("alarm raised: %s", message)
    return True


def clear_alarm(key: str) -> int:
    """Close the open alarm for `key`, if any. Returns how many were cleared."""
    return Alarm.objects.filter(key=key, cleared_at__isnull=True).update(cleared_at=timezone.now())


def acknowledge(alarm: Alarm, user) -> None:
    alarm.acknowledged_at = timezone.now()
    alarm.acknowledged_by = user
    alarm.save(update_fields=["acknowledged_at", "acknowledged_by"])


def acknowledge_all(user, up_to_pk: int) -> int:
    """Acknowledge every open, unacknowledged alarm up to `up_to_pk` (the newest one the user
    was shown: one raised since is not acknowledged unseen). Returns how many."""
    return Alarm.objects.filter(
        cleared_at__isnull=True, acknowledged_at__isnull=True, pk__lte=up_to_pk
    ).update(acknowledged_at=timezone.now(), acknowledged_by=user)
