"""Staff pages: plant status, overrides, booking calendar (create / move / cancel), replay;
each permission rule tried from both sides."""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.test import Client
from django.utils import timezone

from control.drivers.simulated_board import RelayBoard
from control.models import Booking, Override, Zone
from control.runner import run_tick

from . import factories as f

pytestmark = pytest.mark.django_db
LONDON = ZoneInfo("Europe/London")


def client_for(user) -> Client:
    c = Client()
    c.force_login(user)
    return c


@pytest.fixture
def hall(redis_client):
    return Zone.objects.create(name="Hall", slug="hall")


def next_monday() -> datetime:
    today = timezone.now().astimezone(LONDON).date()
    return datetime.combine(
        today + timedelta(days=7 - today.weekday()), datetime.min.time(), tzinfo=LONDON
    )


class TestPlantStatus:
    def test_anonymous_is_sent_to_log_in(self, hall):
        response = Client().get("/staff/control/")
        assert response.status_code == 302 and "/admin/login/" in response["Location"]

    def test_a_user_without_a_role_is_refused(self, hall, django_user_model):
        nobody = django_user_model.objects.create_user("nobody", password="x")
        assert client_for(nobody).get("/staff/control/").status_code == 403

    def test_it_shows_each_zone_and_actuator_with_why(self, viewer, redis_client):
        with RelayBoard(coils=8) as board:
            valve = f.relay("Hall valve", board, coil=0)
            f.zone("Hall", valve, temp=4.0)
            run_tick()
        page = client_for(viewer).get("/staff/control/").content.decode()
        assert "Hall valve" in page and "Frost protection: 4.0 °C" in page
        assert "Set override" not in page  # viewers cannot override

    def test_it_says_who_controls_each_actuator(self, viewer, redis_client):
        """A released relay showed 'ON, confirmed' and an old booking as why."""
        with RelayBoard(coils=8) as board:
            valve = f.relay("Hall valve", board, coil=0)
            boiler = f.relay("Boiler", board, coil=1, kind="boiler")
            spare = f.relay("Spare relay", board, coil=2)
            from control.models import HeatingPlant

            HeatingPlant.objects.create(name="Boiler house", boiler=boiler)
            zone = f.zone("Hall", valve, temp=4.0)
            run_tick()
            zone.actuators.remove(valve)
            run_tick()
        page = client_for(viewer).get("/staff/control/").content.decode()
        assert "heating plant &#x27;Boiler house&#x27;" in page
        assert "Released from zone &#x27;Hall&#x27;: idle state OFF" in page
        assert page.count("not controlled — idle state OFF") == 2  # the valve and the spare
        assert spare.name in page

    def test_engineer_sets_and_cancels_an_override(self, engineer, hall):
        c = client_for(engineer)
        response = c.post(
            "/staff/control/overrides/",
            {"target": f"zone:{hall.pk}", "state": "1", "hours": "2", "reason": "drying the floor"},
        )
        assert response.status_code == 302
        o = Override.objects.get()
        assert o.zone == hall and o.state and o.created_by == engineer
        assert timedelta(hours=1.9) < o.expires - o.starts <= timedelta(hours=2)
        c.post(f"/staff/control/overrides/{o.pk}/cancel/")
        o.refresh_from_db()
        assert o.cancelled

    def test_a_bad_override_is_refused_with_the_field_named(self, engineer, hall):
        response = client_for(engineer).post(
            "/staff/control/overrides/",
            {"target": "zone:999", "state": "1", "hours": "-1", "reason": ""},
            follow=True,
        )
        page = response.content.decode()
        assert "target:" in page and "hours:" in page and "reason:" in page
        assert not Override.objects.exists()

    def test_a_booker_may_not_override(self, booker, hall):
        response = client_for(booker).post(
            "/staff/control/overrides/",
            {"target": f"zone:{hall.pk}", "state": "1", "hours": "1", "reason": "x"},
        )
        assert response.status_code == 403 and not Override.objects.exists()


