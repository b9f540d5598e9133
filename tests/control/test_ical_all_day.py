"""An all-day iCal event (DATE values, no time) books the room for the day's normal hours in the
site's time zone — the zone's scheduled hours that weekday, else 08:00–18:00 — not midnight to
midnight, which heated the room all night (issue 27, item 9)."""

from __future__ import annotations

from datetime import UTC, datetime, time
from zoneinfo import ZoneInfo

import pytest

from control.ical import occurrences, sync_zone
from control.models import Booking, Schedule, SchedulePeriod, Zone
from tests.control.feed_server import FeedServer

LONDON = ZoneInfo("Europe/London")
NOW = datetime(2026, 6, 1, 9, 0, tzinfo=UTC)

OPEN_DAY = """BEGIN:VCALENDAR
VERSION:2.0
PRODID:-//test//EN
BEGIN:VEVENT
UID:open-day@example.org
SUMMARY:Open day
DTSTART;VALUE=DATE:20260603
DTEND;VALUE=DATE:20260605
END:VEVENT
END:VCALENDAR
"""


def hours(found) -> list[str]:
    return [
        f"{o.start.astimezone(LONDON):%a %H:%M}–{o.end.astimezone(LONDON):%H:%M}" for o in found
    ]


def test_without_a_schedule_each_day_is_eight_to_six_local():
    found = occurrences(OPEN_DAY.encode(), NOW, datetime(2026, 7, 1, tzinfo=UTC), LONDON)
    # Two days (DTEND is exclusive), each 08:00–18:00 BST, i.e. 07:00–17:00 UTC.
    assert hours(found) == ["Wed 08:00–18:00", "Thu 08:00–18:00"]
    assert found[0].start == datetime(2026, 6, 3, 7, 0, tzinfo=UTC)
    assert len({o.key for o in found}) == 2


@pytest.fixture
def feed(tmp_path, settings):
    settings.BMS_ICAL_ALLOWED_HOSTS = ["127.0.0.1"]
    with FeedServer(tmp_path) as server:
        yield server


@pytest.mark.django_db
def test_a_zone_with_a_schedule_is_booked_for_its_scheduled_hours(tmp_path, feed):
    schedule = Schedule.objects.create(name="Centre")
    # Wednesday: 09:00–12:00 and 13:00–17:30, so the day is 09:00–17:30. Thursday: none.
    SchedulePeriod.objects.create(schedule=schedule, weekday=2, start=time(9), end=time(12))
    SchedulePeriod.objects.create(schedule=schedule, weekday=2, start=time(13), end=time(17, 30))
    SchedulePeriod.objects.create(schedule=schedule, weekday=2, start=time(22), end=time(6))
    (tmp_path / "hall.ics").write_text(OPEN_DAY)
    zone = Zone.objects.create(
        name="Hall", slug="hall", schedule=schedule, ical_url=feed.url("hall.ics")
    )
    assert sync_zone(zone, now=NOW)["created"] == 2
    booked = Booking.objects.filter(zone=zone).order_by("start")
    assert hours(booked) == ["Wed 09:00–17:30", "Thu 08:00–18:00"]
    # A re-sync finds the same bookings: nothing changes.
    assert sync_zone(zone, now=NOW) == {"created": 0, "updated": 0, "cancelled": 0, "capped": 0}


def test_a_long_all_day_event_is_bounded():
    term = OPEN_DAY.replace("DTEND;VALUE=DATE:20260605", "DTEND;VALUE=DATE:20260803")
    found = occurrences(term.encode(), NOW, datetime(2026, 9, 1, tzinfo=UTC), LONDON)
    assert len(found) == 14  # MAX_ALL_DAY_DAYS
