"""One write path per object (control/bookings.py, control/holds.py): a booking or an override
made, moved or cancelled on the staff page, through the API or in the admin leaves the same
audit trail (who, when, from where), and a refusal leaves nothing saved."""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.core.exceptions import ValidationError
from django.test import Client
from django.utils import timezone

from control import bookings, holds
from control.models import Booking, OutputOverride, Override, Zone

from .test_output_override_api import _plant

pytestmark = pytest.mark.django_db
LONDON = ZoneInfo("Europe/London")
DAY = datetime(2030, 1, 7, tzinfo=LONDON)  # a Monday in winter: London is UTC


@pytest.fixture
def hall(redis_client) -> Zone:
    return Zone.objects.create(name="Hall", slug="hall", bookable=True)


@pytest.fixture
def page(engineer) -> Client:
    client = Client()
    client.force_login(engineer)
    return client


def _at(hour: int) -> datetime:
    return DAY.replace(hour=hour)


def _book_on_page(page: Client, hall: Zone) -> None:
    body = {"title": "Yoga", "day": "2030-01-07", "start": "10:00", "end": "12:00"}
    assert page.post(f"/staff/bookings/{hall.slug}/", body).status_code == 302


def _book_through_api(api, hall: Zone) -> None:
    body = {"zone": hall.pk, "title": "Yoga", "start": _at(10).isoformat(),
            "end": _at(12).isoformat()}  # fmt: skip
    assert api.post("/api/v1/bookings", body, format="json").status_code == 201


def _book_in_admin(page: Client, hall: Zone) -> None:
    body = {"zone": hall.pk, "title": "Yoga", "start_0": "2030-01-07", "start_1": "10:00:00",
            "end_0": "2030-01-07", "end_1": "12:00:00", "setpoint": ""}  # fmt: skip
    assert page.post("/admin/control/booking/add/", body).status_code == 302


@pytest.mark.parametrize(
    ("make", "source"),
    [
        (lambda page, api, hall: _book_on_page(page, hall), Booking.Source.STAFF_PAGE),
        (lambda page, api, hall: _book_through_api(api, hall), Booking.Source.API),
        (lambda page, api, hall: _book_in_admin(page, hall), Booking.Source.ADMIN),
    ],
    ids=["page", "api", "admin"],
)
def test_a_booking_says_who_made_it_and_from_where_whichever_way_it_came(
    page, engineer_api, hall, make, source
):
    make(page, engineer_api, hall)
    booking = Booking.objects.get()
    assert (booking.booked_by, booking.source) == ("engineer", source)
    assert (booking.start, booking.end) == (_at(10), _at(12))
    assert booking.changed_by == "" and booking.changed_at is None


@pytest.mark.parametrize("where", ["page", "api", "admin"])
def test_a_moved_booking_says_who_moved_it_and_when_whichever_way_it_was_moved(
    page, engineer_api, hall, booker, where
):
    booking = bookings.book(
        Booking(zone=hall, title="Yoga", start=_at(10), end=_at(12)), booker, Booking.Source.API
    )
    before = timezone.now()
    if where == "page":
        body = {"title": "Yoga", "day": "2030-01-07", "start": "13:00", "end": "15:00"}
        response = page.post(f"/staff/bookings/{hall.slug}/{booking.pk}/", body)
    elif where == "api":
        body = {"start": _at(13).isoformat(), "end": _at(15).isoformat()}
        response = engineer_api.patch(f"/api/v1/bookings/{booking.pk}", body, format="json")
    else:
        body = {"zone": hall.pk, "title": "Yoga", "start_0": "2030-01-07", "start_1": "13:00:00",
                "end_0": "2030-01-07", "end_1": "15:00:00", "setpoint": ""}  # fmt: skip
        response = page.post(f"/admin/control/booking/{booking.pk}/change/", body)
    assert response.status_code in (200, 302), response.content
    booking.refresh_from_db()
    assert (booking.start, booking.end) == (_at(13), _at(15))
    assert booking.booked_by == "booker" and booking.changed_by == "engineer"
    assert booking.changed_at >= before


