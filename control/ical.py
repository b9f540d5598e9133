"""iCal subscriptions: a zone's bookings from an .ics URL or file (Zone.ical_url).

Each occurrence of each event becomes a Booking(source="ical") keyed by
"<UID>|<original start, UTC ISO>", so a re-sync updates it in place: a moved occurrence
(RECURRENCE-ID) moves the booking, a cancelled one (STATUS:CANCELLED, EXDATE) or one that
disappeared from the feed cancels it. Recurrences (RRULE/RDATE/EXDATE) are expanded with
python-dateutil in the event's own time zone, so a weekly 10:00 class stays at 10:00 across
the clock change. Only a window around now is synced (yesterday to WINDOW_DAYS ahead).
"""

from __future__ import annotations

import hashlib
import logging
import urllib.request
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import icalendar
from dateutil.rrule import rruleset, rrulestr
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from control.models import Booking, Zone
from sensors.alarms import clear_alarm, raise_alarm

log = logging.getLogger(__name__)

FETCH_TIMEOUT_S = 10
MAX_BYTES = 5 * 1024 * 1024
WINDOW_DAYS = 90
MAX_OCCURRENCES_PER_EVENT = 2000


class IcalError(Exception):
    """The feed could not be fetched or parsed; existing bookings are left as they were."""


@dataclass(frozen=True)
class Occurrence:
    key: str
    title: str
    start: datetime
    end: datetime
    cancelled: bool


def fetch(url: str, timeout_s: float = FETCH_TIMEOUT_S) -> bytes:
    try:
        if url.startswith(("http://", "https://")):
            request = urllib.request.Request(url, headers={"User-Agent": "open-bms ical sync"})
            with urllib.request.urlopen(request, timeout=timeout_s) as response:
                data = response.read(MAX_BYTES + 1)
        else:
            path = Path(url.removeprefix("file://"))
            with path.open("rb") as fh:
                data = fh.read(MAX_BYTES + 1)
    except (OSError, ValueError) as exc:
        raise IcalError(f"cannot fetch {url}: {exc}") from exc
    if len(data) > MAX_BYTES:
        raise IcalError(f"{url} is larger than {MAX_BYTES // 1024 // 1024} MB")
    return data


def _aware(value, tz: ZoneInfo) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=tz)
    if isinstance(value, date):  # all-day: local midnight
        return datetime.combine(value, time(0), tzinfo=tz)
    raise IcalError(f"unsupported date value {value!r}")


def _duration(event, start: datetime, tz: ZoneInfo) -> timedelta:
    if event.get("DTEND") is not None:
        return _aware(event["DTEND"].dt, tz) - start
    if event.get("DURATION") is not None:
        return event["DURATION"].dt
    if not isinstance(event["DTSTART"].dt, datetime):
        return timedelta(days=1)
    return timedelta(0)


def _dates(prop, tz: ZoneInfo) -> list[datetime]:
    if prop is None:
        return []
    props = prop if isinstance(prop, list) else [prop]
    return [_aware(d.dt, tz) for p in props for d in p.dts]


def _key(uid: str, original: datetime) -> str:
    stamp = original.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    if len(uid) > 200:  # Booking.ical_uid is 255 long: keep it unique without truncating blind
        uid = hashlib.sha256(uid.encode()).hexdigest()
    return f"{uid}|{stamp}"


def occurrences(data: bytes, start: datetime, end: datetime, tz: ZoneInfo) -> list[Occurrence]:
    """Every occurrence overlapping [start, end), cancelled ones included (marked)."""
    try:
        calendar = icalendar.Calendar.from_ical(data)
    except ValueError as exc:
        raise IcalError(f"not an iCalendar file: {exc}") from exc
    masters: dict[str, icalendar.Event] = {}
    moved: dict[str, dict[datetime, icalendar.Event]] = {}
    for event in calendar.walk("VEVENT"):
        uid = str(event.get("UID", "")).strip()
        if not uid or event.get("DTSTART") is None:
            continue
        if event.get("RECURRENCE-ID") is not None:
            original = _aware(event["RECURRENCE-ID"].dt, tz)
            moved.setdefault(uid, {})[original] = event
        else:
            masters[uid] = event
    found: list[Occurrence] = []
    for uid, event in masters.items():
        first = _aware(event["DTSTART"].dt, tz)
        length = _duration(event, first, tz)
        cancelled_all = str(event.get("STATUS", "")).upper() == "CANCELLED"
        title = str(event.get("SUMMARY", "")).strip() or "(no title)"
        for original in _expand(event, first, start - length, end, tz):
            override = moved.get(uid, {}).pop(original, None)
            source = override if override is not None else event
            occ_start = _aware(source["DTSTART"].dt, tz) if override is not None else original
            occ_len = _duration(source, occ_start, tz) if override is not None else length
            if occ_len <= timedelta(0):
                continue
            found.append(
                Occurrence(
                    _key(uid, original),
                    str(source.get("SUMMARY", title)).strip() or title,
                    occ_start.astimezone(UTC),
                    (occ_start + occ_len).astimezone(UTC),
                    cancelled_all or str(source.get("STATUS", "")).upper() == "CANCELLED",
                )
            )
    return [o for o in found if o.end > start and o.start < end]


