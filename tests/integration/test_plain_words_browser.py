"""A manager reads plant status and the energy page in real Chromium (#28 item 7): the
zone's strategy in words, no code identifier anywhere on the page, CUSUM and HDD explained
when the pointer rests on them, the tree's rooms not "Seminar room room"."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from django.contrib.auth.models import Group, User
from playwright.sync_api import expect

from control import runtime
from control.engine import specs
from control.models import Zone
from core.roles import VIEWERS
from energy.models import Meter, MeterNode
from feeds.models import Feed
from sensors.models import Site
from tests.browser import logged_in_page
from tests.live_http import KioskServer

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]

PASSWORD = "browser-test-pw"
IDENTIFIERS = ("optimum_start", "anti_short_cycle", "heating_plant", "calling")


@pytest.fixture
def server(redis_client) -> Iterator[tuple[KioskServer, dict]]:
    user = User.objects.create_user("manager", password=PASSWORD, is_staff=True)
    user.groups.add(Group.objects.get(name=VIEWERS))
    zone = Zone.objects.create(name="Seminar room", slug="seminar")
    runtime.save_zones(
        {
            zone.pk: {
                "mode": specs.OPTIMUM_START,
                "reason": "Booking 'Yoga' 10:00, pre-heat 45 min",
                "demand": True,
                "flags": [],
                "target": 21.0,
                "evaluated_at": time.time(),
            }
        }
    )
    site = Site.objects.create(name="CAT")
    building = MeterNode.objects.create(site=site, name="Lecture block", kind="building")
    MeterNode.objects.create(site=site, parent=building, name="Seminar room", kind="room")
    feed = Feed.objects.create(name="main kwh", tag="lecture", interval=10)
    Meter.objects.create(
        node=building, name="Main", fuel="electricity", source="cumulative", feed=feed
    )
    srv = KioskServer()
    srv.start()
    yield srv, {"site": site.pk, "building": building.pk}
    srv.stop()


def test_plant_status_and_energy_read_in_plain_words(server):
    srv, ids = server
    viewport = {"width": 1280, "height": 900}
    with logged_in_page(srv.url, "manager", PASSWORD, "/staff/control/", viewport) as (page, seen):
        row = page.locator("#zone-seminar")
        expect(row).to_contain_text("heating")
        expect(row).to_contain_text("warming up early")
        body = page.locator("body").inner_text()
        assert not [word for word in IDENTIFIERS if word in body]

        page.goto(f"{srv.url}/staff/energy/?site={ids['site']}&node={ids['building']}")
        tree = page.locator("body").inner_text()
        assert "Seminar room room" not in " ".join(tree.split())
        running = page.locator("abbr.help", has_text="Running difference").first
        running.hover()
        assert "actual minus expected" in running.get_attribute("title")
        degree_days = page.locator("abbr.help", has_text="Degree days").first
        assert "colder than the heating base" in degree_days.get_attribute("title")
        assert seen["errors"] == []
