"""E-mail for alarms: one digest of the alarms raised since the last one, off the request and
worker paths.

An alarm used to be e-mailed from `raise_alarm`, inside the request or drain that raised it: a
flood of 7,106 alarms was 7,106 SMTP round trips on web threads and ingest workers, and 7,106
messages in the estates inbox. Now `raise_alarm` only writes the row (`emailed_at` unset) and
beat's task `alarms.tasks.send_alarm_digest` (every BMS_ALARM_EMAIL_CHECK_S, 15 s) sends:

- at most one message per BMS_ALARM_EMAIL_EVERY_S (60 s), whatever was raised (a Redis claim
  with that TTL, so two beats or a retried task cannot send twice);
- every alarm raised since the last digest, claimed with one conditional UPDATE (a row another
  sender claimed is not sent again), listed most urgent first, at most DIGEST_LISTED of them
  by name and the rest counted, with a link to the alarm list;
- a single alarm keeps the subject it always had: `[BMS <severity>] <message>`.

A mail server that is down does not lose the alarms: the claim is undone and the next run
tries again (the rate bound holds meanwhile), and the pages show them all along.
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.conf import settings
from django.core.mail import send_mail
from django.utils import timezone

from alarms.models import Alarm
from core.dates import when_text
from core.redis import get_redis

log = logging.getLogger(__name__)

DIGEST_CLAIM_KEY = "alarms:email-digest:sent"
DIGEST_LISTED = 20  # alarms named in one message; the rest are counted


def every_s() -> int:
    return int(getattr(settings, "BMS_ALARM_EMAIL_EVERY_S", 60))


def _subject(listed: list[Alarm], total: int) -> str:
    worst = listed[0]
    if total == 1:
        return f"[BMS {worst.severity}] {worst.message[:80]}"
    return f"[BMS {worst.severity}] {total} alarms: {worst.message[:60]}"


def _line(alarm: Alarm) -> str:
    raised = when_text(timezone.localtime(alarm.raised_at))
    extra = f", {alarm.occurrences:,} occurrences" if alarm.occurrences > 1 else ""
    if alarm.cleared_at is not None:
        extra += ", cleared since"
    # What to do and where the help is, as on the staff pages (alarms/links.py): the site's
    # paths, as the "more" line below gives them (the e-mail does not know the site's host).
    return (
        f"- [{alarm.severity}] {alarm.message}\n  raised {raised} by {alarm.source}{extra}\n"
        f"  What to do: {alarm.action} Help: {alarm.help_url}"
    )


def _body(listed: list[Alarm], total: int) -> str:
    zone = timezone.get_current_timezone_name()
    lines = [_line(a) for a in listed]
    if total > len(listed):
        lines.append(f"\n... and {total - len(listed):,} more: see /staff/alarms/")
    return "\n".join(lines) + f"\n\nTimes are {zone}."


def send_digest(now: datetime | None = None) -> int:
    """Send the alarms raised since the last digest in one message. Returns how many it named
    or counted (0: nothing waiting, no recipients, or a digest went out less than
    BMS_ALARM_EMAIL_EVERY_S ago)."""
    now = now or timezone.now()
    waiting = Alarm.objects.filter(emailed_at__isnull=True)
    recipients = settings.BMS_ALARM_EMAILS
    if not recipients:
        # Nobody to tell: mark them so enabling e-mail later does not send the whole history.
        waiting.update(emailed_at=now)
        return 0
    newest = waiting.order_by("-pk").values_list("pk", flat=True).first()
    if newest is None:
        return 0
    if not get_redis().set(DIGEST_CLAIM_KEY, now.isoformat(), nx=True, ex=every_s()):
        return 0  # the rate bound: they wait for the next digest
    claimed = Alarm.objects.filter(emailed_at__isnull=True, pk__lte=newest)
    total = claimed.update(emailed_at=now)
    if total == 0:
        return 0  # another sender took them between the read and the UPDATE
    mine = Alarm.objects.filter(emailed_at=now, pk__lte=newest)
    listed = list(mine.by_urgency()[:DIGEST_LISTED])
    try:
        send_mail(
            subject=_subject(listed, total),
            message=_body(listed, total),
            from_email=settings.DEFAULT_FROM_EMAIL,
            recipient_list=recipients,
            fail_silently=False,
        )
    except OSError as exc:
        # The alarms are recorded and on the pages; give them back to the next digest.
        mine.update(emailed_at=None)
        log.error("could not e-mail %d alarm(s): %s", total, exc)
        return 0
    return total
