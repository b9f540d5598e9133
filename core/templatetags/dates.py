"""Template filters writing dates one way (core/dates.py), in the site's time zone. Built in
(settings TEMPLATES builtins), so no {% load %} is needed:

    {{ alarm.raised_at|when }}   {{ seen|when:"s" }}   {{ monday|day }}   {{ booking.end|clock }}
    {{ booking.start|span:booking.end }}   {{ reading_at|ago }} ago
"""

from __future__ import annotations

from datetime import date, datetime

from django import template
from django.utils import timezone
from django.utils.html import format_html

from core.dates import day_text, duration_text, span_text, time_text, when_text

register = template.Library()


def _local(value: datetime) -> datetime:
    return timezone.localtime(value) if timezone.is_aware(value) else value


@register.filter
def when(value: datetime | str | None, arg: str = "") -> str:
    """Also takes an ISO date-time string (the last control tick is stored as JSON text)."""
    if not value:
        return ""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return value  # not a date-time: shown as it is rather than a 500
    return when_text(_local(value), seconds=arg == "s")


@register.filter
def day(value: date | datetime | str | None) -> str:
    """Also takes an ISO date string (report rows carry their day as JSON-ready text)."""
    if not value:
        return ""
    if isinstance(value, str):
        try:
            value = date.fromisoformat(value[:10])
        except ValueError:
            return value  # not a date: shown as it is rather than a 500
    return day_text(_local(value) if isinstance(value, datetime) else value)


@register.filter
def clock(value: datetime | None, arg: str = "") -> str:
    if not value:
        return ""
    return time_text(_local(value), seconds=arg == "s")


@register.filter
def span(start: datetime | None, end: datetime | None) -> str:
    if not start or not end:
        return when(start) if start else ""
    return span_text(_local(start), _local(end))


@register.filter
def ago(value: datetime | None) -> str:
    """How long ago, in a <span data-since> that live.js keeps current ("12 min")."""
    if not value:
        return ""
    return format_html(
        '<span data-since="{}">{}</span>',
        int(value.timestamp()),
        duration_text((timezone.now() - value).total_seconds()),
    )


@register.filter
def lasted(start: datetime | None, end: datetime | None) -> str:
    """How long from start to end ("1 h 5 min"), written as ages are."""
    if not start or not end:
        return ""
    return duration_text((end - start).total_seconds())
