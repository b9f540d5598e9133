"""iCal subscriptions: a zone's bookings from an .ics URL or file (Zone.ical_url).

Each occurrence of each event becomes a Booking(source="ical") keyed by
"<UID>|<original start, UTC ISO>", so a re-sync updates it in place: a moved occurrence
(RECURRENCE-ID) moves the booking, a cancelled one (STATUS:CANCELLED, EXDATE) or one that
disappeared from the feed cancels it; one a person cancelled stays cancelled. Recurrences
(RRULE/RDATE/EXDATE) are expanded with python-dateutil in the event's own time zone, so a weekly
10:00 class stays at 10:00 across the clock change. Only a window around now is synced
(yesterday to WINDOW_DAYS ahead).

A feed is bounded, so a hostile or broken calendar cannot stall the sync: fetched only over http(s) from public hosts
(control/ical_fetch.py), at most BMS_ICAL_MAX_EVENTS events and BMS_ICAL_MAX_OCCURRENCES
occurrences in the window (beyond them: imported up to the cap, and a warning alarm), and
written in bulk. It runs on the `commit` queue, never the control worker's. No error or alarm
quotes what the feed contains: every staff role reads alarms.
"""

from __future__ import annotations

import hashlib
import heapq
import itertools
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import icalendar
from dateutil.rrule import rruleset, rrulestr
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from alarms.lifecycle import clear_alarm, raise_alarm
from control import ical_fetch
from control.models import CANCELLED_BY_FEED, Booking, Zone

log = logging.getLogger(__name__)

WINDOW_DAYS = 90
# Recurrence steps walked (those before the window included), per event and per feed, as
# multiples of the occurrence cap: a rule that starts in 1970 and repeats every minute must not
# spin for minutes before it reaches the window. 10 x 2000 covers a daily event since 1970.
EVENT_STEPS_PER_OCCURRENCE = 10
FEED_STEPS_PER_OCCURRENCE = 50
BULK_BATCH = 500
# An all-day event longer than this is a holiday or term marker, not a room booking: its first
# days only (bounds the bookings one event makes).
MAX_ALL_DAY_DAYS = 14


def max_events() -> int:
    return int(settings.BMS_ICAL_MAX_EVENTS)


def max_occurrences() -> int:
    return int(settings.BMS_ICAL_MAX_OCCURRENCES)


class IcalError(Exception):
    """The feed could not be fetched or parsed; existing bookings are left as they were."""


@dataclass(frozen=True)
class Occurrence:
    key: str
    title: str
    start: datetime
    end: datetime
    cancelled: bool


@dataclass
class Found:
    """The occurrences of a feed, and what was left out because of the caps."""

    occurrences: list[Occurrence] = field(default_factory=list)
    events: int = 0
    events_skipped: int = 0
    capped: bool = False  # an event or occurrence cap was reached: the feed is incomplete


def fetch(url: str) -> bytes:
    try:
        return ical_fetch.fetch(url)
    except ical_fetch.FetchRefused as exc:
        raise IcalError(str(exc)) from exc


# Occupied hours of an all-day event on a day without scheduled periods (the zone has no
# schedule, or none that weekday): a working day, not midnight to midnight.
ALL_DAY_HOURS = (time(8, 0), time(18, 0))

DayHours = Callable[[date], tuple[time, time]]


def zone_day_hours(zone: Zone) -> DayHours:
    """A day's normal hours for this zone: from the earliest start to the latest end of its
    schedule's periods that weekday (periods across midnight are left out: a night is no
    working day), else ALL_DAY_HOURS."""
    by_day: dict[int, tuple[time, time]] = {}
    if zone.schedule_id is not None:
        for p in zone.schedule.periods.all():
            if p.end <= p.start:
                continue
            first, last = by_day.get(p.weekday, (p.start, p.end))
            by_day[p.weekday] = (min(first, p.start), max(last, p.end))
    return lambda day: by_day.get(day.weekday(), ALL_DAY_HOURS)


def _all_day(
    uid: str, original: datetime, first: datetime, length: timedelta, hours: DayHours
) -> list[tuple[str, datetime, datetime]]:
    """An all-day occurrence (DATE values) as one booking per day it covers, each for that
    day's normal hours in the site's zone: heating it midnight to midnight heated the room all
    night. The first day keeps the occurrence's key, so a sync updates it in place."""
    days = max(1, round(length / timedelta(days=1)))
    tz = first.tzinfo
    pieces = []
    for i in range(min(days, MAX_ALL_DAY_DAYS)):
        day = first.date() + timedelta(days=i)
        open_at, close_at = hours(day)
        key = _key(uid, original + timedelta(days=i))
        pieces.append(
            (
                key,
                datetime.combine(day, open_at, tzinfo=tz),
                datetime.combine(day, close_at, tzinfo=tz),
            )
        )
    return pieces


def _aware(value, tz: ZoneInfo) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=tz)
    if isinstance(value, date):  # all-day: local midnight
        return datetime.combine(value, time(0), tzinfo=tz)
    raise IcalError(f"an event has an unsupported date value ({type(value).__name__})")


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
    return expand_feed(data, start, end, tz).occurrences


