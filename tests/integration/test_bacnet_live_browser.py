"""The staff BACnet page's live updates in real headless Chromium (#31), against the independent
bac-py controller: a discovery's and a browse's answers show seconds after the worker has them
although the page's own period is a minute (it checks every 2 s while a job is pending, and
goes back to its period once the answer shows); the live line reads the same before and after
an update; and "Shown to the BACnet network" follows changes made through the API while what an
engineer is typing in its search box stays."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from django.contrib.auth.models import Group, User
from playwright.sync_api import expect
from rest_framework.test import APIClient

from control.models import Zone
from core.roles import ENGINEERS
from feeds.models import Feed
from sensors import cache
from sensors.tasks import browse_bacnet, discover_bacnet
from tests.browser import logged_in_page
from tests.control import factories as f
from tests.integration.test_staff_ux_browser import in_thread
from tests.live_http import KioskServer
from tests.sensors import bacnet_peer
from tests.sensors.bacnet_peer import INSTANCE

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]

controller = bacnet_peer.controller
PASSWORD = "bacnet-live-browser-pw"
VIEWPORT = {"width": 1400, "height": 1000}
LIVE_LINE = re.compile(r"^Live · updated \d\d:\d\d · every (60|1) s$")


@pytest.fixture
def server(redis_client) -> Iterator[KioskServer]:
    cache.clear_all()
    user = User.objects.create_user("estates", password=PASSWORD, is_staff=True)
    user.groups.add(Group.objects.get(name=ENGINEERS))
    srv = KioskServer()
    srv.start()
    yield srv
    srv.stop()


def test_a_discovery_and_a_browse_show_as_soon_as_the_worker_has_them(server, controller, settings):
    settings.BMS_STAFF_LIVE_S = 60  # the page's own period: a minute
    with logged_in_page(server.url, "estates", PASSWORD, "/staff/bacnet/", VIEWPORT) as opened:
        page, seen = opened
        expect(page.locator("#live-status")).to_have_text(LIVE_LINE)
        page.fill("#discover-target", controller.address)
        page.get_by_role("button", name="Discover").click()
        expect(page.locator("#discovery")).to_contain_text("waiting for the worker")
        assert page.evaluate("window.bmsLive.nextMs") == 2000  # pending: checked every 2 s
        in_thread(lambda: discover_bacnet(controller.address))  # the worker's part
        # Well inside the page's minute: only the pending checks can have shown it.
        expect(page.locator("#discovery")).to_contain_text("1 answered.", timeout=20_000)
        page.wait_for_function("window.bmsLive.nextMs === 60000")  # done: back to its period
        expect(page.locator("#live-status")).to_have_text(LIVE_LINE)  # the same words

        page.locator(f"#browse-{INSTANCE}").click()
        browsed = page.locator("#browsed")
        expect(browsed).to_contain_text("waiting for the worker")
        in_thread(lambda: browse_bacnet(controller.address, INSTANCE))
        expect(browsed).to_contain_text("Boiler house controller", timeout=20_000)
        page.wait_for_function("window.bmsLive.nextMs === 60000")
        assert not seen["errors"], seen["errors"]


def _api_patch(url: str, data: dict) -> int:
    client = APIClient()
    client.force_authenticate(User.objects.get(username="estates"))
    return client.patch(url, data, format="json").status_code


def test_the_shown_section_follows_api_changes_and_keeps_a_half_typed_search(server, settings):
    settings.BMS_STAFF_LIVE_S = 1
    hall = in_thread(lambda: f.zone("Hall", temp=18.5))
    boiler = in_thread(lambda: Feed.objects.create(name="Boiler power", tag="plant", unit="kW"))
    path = "/staff/bacnet/?feed=boiler"
    with logged_in_page(server.url, "estates", PASSWORD, path, VIEWPORT) as opened:
        page, seen = opened
        expect(page.locator(f"#feed-match-{boiler.pk}")).to_be_visible()
        row = page.locator(f"#shown-zone-{hall.pk}")
        expect(row.locator(".setpoint-writes .state")).to_have_text("off")
        page.fill("#feed-search-text", "meter half-typ")  # not sent: an engineer still typing
        page.focus("#feed-search-text")

        assert in_thread(lambda: _api_patch(f"/api/v1/zones/{hall.pk}",
                                            {"bacnet_setpoint_writable": True})) == 200  # fmt: skip
        assert in_thread(lambda: _api_patch(f"/api/v1/feeds/{boiler.pk}",
                                            {"bacnet_export": True})) == 200  # fmt: skip
        expect(row.locator(".setpoint-writes .state")).to_have_text("on")
        expect(page.locator(f"#shown-feed-{boiler.pk}")).to_contain_text("Boiler power")
        # The page's search (boiler) is followed too: the feed is shown now, so not a match.
        expect(page.locator("#feed-matches")).to_contain_text("No feed not yet shown matches")
        expect(page.locator("#shown #changes")).to_contain_text("zone 'Hall'")
        expect(page.locator("#feed-search-text")).to_have_value("meter half-typ")
        expect(page.locator("#feed-search-text")).to_be_focused()
        assert not seen["errors"], seen["errors"]
    assert in_thread(lambda: Zone.objects.get(pk=hall.pk).bacnet_setpoint_writable)
