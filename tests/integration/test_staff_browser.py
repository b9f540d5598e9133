"""Staff pages in real headless Chromium against a real server: each renders, logs in through
the real login form, raises no console error and asks no host but ours for anything."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta
from urllib.parse import urlparse

import pytest
from django.contrib.auth.models import Group, User
from django.utils import timezone
from playwright.sync_api import Page

from alarms.lifecycle import raise_alarm
from control.models import Booking, Zone
from core.roles import ENGINEERS
from feeds.models import Feed
from feeds.store import service
from sensors.models import Node, Sensor
from tests.browser import logged_in_page
from tests.live_http import KioskServer

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]

PASSWORD = "browser-test-pw"


@pytest.fixture
def site_data(redis_client) -> dict:
    user = User.objects.create_user("estates", password=PASSWORD, is_staff=True)
    user.groups.add(Group.objects.get(name=ENGINEERS))
    node = Node(name="emontx-room", interval=10)
    node.set_new_key()
    node.save()
    feed = Feed.objects.create(name="room:temp", tag="room", unit="°C", interval=10)
    sensor = Sensor.objects.create(node=node, key="temp", feed=feed)
    zone = Zone.objects.create(name="Lecture theatre", slug="lecture", temperature_sensor=sensor)
    now = int(time.time())
    service.log_points((feed.pk, now - 3600 + i * 10, 17 + i / 120) for i in range(360))
    start = timezone.now() + timedelta(hours=1)
    Booking.objects.create(zone=zone, title="Yoga", start=start, end=start + timedelta(hours=2))
    raise_alarm("relay:test", "Relay 'Boiler' did not confirm", source="relay")
    return {"feed": feed, "zone": zone}


@pytest.fixture
def server(site_data) -> Iterator[KioskServer]:
    srv = KioskServer()
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture
def page(server) -> Iterator[tuple[Page, dict]]:
    viewport = {"width": 1400, "height": 1000}
    with logged_in_page(server.url, "estates", PASSWORD, "/staff/", viewport) as opened:
        yield opened


STAFF_PAGES = {
    "/staff/": "Site overview",
    "/staff/control/": "Plant status",
    "/staff/bookings/": "Book a room",
    "/staff/bookings/lecture/": "Lecture theatre",
    "/staff/control/replay/lecture/": "Replay",
    "/staff/alarms/": "Alarms",
    "/staff/findings/": "Findings",
    "/staff/feeds/": "Feed explorer",
    "/staff/schedules/": "Schedules",
    "/staff/schedules/new/": "New schedule",
    "/staff/schedules/rooms/": "Rooms in buildings",
    "/staff/calendars/": "Site calendars",
    "/staff/plants/": "Heating plants and solar circuits",
    "/staff/plants/new/": "New heating plant",
    "/staff/plants/solar/new/": "New solar circuit",
    "/staff/bacnet/": "BACnet controllers",
}


def test_every_staff_page_renders_without_errors(page, server):
    browser_page, seen = page
    for path, heading in STAFF_PAGES.items():
        response = browser_page.goto(server.url + path)
        assert response.status == 200, path
        assert heading in browser_page.inner_text("h1"), path
        overflow = browser_page.evaluate("document.documentElement.scrollWidth > innerWidth + 1")
        assert not overflow, f"{path} scrolls sideways"
    assert seen["errors"] == []
    assert seen["hosts"] == {urlparse(server.url).netloc}


def test_overview_shows_the_zone_booking_and_alarm(page, server):
    browser_page, _ = page
    browser_page.goto(server.url + "/staff/")
    zone_row = browser_page.inner_text("#zone-lecture")
    assert "Yoga" in zone_row and "°C" in zone_row
    assert "did not confirm" in browser_page.inner_text("#alarms")
    browser_page.click("#alarms button")  # acknowledge
    browser_page.wait_for_url("**/staff/")
    assert "acknowledged by estates" in browser_page.inner_text("#alarms")


def test_feed_explorer_draws_the_chosen_feed_and_exports_csv(page, server, site_data):
    browser_page, seen = page
    browser_page.goto(server.url + "/staff/feeds/")
    browser_page.click('button[data-span="3600"]')
    browser_page.check(f'#feed-list input[value="{site_data["feed"].pk}"]')
    browser_page.wait_for_function("Chart.getChart('chart').data.datasets.length === 1")
    points = browser_page.evaluate(
        "Chart.getChart('chart').data.datasets[0].data.filter((p) => p.y !== null).length"
    )
    assert points > 100
    export = browser_page.get_attribute("#export", "href")
    assert export.startswith(f"/staff/feeds/export.csv?ids={site_data['feed'].pk}&")
    csv_text = browser_page.evaluate(f"fetch('{export}').then((r) => r.text())")
    lines = csv_text.strip().splitlines()
    assert lines[0].startswith("time (Europe/London),unix,room:room:temp")
    assert len(lines) > 100
    assert seen["errors"] == []