def _expand(event, first: datetime, start: datetime, end: datetime, tz: ZoneInfo) -> list[datetime]:
    if event.get("RRULE") is None and event.get("RDATE") is None:
        return [first] if first < end and first >= start - timedelta(days=WINDOW_DAYS) else []
    rules = rruleset()
    rrule_prop = event.get("RRULE")
    for prop in rrule_prop if isinstance(rrule_prop, list) else [rrule_prop] if rrule_prop else []:
        text = prop.to_ical().decode()
        # dateutil wants UNTIL in UTC when DTSTART is aware; iCal allows a local UNTIL.
        try:
            rules.rrule(rrulestr(text, dtstart=first))
        except ValueError:
            rules.rrule(rrulestr(text, dtstart=first.replace(tzinfo=None)).replace(dtstart=first))
    for d in _dates(event.get("RDATE"), tz):
        rules.rdate(d)
    for d in _dates(event.get("EXDATE"), tz):
        rules.exdate(d)
    found = []
    for occurrence in rules.xafter(start, inc=True):
        if occurrence >= end or len(found) >= MAX_OCCURRENCES_PER_EVENT:
            break
        found.append(_aware(occurrence, tz))
    return found


def sync_zone(zone: Zone, now: datetime | None = None) -> dict[str, int]:
    now = now or timezone.now()
    tz = ZoneInfo(settings.TIME_ZONE)
    start, end = now - timedelta(days=1), now + timedelta(days=WINDOW_DAYS)
    found = occurrences(fetch(zone.ical_url), start, end, tz)
    counts = {"created": 0, "updated": 0, "cancelled": 0}
    with transaction.atomic():
        existing = {
            b.ical_uid: b
            for b in zone.bookings.filter(
                source=Booking.Source.ICAL, end__gt=start
            ).select_for_update()
        }
        seen = set()
        for occ in found:
            seen.add(occ.key)
            booking = existing.get(occ.key)
            if booking is None:
                if not occ.cancelled:
                    Booking.objects.create(
                        zone=zone,
                        title=occ.title[:200],
                        start=occ.start,
                        end=occ.end,
                        source=Booking.Source.ICAL,
                        ical_uid=occ.key,
                        booked_by="iCal",
                    )
                    counts["created"] += 1
                continue
            fields = {
                "title": occ.title[:200],
                "start": occ.start,
                "end": occ.end,
                "cancelled": occ.cancelled,
            }
            changed = [k for k, v in fields.items() if getattr(booking, k) != v]
            if changed:
                for k in changed:
                    setattr(booking, k, fields[k])
                booking.save(update_fields=changed)
                counts["cancelled" if "cancelled" in changed and occ.cancelled else "updated"] += 1
        for key, booking in existing.items():
            if key not in seen and not booking.cancelled:
                booking.cancelled = True  # gone from the feed: the organiser deleted it
                booking.save(update_fields=["cancelled"])
                counts["cancelled"] += 1
    return counts


def sync_all() -> dict:
    report: dict[str, object] = {}
    for zone in Zone.objects.exclude(ical_url=""):
        try:
            report[zone.slug] = sync_zone(zone)
            clear_alarm(f"ical:{zone.pk}")
        except IcalError as exc:
            report[zone.slug] = {"error": str(exc)}
            raise_alarm(
                f"ical:{zone.pk}",
                f"Bookings of zone '{zone}' could not be synced from its iCal feed: {exc}",
                source="control",
            )
    return report
