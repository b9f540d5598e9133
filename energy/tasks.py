"""Beat task: keep the last days of every meter up to date (the page reads MeterDay)."""

from __future__ import annotations

from datetime import timedelta

from celery import shared_task

from energy import monthly, refresh, report_mail
from energy.models import Meter
from sensors.models import Site

RECENT_DAYS = 3


@shared_task(name="energy.tasks.refresh_recent", ignore_result=True)
def refresh_recent() -> int:
    written = 0
    for site in Site.objects.all():
        last = refresh.local_today(refresh.site_zone(site))
        meters = Meter.objects.filter(node__site=site).select_related("node__site", "feed")
        written += refresh.refresh(meters, last - timedelta(days=RECENT_DAYS - 1), last)
    return written


@shared_task(name="energy.tasks.send_monthly_reports", ignore_result=True)
def send_monthly_reports() -> int:
    """On the 1st of the month (beat): last month's report of every building with recipients,
    the month taken in each site's own time zone."""
    sent = 0
    for site in Site.objects.all():
        year, month = monthly.previous_month(refresh.local_today(refresh.site_zone(site)))
        sent += len(report_mail.send_month(site, year, month))
    return sent
