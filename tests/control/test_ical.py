"""iCal sync from a local http.server (let through by BMS_ICAL_ALLOWED_HOSTS): events, RRULE
expansion across the clock change, EXDATE, moved (RECURRENCE-ID) and cancelled occurrences,
deletions."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from alarms.models import Alarm
from control.ical import IcalError, occurrences, sync_all, sync_zone
from control.models import Booking, Zone
from tests.control.feed_server import FeedServer

LONDON = ZoneInfo("Europe/London")
NOW = datetime(2026, 3, 20, 9, 0, tzinfo=UTC)

CALENDAR = """BEGIN:VCALENDAR
VERSION:2.0
PRODID:-//test//EN
BEGIN:VEVENT
UID:yoga@example.org
SUMMARY:Yoga
DTSTART;TZID=Europe/London:20260320T100000
DTEND;TZID=Europe/London:20260320T120000
RRULE:FREQ=WEEKLY;COUNT=4
EXDATE;TZID=Europe/London:20260327T100000
END:VEVENT
BEGIN:VEVENT
UID:yoga@example.org
RECURRENCE-ID;TZID=Europe/London:20260403T100000
SUMMARY:Yoga (moved)
DTSTART;TZID=Europe/London:20260403T140000
DTEND;TZID=Europe/London:20260403T160000
END:VEVENT
BEGIN:VEVENT
UID:yoga@example.org
RECURRENCE-ID;TZID=Europe/London:20260410T100000
SUMMARY:Yoga
STATUS:CANCELLED
DTSTART;TZID=Europe/London:20260410T100000
DTEND;TZID=Europe/London:20260410T120000
END:VEVENT
BEGIN:VEVENT
UID:agm@example.org
SUMMARY:AGM
DTSTART:20260325T180000Z
DURATION:PT1H30M
END:VEVENT
END:VCALENDAR
"""


def local(o) -> str:
    return o.start.astimezone(LONDON).strftime("%a %d %b %H:%M")


def test_recurrences_exceptions_moves_and_cancellations():
    found = occurrences(CALENDAR.encode(), NOW, datetime(2026, 5, 1, tzinfo=UTC), LONDON)
    yoga = sorted((o for o in found if o.key.startswith("yoga")), key=lambda o: o.start)
    # 20 Mar, (27 Mar excluded), 3 Apr moved to 14:00, 10 Apr cancelled.
    assert [local(o) for o in yoga] == ["Fri 20 Mar 10:00", "Fri 03 Apr 14:00", "Fri 10 Apr 10:00"]
    assert [o.cancelled for o in yoga] == [False, False, True]
    assert yoga[1].title == "Yoga (moved)"
    # Across the clock change the class stays at 10:00 local: 09:00 UTC after 29 March.
    assert yoga[2].start == datetime(2026, 4, 10, 9, 0, tzinfo=UTC)
    [agm] = [o for o in found if o.key.startswith("agm")]
    assert (agm.end - agm.start).total_seconds() == 5400


@pytest.fixture
def feed(tmp_path, settings):
    settings.BMS_ICAL_ALLOWED_HOSTS = ["127.0.0.1"]
    with FeedServer(tmp_path) as server:
        yield server


@pytest.fixture
def zone(db, tmp_path, feed):
    (tmp_path / "hall.ics").write_text(CALENDAR)
    return Zone.objects.create(name="Hall", slug="hall", ical_url=feed.url("hall.ics"))


def test_sync_creates_then_updates_in_place(zone, tmp_path):
    counts = sync_zone(zone, now=NOW)
    assert counts["created"] == 3  # two yoga occurrences, the AGM (cancelled ones not created)
    assert Booking.objects.filter(zone=zone, source="ical").count() == 3
    again = sync_zone(zone, now=NOW)
    assert again == {"created": 0, "updated": 0, "cancelled": 0, "capped": 0}
    # The organiser deletes the AGM: its booking is cancelled, not deleted.
    (tmp_path / "hall.ics").write_text(CALENDAR.replace("UID:agm@example.org", "UID:other@x"))
    counts = sync_zone(zone, now=NOW)
    assert counts["cancelled"] == 1
    agm = Booking.objects.get(zone=zone, ical_uid__startswith="agm")
    assert agm.cancelled and agm.cancelled_by == "iCal feed"


def test_cancelling_an_existing_occurrence(zone, tmp_path):
    sync_zone(zone, now=NOW)
    cancelled = CALENDAR.replace(
        "SUMMARY:Yoga\nDTSTART;TZID=Europe/London:20260320T100000",
        "SUMMARY:Yoga\nSTATUS:CANCELLED\nDTSTART;TZID=Europe/London:20260320T100000",
    )
    (tmp_path / "hall.ics").write_text(cancelled)
    sync_zone(zone, now=NOW)
    assert Booking.objects.filter(zone=zone, title="Yoga", cancelled=False).count() == 0


def test_a_broken_feed_raises_an_alarm_and_keeps_bookings(zone, tmp_path):
    sync_zone(zone, now=NOW)
    (tmp_path / "hall.ics").write_text("this is not a calendar")
    report = sync_all()
    assert "error" in report["hall"]
    assert Alarm.objects.filter(key=f"ical:{zone.pk}", cleared_at__isnull=True).exists()
    assert Booking.objects.filter(zone=zone, cancelled=False).count() == 3


def test_a_missing_feed_is_a_clear_error(zone, feed):
    zone.ical_url = feed.url("missing.ics")
    with pytest.raises(IcalError, match="127.0.0.1 answered HTTP 404"):
        sync_zone(zone, now=NOW)