class TestBookingCalendar:
    def form(self, day, start="10:00", end="12:00", title="Yoga", **extra):
        return {"title": title, "day": day.isoformat(), "start": start, "end": end, **extra}

    def test_booker_creates_a_booking_shown_in_the_week(self, booker, hall):
        monday = next_monday()
        c = client_for(booker)
        response = c.post("/staff/bookings/hall/", self.form(monday.date()))
        assert response.status_code == 302
        b = Booking.objects.get()
        assert (b.title, b.source, b.booked_by) == ("Yoga", "staff", "booker")
        assert b.start == monday.replace(hour=10) and b.end == monday.replace(hour=12)
        page = c.get(f"/staff/bookings/hall/?week={monday.date()}").content.decode()
        assert "10:00–12:00</strong> Yoga" in page

    @pytest.mark.parametrize(
        "changes, message",
        [
            ({"end": "09:00"}, "must end after it starts"),
            ({"title": ""}, "This field is required"),
            ({"setpoint": "45"}, "less than or equal to 30"),
            ({"start": "25:00"}, "Enter a valid time"),
        ],
    )
    def test_bad_bookings_are_refused_and_say_why(self, booker, hall, changes, message):
        response = client_for(booker).post(
            "/staff/bookings/hall/", {**self.form(next_monday().date()), **changes}
        )
        assert response.status_code == 400
        assert message in response.content.decode()
        assert not Booking.objects.exists()

    def test_a_clash_is_refused(self, booker, hall):
        c = client_for(booker)
        day = next_monday().date()
        c.post("/staff/bookings/hall/", self.form(day))
        response = c.post("/staff/bookings/hall/", self.form(day, "11:00", "13:00", "Choir"))
        assert response.status_code == 400 and "clashes with Yoga" in response.content.decode()
        assert Booking.objects.count() == 1

    def test_move_and_cancel(self, booker, hall):
        c = client_for(booker)
        day = next_monday().date()
        c.post("/staff/bookings/hall/", self.form(day))
        b = Booking.objects.get()
        assert c.get(f"/staff/bookings/hall/{b.pk}/").status_code == 200
        c.post(
            f"/staff/bookings/hall/{b.pk}/", self.form(day + timedelta(days=1), "14:00", "15:30")
        )
        b.refresh_from_db()
        assert b.start.astimezone(LONDON).strftime("%a %H:%M") == "Tue 14:00"
        c.post(f"/staff/bookings/hall/{b.pk}/cancel/")
        b.refresh_from_db()
        assert b.cancelled

    def test_a_move_by_another_booker_records_who_and_when(self, booker, engineer, hall):
        """Bookers may move anyone's booking, but only a cancel recorded who."""
        day = next_monday().date()
        client_for(booker).post("/staff/bookings/hall/", self.form(day))
        b = Booking.objects.get()
        assert (b.changed_by, b.changed_at) == ("", None)
        before = timezone.now()
        c = client_for(engineer)
        c.post(f"/staff/bookings/hall/{b.pk}/", self.form(day, "14:00", "15:30", "Yoga (moved)"))
        b.refresh_from_db()
        assert b.booked_by == "booker" and b.changed_by == engineer.get_username()
        assert b.changed_at >= before
        page = c.get(f"/staff/bookings/hall/{b.pk}/").content.decode()
        assert f"last changed by {engineer.get_username()}" in page

    def test_viewer_reads_but_may_not_write(self, viewer, booker, hall):
        client_for(booker).post("/staff/bookings/hall/", self.form(next_monday().date()))
        b = Booking.objects.get()
        c = client_for(viewer)
        page = c.get(f"/staff/bookings/hall/?week={next_monday().date()}").content.decode()
        assert "Yoga" in page and "may read bookings only" in page
        assert (
            c.post(
                "/staff/bookings/hall/", self.form(next_monday().date(), "14:00", "15:00")
            ).status_code
            == 403
        )
        assert c.post(f"/staff/bookings/hall/{b.pk}/cancel/").status_code == 403
        assert Booking.objects.filter(cancelled=False).count() == 1

    def test_unbookable_room_and_unknown_room(self, booker, hall):
        hall.bookable = False
        hall.save()
        response = client_for(booker).post("/staff/bookings/hall/", self.form(next_monday().date()))
        assert response.status_code == 400 and "not bookable" in response.content.decode()
        assert client_for(booker).get("/staff/bookings/nowhere/").status_code == 404

    def test_a_bad_week_parameter_shows_this_week(self, viewer, hall):
        assert client_for(viewer).get("/staff/bookings/hall/?week=garbage").status_code == 200


def test_replay_page(engineer, redis_client):
    zone = f.zone("Hall")
    page = client_for(engineer).get(
        "/staff/control/replay/hall/", {"start": "2026-01-14", "end": "2026-01-14", "step": "600"}
    )
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="heating-hours"' in html and "Samples" in html
    bad = client_for(engineer).get(
        "/staff/control/replay/hall/", {"start": "2026-01-14", "end": "2026-01-01"}
    )
    assert "Must not be before the start" in bad.content.decode()
    assert zone.slug == "hall"


def test_status_api_for_staff_only(viewer_api, anon_api, redis_client):
    with RelayBoard(coils=8) as board:
        valve = f.relay("Hall valve", board, coil=0)
        f.zone("Hall", valve, temp=4.0)
        run_tick()
    body = viewer_api.get("/api/v1/control/status").json()
    [zone] = body["zones"]
    assert zone["mode"] == "frost_protection" and zone["demand"] is True
    [act] = body["actuators"]
    assert act["state"] == "ON" and act["why"].startswith("Frost protection")
    assert body["last_tick"]["zones"] == 1
    assert anon_api.get("/api/v1/control/status").status_code == 401


def test_a_booker_setting_an_override_gets_the_styled_refusal(booker, redis_client):
    """Other refusals show the styled "Not allowed" page; this one was bare."""
    response = client_for(booker).post("/staff/control/overrides/", {"target": "x"})
    assert response.status_code == 403
    page = response.content.decode()
    assert "<h1>Not allowed</h1>" in page and "Only engineers may override plant." in page
    assert 'id="log-out"' in page  # the staff layout, with its navigation