def expand_feed(
    data: bytes, start: datetime, end: datetime, tz: ZoneInfo, hours: DayHours | None = None
) -> Found:
    """The feed's occurrences overlapping [start, end), within the event and occurrence caps.
    An all-day event occupies each of its days for that day's normal hours (`hours`)."""
    hours = hours or (lambda day: ALL_DAY_HOURS)
    try:
        calendar = icalendar.Calendar.from_ical(data)
    except ValueError as exc:
        # Not the parser's message: it quotes the offending line, which may be anything the URL
        # answered (a file or a service's reply), to whoever reads the alarm.
        raise IcalError("the feed is not an iCalendar file") from exc
    limit_events, limit_occ = max_events(), max_occurrences()
    result = Found()
    masters: dict[str, icalendar.Event] = {}
    moved: dict[str, dict[datetime, icalendar.Event]] = {}
    for event in calendar.walk("VEVENT"):
        uid = str(event.get("UID", "")).strip()
        if not uid or event.get("DTSTART") is None:
            continue
        if event.get("RECURRENCE-ID") is not None:
            original = _aware(event["RECURRENCE-ID"].dt, tz)
            moved.setdefault(uid, {})[original] = event
        elif uid in masters or len(masters) < limit_events:
            masters[uid] = event
        else:
            result.events_skipped += 1
            result.capped = True
    result.events = len(masters)
    # The soonest occurrences are kept when over the cap (they matter most to the heating):
    # a max-heap on start, never longer than the cap.
    kept: list[tuple[float, int, Occurrence]] = []
    feed_budget = _Steps(FEED_STEPS_PER_OCCURRENCE * limit_occ)
    order = itertools.count()
    for uid, event in masters.items():
        first = _aware(event["DTSTART"].dt, tz)
        length = _duration(event, first, tz)
        cancelled_all = str(event.get("STATUS", "")).upper() == "CANCELLED"
        title = str(event.get("SUMMARY", "")).strip() or "(no title)"
        budget = _Steps(min(EVENT_STEPS_PER_OCCURRENCE * limit_occ, feed_budget.left))
        for original in _expand(event, first, start - length, end, tz, budget):
            override = moved.get(uid, {}).pop(original, None)
            source = override if override is not None else event
            occ_start = _aware(source["DTSTART"].dt, tz) if override is not None else original
            occ_len = _duration(source, occ_start, tz) if override is not None else length
            if occ_len <= timedelta(0):
                continue
            pieces = [(_key(uid, original), occ_start, occ_start + occ_len)]
            if not isinstance(source["DTSTART"].dt, datetime):
                pieces = _all_day(uid, original, occ_start, occ_len, hours)
            later = False
            for key, piece_start, piece_end in pieces:
                occ = Occurrence(
                    key,
                    str(source.get("SUMMARY", title)).strip() or title,
                    piece_start.astimezone(UTC),
                    piece_end.astimezone(UTC),
                    cancelled_all or str(source.get("STATUS", "")).upper() == "CANCELLED",
                )
                if occ.end <= start or occ.start >= end:
                    continue
                item = (-occ.start.timestamp(), next(order), occ)
                if len(kept) < limit_occ:
                    heapq.heappush(kept, item)
                    continue
                result.capped = True
                if item < kept[0]:  # not sooner than the latest kept
                    later = override is None
                    break
                heapq.heapreplace(kept, item)
            if later:
                break  # nor is the rest of this event: its starts come in order
        feed_budget.left -= budget.used
        if budget.spent:
            result.capped = True  # this event repeats beyond what is walked
        if feed_budget.spent:
            break
    result.occurrences = sorted((occ for _, _, occ in kept), key=lambda o: o.start)
    return result


class _Steps:
    """Recurrence steps left (for one event, or one feed)."""

    def __init__(self, steps: int) -> None:
        self.left = self.start = max(steps, 0)

    @property
    def used(self) -> int:
        return self.start - max(self.left, 0)

    @property
    def spent(self) -> bool:
        return self.left <= 0

    def take(self) -> bool:
        self.left -= 1
        return self.left >= 0


def _expand(
    event, first: datetime, start: datetime, end: datetime, tz: ZoneInfo, budget: _Steps
) -> Iterator[datetime]:
    """The event's original starts in [start, end), in order, lazily (the caller may stop)."""
    if event.get("RRULE") is None and event.get("RDATE") is None:
        if first < end and first >= start - timedelta(days=WINDOW_DAYS):
            yield first
        return
    rules = rruleset()
    rrule_prop = event.get("RRULE")
    try:
        for prop in (
            rrule_prop if isinstance(rrule_prop, list) else [rrule_prop] if rrule_prop else []
        ):
            text = prop.to_ical().decode()
            # dateutil wants UNTIL in UTC when DTSTART is aware; iCal allows a local UNTIL.
            try:
                rules.rrule(rrulestr(text, dtstart=first))
            except ValueError:
                rules.rrule(
                    rrulestr(text, dtstart=first.replace(tzinfo=None)).replace(dtstart=first)
                )
    except (ValueError, TypeError) as exc:
        raise IcalError("an event has a recurrence rule that cannot be read") from exc
    for d in _dates(event.get("RDATE"), tz):
        rules.rdate(d)
    for d in _dates(event.get("EXDATE"), tz):
        rules.exdate(d)
    # Walked step by step (not xafter) so the steps before the window count against the budget.
    for occurrence in rules:
        if not budget.take() or occurrence >= end:
            return
        if occurrence >= start:
            yield _aware(occurrence, tz)


