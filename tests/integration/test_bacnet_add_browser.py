"""Adding a controller from the staff BACnet page in real headless Chromium (#31), against the
independent bac-py controller: an engineer discovers it, presses Browse on its line, the
worker's browse (the task called as the worker calls it) lists its objects on the page, the
engineer ticks analog-input,1 (a live update leaves the tick alone), is told which field is
wrong when the name is left out, then adds it and sees the controller listed with its point,
read for real. A viewer sees the object list with no buttons."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.contrib.admin.models import ADDITION, LogEntry
from django.contrib.auth.models import Group, User
from playwright.sync_api import expect

from core.roles import ENGINEERS, VIEWERS
from sensors import cache
from sensors.devices.bacnet_client import ObjectInfo
from sensors.devices.bacnet_devices import add_device, map_points
from sensors.models import BacnetDevice
from sensors.tasks import browse_bacnet, discover_bacnet, poll_bacnet_device
from tests.browser import logged_in_page
from tests.integration.test_staff_ux_browser import in_thread
from tests.live_http import KioskServer
from tests.sensors import bacnet_peer
from tests.sensors.bacnet_peer import INSTANCE

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]

controller = bacnet_peer.controller
PASSWORD = "bacnet-add-browser-pw"
VIEWPORT = {"width": 1400, "height": 1000}
TICK = 'input[name=point][value="analog-input,1"]'


@pytest.fixture
def server(controller, redis_client) -> Iterator[KioskServer]:
    cache.clear_all()
    for name, group in (("estates", ENGINEERS), ("visitor", VIEWERS)):
        user = User.objects.create_user(name, password=PASSWORD, is_staff=True)
        user.groups.add(Group.objects.get(name=group))
    srv = KioskServer()
    srv.start()
    yield srv
    srv.stop()


def test_an_engineer_discovers_browses_and_adds_a_controller(server, controller, settings):
    settings.BMS_STAFF_LIVE_S = 1
    with logged_in_page(server.url, "estates", PASSWORD, "/staff/bacnet/", VIEWPORT) as opened:
        page, seen = opened
        # A typed-in browse past the instance bound is refused on the page, the field named.
        page.fill("#browse-address", controller.address)
        page.fill("#browse-instance", "4194303")
        page.evaluate("document.getElementById('browse-instance').removeAttribute('max')")
        page.locator("#browse-controller").get_by_role("button", name="Browse").click()
        expect(page.locator("#browse-error")).to_have_text(
            "instance: 4194303 is out of range 0-4194302"
        )

        page.fill("#discover-target", controller.address)
        page.get_by_role("button", name="Discover").click()
        # Queued before the worker runs (else the request, answered later, writes over it).
        expect(page.locator("#discovery")).to_contain_text("waiting for the worker")
        in_thread(lambda: discover_bacnet(controller.address))  # the worker's part
        expect(page.locator("#discovery")).to_contain_text("1 answered.")
        page.locator(f"#browse-{INSTANCE}").click()
        browsed = page.locator("#browsed")
        expect(browsed).to_contain_text("waiting for the worker")
        in_thread(lambda: browse_bacnet(controller.address, INSTANCE))  # the worker's part
        expect(browsed).to_contain_text("Boiler house controller")  # the live update shows it
        row = browsed.locator("tr", has_text="Boiler flow temperature")
        expect(row).to_contain_text("analog-input")
        expect(row).to_contain_text("degrees-celsius")
        expect(browsed.locator("tr", has_text="Boiler enable")).to_contain_text("binary-output")

        page.locator(TICK).check()
        polls = page.evaluate("window.bmsLive.polls")
        page.wait_for_function(f"window.bmsLive.polls >= {polls + 2}")  # two live updates
        expect(page.locator(TICK)).to_be_checked()  # ... and the tick is still there

        page.evaluate("document.getElementById('add-name').removeAttribute('required')")
        page.get_by_role("button", name="Add").click()
        expect(page.locator("#add-error")).to_contain_text("name: give the controller a node name")
        expect(page.locator(TICK)).to_be_checked()  # kept through the refusal

        page.fill("#add-name", "boiler-house")
        page.fill("#add-interval", "30")
        page.get_by_role("button", name="Add").click()
        expect(page.get_by_text("boiler-house added: 1 point recorded, polled every 30 s.")) \
            .to_be_visible()  # fmt: skip
        device = in_thread(lambda: BacnetDevice.objects.get(node__name="boiler-house"))
        section = page.locator(f"#controller-{device.pk}")
        expect(section.locator("h2")).to_contain_text(f"device {INSTANCE} at {controller.address}")
        point = section.locator("tr", has_text="analog-input,1")
        expect(point).to_contain_text("Boiler flow temperature")
        expect(page.locator("#browsed")).to_have_count(0)  # the list served its purpose
        # The Who-Is ran before the Add: its line says what we record now, on reload too.
        found = page.locator("#discovery li", has_text=f"device {INSTANCE}")
        expect(found).to_contain_text("recorded as boiler-house")
        expect(page.locator(f"#browse-{INSTANCE}")).to_have_count(0)
        page.reload()
        expect(found).to_contain_text("recorded as boiler-house")

        in_thread(lambda: poll_bacnet_device(device.node_id))  # the beat's poll, for real
        expect(point.locator(".value")).to_have_text("61.5 °C")
        refused = "the server responded with a status of 400"  # the refusals, on purpose
        assert [e for e in seen["errors"] if refused not in e] == [], seen["errors"]
    entry = in_thread(lambda: LogEntry.objects.get(object_id=str(device.pk)))
    assert entry.action_flag == ADDITION and "analog-input,1" in entry.change_message


def test_a_viewer_sees_a_browse_without_buttons(server, controller):
    in_thread(lambda: browse_bacnet(controller.address, INSTANCE))
    with logged_in_page(server.url, "visitor", PASSWORD, "/staff/bacnet/", VIEWPORT) as opened:
        page, seen = opened
        expect(page.locator("#browsed")).to_contain_text("Boiler flow temperature")
        expect(page.locator("input[name=point]")).to_have_count(0)
        expect(page.get_by_role("button", name="Add")).to_have_count(0)
        expect(page.get_by_role("button", name="Browse")).to_have_count(0)
        assert not seen["errors"], seen["errors"]


def test_an_engineer_adds_a_point_to_a_recorded_controller(server, controller, settings):
    settings.BMS_STAFF_LIVE_S = 1

    def recorded() -> BacnetDevice:
        device = add_device("boiler-house", controller.address, INSTANCE, interval=120)
        map_points(device, [ObjectInfo("analog-input", 1, "Boiler flow temperature",
                                       "degrees-celsius")])  # fmt: skip
        return device

    device = in_thread(recorded)
    with logged_in_page(server.url, "estates", PASSWORD, "/staff/bacnet/", VIEWPORT) as opened:
        page, seen = opened
        page.fill("#browse-address", controller.address)
        page.fill("#browse-instance", str(INSTANCE))
        page.locator("#browse-controller").get_by_role("button", name="Browse").click()
        browsed = page.locator("#browsed")
        expect(browsed).to_contain_text("waiting for the worker")
        in_thread(lambda: browse_bacnet(controller.address, INSTANCE))  # the worker's part
        expect(page.locator("#browsed-recorded")).to_contain_text(
            "Recorded as boiler-house, polled every 120 s, with 1 point"
        )
        row = browsed.locator("tr", has_text="Boiler flow temperature")
        expect(row).to_contain_text("recorded as analog-input-1")
        expect(page.locator(TICK)).to_have_count(0)  # not offered again
        expect(page.locator("#add-name")).to_have_value("boiler-house")
        expect(page.locator("#add-interval")).to_have_value("120")  # its own, not 30

        page.locator('input[name=point][value="binary-output,1"]').check()
        page.get_by_role("button", name="Add").click()
        expect(page.get_by_text("boiler-house updated: 1 point recorded, polled every 120 s.")) \
            .to_be_visible()  # fmt: skip
        section = page.locator(f"#controller-{device.pk}")
        expect(section.locator("tr", has_text="binary-output,1")).to_contain_text("Boiler enable")
        assert not seen["errors"], seen["errors"]
    assert in_thread(lambda: BacnetDevice.objects.get(pk=device.pk).node.interval) == 120
