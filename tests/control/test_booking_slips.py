"""Booking slips (issue #28 item 6) at the page level, on a clock the test sets: the new-booking
day is today or later, a past booking is refused (an engineer may confirm one), cancel asks
first and can be undone, each rule tried from both sides."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest
import time_machine
from django.test import Client

from control.models import CANCELLED_BY_FEED, Booking, Zone

pytestmark = pytest.mark.django_db
LONDON = ZoneInfo("Europe/London")
THURSDAY = datetime(2026, 12, 3, 10, 0, tzinfo=LONDON)


def client_for(user) -> Client:
    c = Client()
    c.force_login(user)
    return c


@pytest.fixture
def hall(redis_client):
    return Zone.objects.create(name="Hall", slug="hall")


@pytest.fixture(autouse=True)
def thursday():
    with time_machine.travel(THURSDAY, tick=False):
        yield


def form(day: str, start: str = "10:30", end: str = "11:30", **extra) -> dict:
    return {"title": "Yoga", "day": day, "start": start, "end": end, "setpoint": "", **extra}


def _day_value(html: str) -> str:
    return html.split('name="day"', 1)[1].split('value="', 1)[1].split('"', 1)[0]


@pytest.mark.parametrize(
    "week, shown",
    [
        ("", "2026-12-03"),  # this week: today, not Monday the 30th
        ("2026-12-07", "2026-12-07"),  # a later week: its Monday
        ("2026-11-23", "2026-12-03"),  # an earlier week: still today
    ],
)
def test_the_new_booking_day_is_today_or_later(booker, hall, week, shown):
    html = client_for(booker).get(f"/staff/bookings/hall/?week={week}").content.decode()
    assert _day_value(html) == shown
    assert "Setpoint (°C)" in html


def test_a_booker_is_refused_a_past_booking_naming_the_day(booker, hall):
    c = client_for(booker)
    page = c.post("/staff/bookings/hall/", form("2026-12-03", "09:00", "11:00"))
    assert page.status_code == 400 and "day" in page.context["form"].errors
    # Confirming is not the booker's to do: the box is ignored, not obeyed.
    page = c.post("/staff/bookings/hall/", form("2026-12-01", confirm_past="on"))
    assert page.status_code == 400 and "day" in page.context["form"].errors
    assert not Booking.objects.exists()
    # From now on is fine.
    assert c.post("/staff/bookings/hall/", form("2026-12-03", "10:00", "11:00")).status_code == 302


def test_an_engineer_books_the_past_only_by_confirming(engineer, hall):
    c = client_for(engineer)
    page = c.post("/staff/bookings/hall/", form("2026-12-01"))
    assert page.status_code == 400 and "confirm_past" in page.context["form"].errors
    assert not Booking.objects.exists()
    page = c.post("/staff/bookings/hall/", form("2026-12-01", confirm_past="on"))
    assert page.status_code == 302 and Booking.objects.get().booked_by == "engineer"


def test_a_running_booking_may_still_be_renamed(booker, hall):
    c = client_for(booker)
    Booking.objects.create(
        zone=hall, title="Yoga", start=THURSDAY.replace(hour=9), end=THURSDAY.replace(hour=11)
    )
    b = Booking.objects.get()
    page = c.post(f"/staff/bookings/hall/{b.pk}/", form("2026-12-03", "09:00", "11:30"))
    assert page.status_code == 302
    b.refresh_from_db()
    assert b.end == THURSDAY.replace(hour=11, minute=30)
    # Moving its start into the past is a new past booking: refused.
    page = c.post(f"/staff/bookings/hall/{b.pk}/", form("2026-12-03", "08:00", "11:30"))
    assert page.status_code == 400


def test_cancel_asks_first_then_offers_undo(booker, hall):
    c = client_for(booker)
    c.post("/staff/bookings/hall/", form("2026-12-04"))
    b = Booking.objects.get()
    page = c.get(f"/staff/bookings/hall/{b.pk}/cancel/")
    assert page.status_code == 200 and "Yes, cancel it" in page.content.decode()
    b.refresh_from_db()
    assert not b.cancelled  # asking is not cancelling
    page = c.post(f"/staff/bookings/hall/{b.pk}/cancel/")
    assert page.status_code == 302 and page.url.endswith(f"&cancelled={b.pk}")
    week = c.get(page.url).content.decode()
    assert 'id="undo-cancel"' in week and "Undo" in week
    page = c.post(f"/staff/bookings/hall/{b.pk}/restore/")
    b.refresh_from_db()
    assert not b.cancelled and b.cancelled_by == "" and b.changed_by == "booker"
    # Undo is offered only to whoever cancelled it.
    assert 'id="undo-cancel"' not in c.get(page.url + f"&cancelled={b.pk}").content.decode()


def test_undo_is_refused_when_the_time_was_booked_meanwhile(booker, hall):
    c = client_for(booker)
    c.post("/staff/bookings/hall/", form("2026-12-04"))
    b = Booking.objects.get()
    c.post(f"/staff/bookings/hall/{b.pk}/cancel/")
    c.post("/staff/bookings/hall/", form("2026-12-04", "11:00", "12:00") | {"title": "Choir"})
    page = c.post(f"/staff/bookings/hall/{b.pk}/restore/", follow=True)
    assert "Not restored: This clashes with Choir" in page.content.decode()
    b.refresh_from_db()
    assert b.cancelled


def test_a_second_undo_says_it_is_booked_and_changes_nothing(booker, hall):
    c = client_for(booker)
    c.post("/staff/bookings/hall/", form("2026-12-04"))
    b = Booking.objects.get()
    c.post(f"/staff/bookings/hall/{b.pk}/cancel/")
    c.post(f"/staff/bookings/hall/{b.pk}/restore/")
    page = c.post(f"/staff/bookings/hall/{b.pk}/restore/", follow=True)
    assert page.status_code == 200 and "Already booked" in page.content.decode()
    b.refresh_from_db()
    assert not b.cancelled and Booking.objects.count() == 1


def test_a_viewer_may_neither_cancel_nor_undo(viewer, booker, hall):
    client_for(booker).post("/staff/bookings/hall/", form("2026-12-04"))
    b = Booking.objects.get()
    c = client_for(viewer)
    assert c.get(f"/staff/bookings/hall/{b.pk}/cancel/").status_code == 403
    assert c.post(f"/staff/bookings/hall/{b.pk}/cancel/").status_code == 403
    b.cancel(by="booker")
    assert c.post(f"/staff/bookings/hall/{b.pk}/restore/").status_code == 403
    b.refresh_from_db()
    assert b.cancelled
    assert c.get(f"/staff/bookings/hall/{b.pk}/restore/").status_code == 405


@pytest.mark.parametrize("value", ["99999999999999999999999", "-1", "0", "x", ""])
def test_a_bad_cancelled_parameter_shows_the_week_without_undo(booker, hall, value):
    page = client_for(booker).get(f"/staff/bookings/hall/?cancelled={value}")
    assert page.status_code == 200 and 'id="undo-cancel"' not in page.content.decode()


def test_a_booking_its_ical_feed_cancelled_is_not_restored_here(booker, hall):
    b = Booking.objects.create(
        zone=hall, title="Feed class", source=Booking.Source.ICAL,
        start=THURSDAY.replace(day=4), end=THURSDAY.replace(day=4, hour=11),
    )  # fmt: skip
    b.cancel(by=CANCELLED_BY_FEED)
    page = client_for(booker).post(f"/staff/bookings/hall/{b.pk}/restore/", follow=True)
    assert "cancelled in its iCal feed" in page.content.decode()
    b.refresh_from_db()
    assert b.cancelled
