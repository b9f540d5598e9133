"""The staff BACnet page's "Shown to the BACnet network" section in real headless Chromium (#31):
an engineer logs in, switches a zone's setpoint writes on and sees it on (and in the change
history), finds a feed by name among others and shows it on BACnet; a viewer sees the same
state with no switch, and a hand-made POST from the viewer's own session is refused."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlparse

import pytest
from django.contrib.auth.models import Group, User
from playwright.sync_api import expect

from control.models import ProgrammeChange, Zone
from core.roles import ENGINEERS, VIEWERS
from feeds.models import Feed
from tests.browser import logged_in_page
from tests.control import factories as f
from tests.integration.test_staff_ux_browser import in_thread
from tests.live_http import KioskServer

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]

PASSWORD = "bacnet-shown-pw"
VIEWPORT = {"width": 1400, "height": 1000}


@pytest.fixture
def site(redis_client) -> dict:
    for name, group in (("estates", ENGINEERS), ("visitor", VIEWERS)):
        user = User.objects.create_user(name, password=PASSWORD, is_staff=True)
        user.groups.add(Group.objects.get(name=group))
    Feed.objects.bulk_create(Feed(name=f"Meter {n}", tag="site", unit="kWh") for n in range(40))
    return {
        "hall": f.zone("Hall", temp=18.5),
        "boiler": Feed.objects.create(name="Boiler power", tag="plant", unit="kW"),
    }


@pytest.fixture
def server(site) -> Iterator[KioskServer]:
    srv = KioskServer()
    srv.start()
    yield srv
    srv.stop()


def test_an_engineer_switches_a_zones_setpoint_writes_on_and_shows_a_feed(server, site):
    hall, boiler = site["hall"], site["boiler"]
    with logged_in_page(server.url, "estates", PASSWORD, "/staff/bacnet/", VIEWPORT) as opened:
        page, seen = opened
        row = page.locator(f"#shown-zone-{hall.pk}")
        expect(row.locator(".setpoint-writes .state")).to_have_text("off")
        expect(row.locator(".occupancy-writes .state")).to_have_text("off")
        page.get_by_role("button", name="Switch Hall setpoint writes on").click()
        expect(page.get_by_text("Hall: BACnet setpoint writes accepted no → yes.")).to_be_visible()
        expect(row.locator(".setpoint-writes .state")).to_have_text("on")
        expect(row.locator(".occupancy-writes .state")).to_have_text("off")
        changes = page.locator("#shown #changes")
        expect(changes).to_contain_text("zone 'Hall'")
        expect(changes).to_contain_text("BACnet setpoint writes accepted no → yes")
        expect(changes).to_contain_text("changed on the staff BACnet page")

        # A feed among many, found by name and shown.
        expect(page.locator("#shown-feeds")).to_contain_text("No feeds shown on BACnet.")
        page.fill("#feed-search-text", "boiler")
        page.get_by_role("button", name="Find").click()
        expect(page.locator("#feed-matches tbody tr")).to_have_count(1)
        page.get_by_role("button", name="Show plant:Boiler power on BACnet").click()
        expect(page.locator(f"#shown-feed-{boiler.pk}")).to_contain_text(
            f"analog-input,{1_000_000 + boiler.pk}"
        )
        expect(page.locator("#feed-search-text")).to_have_value("boiler")  # the search kept
        expect(page.locator("#feed-matches")).to_contain_text("No feed not yet shown matches")
        page.fill("#feed-search-text", "meter")
        page.get_by_role("button", name="Find").click()
        expect(page.locator("#feed-matches tbody tr")).to_have_count(20)  # the search's bound
        expect(page.locator("#feed-matches-more")).to_be_visible()
        assert not seen["errors"], seen["errors"]
        assert seen["hosts"] == {urlparse(server.url).netloc}

    zone = in_thread(lambda: Zone.objects.get(pk=hall.pk))
    assert zone.bacnet_setpoint_writable and not zone.bacnet_occupancy_writable
    assert in_thread(lambda: Feed.objects.get(pk=boiler.pk).bacnet_export)


def test_a_viewer_sees_the_state_but_no_switch_and_a_hand_made_post_is_refused(server, site):
    hall = site["hall"]
    in_thread(lambda: Zone.objects.filter(pk=hall.pk).update(bacnet_occupancy_writable=True))
    with logged_in_page(server.url, "visitor", PASSWORD, "/staff/bacnet/", VIEWPORT) as opened:
        page, seen = opened
        row = page.locator(f"#shown-zone-{hall.pk}")
        expect(row.locator(".setpoint-writes .state")).to_have_text("off")
        expect(row.locator(".occupancy-writes .state")).to_have_text("on")
        expect(page.get_by_text("Read only: engineers switch these.")).to_be_visible()
        expect(page.locator("#shown form.switch")).to_have_count(0)
        expect(page.locator("#shown button", has_text="Switch")).to_have_count(0)

        csrf = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
        answer = page.request.post(
            f"{server.url}/staff/bacnet/zones/{hall.pk}/writes",
            form={"setting": "setpoint", "to": "on"},
            headers={"X-CSRFToken": csrf, "Referer": server.url + "/"},
        )
        assert answer.status == 403
        assert "Only engineers change what the site&#x27;s BACnet device" in answer.text()
        assert not seen["errors"], seen["errors"]

    zone = in_thread(lambda: Zone.objects.get(pk=hall.pk))
    assert not zone.bacnet_setpoint_writable
    assert not in_thread(lambda: ProgrammeChange.objects.exists())
