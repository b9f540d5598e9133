"""The one staff-page gate (core/pages.py), tried from both sides on every staff page: each
staff role gets the page, a logged-in account without a role gets the one 403 page ("Not
allowed", saying why), anonymous goes to the login page."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from control.models import Booking, HeatingPlant, SolarCircuit
from core.pages import NO_STAFF_ROLE
from sensors.models import Actuator, Site
from tests.control import factories as f

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(redis_client) -> dict:
    hall = f.zone("Hall", bookable=True)
    start = timezone.now() + timezone.timedelta(days=2)
    booking = Booking.objects.create(
        zone=hall, title="Choir", start=start, end=start + timezone.timedelta(hours=1)
    )
    boiler = Actuator.objects.create(name="Boiler", kind="boiler", host="127.0.0.1", coil=1)
    plant = HeatingPlant.objects.create(name="Boiler house", boiler=boiler)
    sensor = hall.temperature_sensor
    pump = Actuator.objects.create(name="Solar pump", kind="pump", host="127.0.0.1", coil=2)
    solar = SolarCircuit.objects.create(
        name="Roof", collector_sensor=sensor, tank_sensor=sensor, pump=pump
    )
    Site.objects.create(name="CAT", slug="cat")
    return {"hall": hall, "booking": booking, "plant": plant, "solar": solar}


# Every staff page a person opens (GET), as a function of the world above.
PAGES = {
    "overview": lambda w: "/staff/",
    "feed explorer": lambda w: "/staff/feeds/",
    "alarms": lambda w: "/staff/alarms/",
    "plant status": lambda w: "/staff/control/",
    "replay": lambda w: f"/staff/control/replay/{w['hall'].slug}/",
    "plant schematic": lambda w: f"/staff/control/plant/{w['plant'].pk}/",
    "solar schematic": lambda w: f"/staff/control/solar/{w['solar'].pk}/",
    "bookings": lambda w: "/staff/bookings/",
    "room calendar": lambda w: f"/staff/bookings/{w['hall'].slug}/",
    "energy": lambda w: "/staff/energy/",
}
# What each staff page does on a POST (forms): refused the same way before the form is read.
POSTS = {
    "set override": lambda w: "/staff/control/overrides/",
    "set output override": lambda w: "/staff/control/output-overrides/",
    "book": lambda w: f"/staff/bookings/{w['hall'].slug}/",
    "move a booking": lambda w: f"/staff/bookings/{w['hall'].slug}/{w['booking'].pk}/",
    "cancel a booking": lambda w: f"/staff/bookings/{w['hall'].slug}/{w['booking'].pk}/cancel/",
    "acknowledge all alarms": lambda w: "/staff/alarms/acknowledge-all",
    "import the energy model": lambda w: "/staff/energy/model/",
}


def _as(user: User | None) -> Client:
    client = Client()
    if user is not None:
        client.force_login(user)
    return client


@pytest.fixture
def roleless(db) -> User:
    return User.objects.create_user("norole", is_staff=True)


# Pages only engineers open: a replay runs the control strategies over history (CPU), which
# CONTROL.md gives to engineers.
ENGINEERS_ONLY = {"replay"}


@pytest.mark.parametrize("role", ["viewer", "booker", "engineer"])
@pytest.mark.parametrize("page", PAGES)
def test_every_staff_role_gets_every_staff_page(world, page, role, request):
    response = _as(request.getfixturevalue(role)).get(PAGES[page](world))
    allowed = role == "engineer" or page not in ENGINEERS_ONLY
    assert response.status_code == (200 if allowed else 403)


@pytest.mark.parametrize("page", PAGES)
def test_an_account_without_a_role_gets_the_one_not_allowed_page(world, roleless, page):
    response = _as(roleless).get(PAGES[page](world))
    assert response.status_code == 403
    html = response.content.decode()
    assert "<h1>Not allowed</h1>" in html and NO_STAFF_ROLE in html


@pytest.mark.parametrize("page", PAGES)
def test_anonymous_is_sent_to_log_in_and_back(world, page):
    path = PAGES[page](world)
    response = Client().get(path)
    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/") and "next=" in response["Location"]


@pytest.mark.parametrize("action", POSTS)
def test_a_post_without_a_role_is_refused_and_changes_nothing(world, roleless, action):
    response = _as(roleless).post(POSTS[action](world), {"reason": "x", "up_to": "1"})
    assert response.status_code == 403 and NO_STAFF_ROLE in response.content.decode()
    world["booking"].refresh_from_db()
    assert not world["booking"].cancelled


@pytest.mark.parametrize("action", POSTS)
def test_an_anonymous_post_is_sent_to_log_in(world, action):
    response = Client().post(POSTS[action](world), {})
    assert response.status_code == 302 and response["Location"].startswith("/admin/login/")


def test_an_engineers_only_action_refused_to_a_viewer_shows_the_same_page_with_its_reason(
    viewer, redis_client
):
    response = _as(viewer).post("/staff/alarms/acknowledge-all", {"up_to": "1"})
    assert response.status_code == 403
    html = response.content.decode()
    assert "<h1>Not allowed</h1>" in html and "Only engineers may acknowledge alarms." in html
