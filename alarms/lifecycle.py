"""Raise and clear alarms: each condition is raised once (one open alarm per key),
emailed to BMS_ALARM_EMAILS when it opens, and cleared when the condition ends."""

from __future__ import annotations

import logging
import time

from django.conf import settings
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.utils import timezone

from alarms.models import Alarm
from core.dates import when_text

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
    key: str, message: str, *, source: str, severity: str = Alarm.Severity.WARNING
) -> tuple[Alarm, bool]:
    """Open an alarm for `key` unless one is already open. Returns (alarm, created)."""
    existing = Alarm.objects.filter(key=key, cleared_at__isnull=True).first()
    if existing is not None:
        return existing, False
    try:
        with transaction.atomic():
            alarm = Alarm.objects.create(key=key, message=message, source=source, severity=severity)
    except IntegrityError:
        # Another worker opened the same alarm a moment ago: that one stands.
        return Alarm.objects.get(key=key, cleared_at__isnull=True), False
    log.warning("alarm raised: %s", message)
    _notify(alarm)
    return alarm, True


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


def _notify(alarm: Alarm) -> None:
    recipients = settings.BMS_ALARM_EMAILS
    if not recipients:
        return
    try:
        send_mail(
            subject=f"[BMS {alarm.severity}] {alarm.message[:80]}",
            message=f"{alarm.message}\n\nRaised {when_text(timezone.localtime(alarm.raised_at))} {timezone.get_current_timezone_name()} by {alarm.source}.",
            from_email=settings.DEFAULT_FROM_EMAIL,
            recipient_list=recipients,
            fail_silently=False,
        )
    except OSError as exc:
        # The alarm is recorded and on the overview; a mail server outage must not hide it.
        log.error("could not email alarm %s: %s", alarm.key, exc)
