"""One set of booking rules (Booking.clean) for the API, the
staff page and the admin; who booked and the source are the server's; DELETE cancels."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from control.models import Booking, Override, Zone
from control.snapshot import build

START = timezone.now().replace(microsecond=0) + timedelta(days=2)


def _iso(at) -> str:
    return at.isoformat()


@pytest.fixture
def zone(db) -> Zone:
    return Zone.objects.create(name="Hall", slug="hall")


def _payload(zone: Zone, start=START, hours: float = 2, **extra) -> dict:
    return {
        "zone": zone.pk,
        "title": "Yoga",
        "start": _iso(start),
        "end": _iso(start + timedelta(hours=hours)),
        **extra,
    }


def test_a_clash_is_refused_naming_the_field(booker_api, zone):
    assert booker_api.post("/api/v1/bookings", _payload(zone), format="json").status_code == 201
    clash = booker_api.post(
        "/api/v1/bookings", _payload(zone, start=START + timedelta(hours=1)), format="json"
    )
    assert clash.status_code == 400
    assert "clashes with Yoga" in clash.json()["fields"]["start"][0]
    assert Booking.objects.count() == 1


def test_back_to_back_bookings_do_not_clash(booker_api, zone):
    booker_api.post("/api/v1/bookings", _payload(zone), format="json")
    after = booker_api.post(
        "/api/v1/bookings", _payload(zone, start=START + timedelta(hours=2)), format="json"
    )
    assert after.status_code == 201, after.json()


def test_a_cancelled_booking_frees_its_slot(booker_api, zone):
    pk = booker_api.post("/api/v1/bookings", _payload(zone), format="json").json()["id"]
    booker_api.delete(f"/api/v1/bookings/{pk}")
    assert booker_api.post("/api/v1/bookings", _payload(zone), format="json").status_code == 201


def test_moving_a_booking_onto_another_is_refused(booker_api, zone):
    booker_api.post("/api/v1/bookings", _payload(zone), format="json")
    later = START + timedelta(hours=5)
    pk = booker_api.post("/api/v1/bookings", _payload(zone, start=later), format="json").json()[
        "id"
    ]
    moved = booker_api.patch(
        f"/api/v1/bookings/{pk}",
        {"start": _iso(START + timedelta(hours=1)), "end": _iso(later)},
        format="json",
    )
    assert moved.status_code == 400 and "start" in moved.json()["fields"]
    # Moving it within its own time (it does not clash with itself) is fine.
    assert (
        booker_api.patch(
            f"/api/v1/bookings/{pk}", {"end": _iso(later + timedelta(hours=1))}, format="json"
        ).status_code
        == 200
    )


def test_length_is_bounded_at_the_setting(booker_api, zone, settings):
    settings.BMS_BOOKING_MAX_DAYS = 14
    at_limit = booker_api.post("/api/v1/bookings", _payload(zone, hours=14 * 24), format="json")
    assert at_limit.status_code == 201, at_limit.json()
    ten_years = booker_api.post(
        "/api/v1/bookings",
        _payload(zone, start=START + timedelta(days=30), hours=24 * 3650, setpoint=30),
        format="json",
    )
    assert ten_years.status_code == 400
    assert "at most 14 days" in ten_years.json()["fields"]["end"][0]
    just_over = booker_api.post(
        "/api/v1/bookings",
        _payload(zone, start=START + timedelta(days=30), hours=14 * 24 + 1 / 60),
        format="json",
    )
    assert just_over.status_code == 400


@pytest.mark.parametrize(("setpoint", "ok"), [(5, True), (27.9, True), (28, False), (31, False)])
def test_setpoint_bounds(booker_api, zone, setpoint, ok):
    # The zone's cut-off is 28 °C (the default): a setpoint at it could never be reached.
    response = booker_api.post("/api/v1/bookings", _payload(zone, setpoint=setpoint), format="json")
    assert (response.status_code == 201) is ok, response.json()
    if not ok:
        assert "setpoint" in response.json()["fields"]


def test_booked_by_and_source_are_the_servers(booker_api, booker, zone):
    response = booker_api.post(
        "/api/v1/bookings",
        _payload(zone, booked_by="mallory", source="ical", ical_uid="x|y"),
        format="json",
    )
    assert response.status_code == 201
    booking = Booking.objects.get(pk=response.json()["id"])
    assert (booking.booked_by, booking.source, booking.ical_uid) == (booker.username, "api", "")
    patched = booker_api.patch(
        f"/api/v1/bookings/{booking.pk}", {"booked_by": "mallory", "source": "ical"}, format="json"
    )
    assert patched.status_code == 200
    booking.refresh_from_db()
    assert (booking.booked_by, booking.source) == (booker.username, "api")
    # A change through the API records who made it, as the staff page does.
    assert booking.changed_by == booker.username and booking.changed_at is not None


def test_delete_cancels_and_keeps_the_booking(booker_api, booker, zone):
    pk = booker_api.post("/api/v1/bookings", _payload(zone), format="json").json()["id"]
    assert booker_api.delete(f"/api/v1/bookings/{pk}").status_code == 204
    booking = Booking.objects.get(pk=pk)
    assert booking.cancelled and booking.cancelled_by == booker.username
    assert booking.cancelled_at is not None
    shown = booker_api.get(f"/api/v1/bookings/{pk}").json()
    assert shown["cancelled"] is True and shown["cancelled_by"] == booker.username
    # A cancelled booking is not changed back through the API, and is out of control decisions.
    again = booker_api.patch(f"/api/v1/bookings/{pk}", {"title": "Back"}, format="json")
    assert again.status_code == 400 and "cancelled" in again.json()["fields"]
    booking.start, booking.end = (
        timezone.now() - timedelta(minutes=5),
        timezone.now() + timedelta(hours=1),
    )
    booking.save()
    assert build(timezone.now()).snapshot.zones[0].bookings == ()


def test_a_viewer_cannot_cancel(viewer_api, booker_api, zone):
    pk = booker_api.post("/api/v1/bookings", _payload(zone), format="json").json()["id"]
    assert viewer_api.delete(f"/api/v1/bookings/{pk}").status_code == 403
    assert Booking.objects.get(pk=pk).cancelled is False


def test_an_ical_booking_is_changed_at_its_source(booker_api, zone):
    booking = Booking.objects.create(
        zone=zone, title="Class", start=START, end=START + timedelta(hours=1), source="ical"
    )
    response = booker_api.patch(f"/api/v1/bookings/{booking.pk}", {"title": "X"}, format="json")
    assert response.status_code == 400 and "source" in response.json()["fields"]


def test_delete_cancels_an_override(engineer_api, engineer, db):
    zone = Zone.objects.create(name="Store", slug="store")
    override = Override.objects.create(
        zone=zone, state=True, expires=timezone.now() + timedelta(hours=1), reason="test"
    )
    assert engineer_api.delete(f"/api/v1/overrides/{override.pk}").status_code == 204
    override.refresh_from_db()
    assert override.cancelled and override.cancelled_by == engineer.username
    assert not override.is_active()


def test_a_booker_cannot_cancel_an_override(booker_api, db):
    zone = Zone.objects.create(name="Store", slug="store")
    override = Override.objects.create(
        zone=zone, state=True, expires=timezone.now() + timedelta(hours=1), reason="test"
    )
    assert booker_api.delete(f"/api/v1/overrides/{override.pk}").status_code == 403
    override.refresh_from_db()
    assert not override.cancelled


# --- the admin keeps the same rules ------------------------------------------------------------


def test_the_admin_refuses_a_clash_and_records_who_booked(client, superuser, zone):
    client.force_login(superuser)
    Booking.objects.create(zone=zone, title="Yoga", start=START, end=START + timedelta(hours=2))
    local = timezone.localtime(START + timedelta(hours=1))
    form = {
        "zone": zone.pk,
        "title": "Clash",
        "start_0": local.strftime("%Y-%m-%d"),
        "start_1": local.strftime("%H:%M:%S"),
        # The end's own date: run near midnight, +2 h is tomorrow (was a time-of-day flake).
        "end_0": (local + timedelta(hours=2)).strftime("%Y-%m-%d"),
        "end_1": (local + timedelta(hours=2)).strftime("%H:%M:%S"),
    }
    response = client.post("/admin/control/booking/add/", form)
    assert response.status_code == 200 and b"clashes with" in response.content
    assert Booking.objects.count() == 1
    later = timezone.localtime(START + timedelta(hours=3))
    form.update(
        start_0=later.strftime("%Y-%m-%d"),
        start_1=later.strftime("%H:%M:%S"),
        end_0=(later + timedelta(minutes=30)).strftime("%Y-%m-%d"),
        end_1=(later + timedelta(minutes=30)).strftime("%H:%M:%S"),
        title="Fine",
    )
    assert client.post("/admin/control/booking/add/", form).status_code == 302
    fine = Booking.objects.get(title="Fine")
    assert (fine.booked_by, fine.source) == (superuser.username, "admin")


def test_the_admin_cannot_delete_bookings(client, superuser, zone):
    client.force_login(superuser)
    booking = Booking.objects.create(
        zone=zone, title="Yoga", start=START, end=START + timedelta(hours=2)
    )
    response = client.post(f"/admin/control/booking/{booking.pk}/delete/", {"post": "yes"})
    assert response.status_code == 403
    assert Booking.objects.filter(pk=booking.pk).exists()