@pytest.mark.parametrize("where", ["page", "api", "admin"])
def test_a_cancelled_booking_is_kept_with_who_cancelled_it(page, engineer_api, hall, where):
    booking = Booking.objects.create(zone=hall, title="Yoga", start=_at(10), end=_at(12))
    if where == "page":
        page.post(f"/staff/bookings/{hall.slug}/{booking.pk}/cancel/")
    elif where == "api":
        engineer_api.delete(f"/api/v1/bookings/{booking.pk}")
    else:
        page.post("/admin/control/booking/",
                  {"action": "cancel_selected", "_selected_action": [booking.pk]})  # fmt: skip
    booking.refresh_from_db()
    assert booking.cancelled and booking.cancelled_by == "engineer"
    assert booking.cancelled_at is not None


def test_a_clashing_booking_is_refused_by_the_write_path_and_not_saved(hall, booker):
    bookings.book(
        Booking(zone=hall, title="Choir", start=_at(10), end=_at(12)), booker, Booking.Source.API
    )
    with pytest.raises(ValidationError) as refused:
        bookings.book(
            Booking(zone=hall, title="Yoga", start=_at(11), end=_at(13)),
            booker,
            Booking.Source.STAFF_PAGE,
        )
    assert "clashes with Choir" in refused.value.message_dict["start"][0]
    assert list(Booking.objects.values_list("title", flat=True)) == ["Choir"]


@pytest.mark.parametrize("where", ["page", "api", "admin"])
def test_an_override_records_who_made_it_whichever_way_it_came(page, engineer_api, hall, where):
    if where == "page":
        body = {"target": f"zone:{hall.pk}", "state": "1", "hours": "2", "reason": "Service"}
        response = page.post("/staff/control/overrides/", body)
    elif where == "api":
        expires = (timezone.now() + timedelta(hours=2)).isoformat()
        body = {"zone": hall.pk, "state": True, "expires": expires, "reason": "Service"}
        response = engineer_api.post("/api/v1/overrides", body, format="json")
    else:
        now = timezone.localtime()
        later = now + timedelta(hours=2)
        body = {"zone": hall.pk, "state": "on", "reason": "Service",
                "starts_0": f"{now:%Y-%m-%d}", "starts_1": f"{now:%H:%M:%S}",
                "expires_0": f"{later:%Y-%m-%d}", "expires_1": f"{later:%H:%M:%S}"}  # fmt: skip
        response = page.post("/admin/control/override/add/", body)
    assert response.status_code in (201, 302), response.content
    override = Override.objects.get()
    assert override.created_by.get_username() == "engineer"
    assert override.zone == hall and override.state and override.is_active()


def test_an_override_the_model_refuses_is_not_saved(hall, engineer):
    now = timezone.now()
    with pytest.raises(ValidationError):
        holds.place(
            Override(zone=hall, state=True, starts=now, expires=now - timedelta(minutes=1),
                     reason="Backwards"),
            engineer,
        )  # fmt: skip
    assert not Override.objects.exists()


def test_an_output_override_starts_when_it_is_made_and_is_cancelled_with_who(
    redis_client, engineer
):
    plant = _plant("Boiler house")
    now = timezone.now()
    held = holds.place(
        OutputOverride(
            plant=plant,
            value=40.0,
            starts=now - timedelta(days=1),  # a start asked for is not taken: it starts now
            expires=now + timedelta(hours=1),
            reason="Commissioning",
        ),
        engineer,
        now=now,
    )
    held.refresh_from_db()
    assert held.starts == now and held.created_by == engineer and held.is_active()
    holds.cancel(held, engineer)
    held.refresh_from_db()
    assert held.cancelled and held.cancelled_by == "engineer" and not held.is_active()