def sync_zone(zone: Zone, now: datetime | None = None) -> dict[str, int]:
    """Bring the zone's iCal bookings in line with its feed, in bulk, in one transaction."""
    now = now or timezone.now()
    tz = ZoneInfo(settings.TIME_ZONE)
    start, end = now - timedelta(days=1), now + timedelta(days=WINDOW_DAYS)
    feed = expand_feed(fetch(zone.ical_url), start, end, tz, zone_day_hours(zone))
    counts = {"created": 0, "updated": 0, "cancelled": 0, "capped": int(feed.capped)}
    to_create: list[Booking] = []
    to_update: dict[int, Booking] = {}
    fields = ["title", "start", "end", "cancelled", "cancelled_at", "cancelled_by"]
    with transaction.atomic():
        existing = {
            b.ical_uid: b
            for b in zone.bookings.filter(
                source=Booking.Source.ICAL, end__gt=start
            ).select_for_update()
        }
        seen = set()
        for occ in feed.occurrences:
            seen.add(occ.key)
            booking = existing.get(occ.key)
            if booking is None:
                if not occ.cancelled:
                    to_create.append(
                        Booking(
                            zone=zone,
                            title=occ.title[:200],
                            start=occ.start,
                            end=occ.end,
                            source=Booking.Source.ICAL,
                            ical_uid=occ.key,
                            booked_by="iCal",
                        )
                    )
                continue
            before = _values(booking)
            booking.title, booking.start, booking.end = occ.title[:200], occ.start, occ.end
            if occ.cancelled:
                _cancel_by_feed(booking, now)
            elif booking.cancelled and not booking.cancelled_by_person:
                # The organiser restored it. One a booker or engineer cancelled stays so.
                booking.cancelled, booking.cancelled_at, booking.cancelled_by = False, None, ""
            if _values(booking) != before:
                to_update[booking.pk] = booking
                became_cancelled = booking.cancelled and not before[3]
                counts["cancelled" if became_cancelled else "updated"] += 1
        if not feed.capped:
            # Gone from the feed: the organiser deleted it. (A capped feed is incomplete:
            # what is missing from it may still be there, so nothing is cancelled for that.)
            gone = [b.pk for key, b in existing.items() if key not in seen and not b.cancelled]
            for i in range(0, len(gone), BULK_BATCH):  # one UPDATE per batch, not per row
                Booking.objects.filter(pk__in=gone[i : i + BULK_BATCH]).update(
                    cancelled=True, cancelled_at=now, cancelled_by=CANCELLED_BY_FEED
                )
            counts["cancelled"] += len(gone)
        Booking.objects.bulk_create(to_create, batch_size=BULK_BATCH)
        Booking.objects.bulk_update(list(to_update.values()), fields, batch_size=BULK_BATCH)
        counts["created"] = len(to_create)
    return counts


def _values(booking: Booking) -> tuple:
    return (booking.title, booking.start, booking.end, booking.cancelled, booking.cancelled_by)


def _cancel_by_feed(booking: Booking, now: datetime) -> None:
    if not booking.cancelled:
        booking.cancelled, booking.cancelled_at, booking.cancelled_by = True, now, CANCELLED_BY_FEED


def capped_alarm_key(zone_pk: int) -> str:
    return f"ical-capped:{zone_pk}"


def sync_all() -> dict:
    report: dict[str, object] = {}
    for zone in Zone.objects.exclude(ical_url=""):
        try:
            counts = sync_zone(zone)
        except IcalError as exc:
            report[zone.slug] = {"error": str(exc)}
            raise_alarm(
                f"ical:{zone.pk}",
                f"Bookings of zone '{zone}' could not be synced from its iCal feed: {exc}",
                source="control",
            )
            continue
        report[zone.slug] = counts
        clear_alarm(f"ical:{zone.pk}")
        if counts["capped"]:
            raise_alarm(
                capped_alarm_key(zone.pk),
                f"The iCal feed of zone '{zone}' has more than {max_events()} events or more "
                f"than {max_occurrences()} occurrences in the next {WINDOW_DAYS} days: only the "
                "soonest were imported and none were cancelled for missing from it "
                "(BMS_ICAL_MAX_EVENTS, BMS_ICAL_MAX_OCCURRENCES).",
                source="control",
            )
        else:
            clear_alarm(capped_alarm_key(zone.pk))
    return report
