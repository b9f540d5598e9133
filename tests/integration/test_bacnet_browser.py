"""The BACnet page in real headless Chromium (#31): the independent bac-py controller polled for
real, an engineer sees its flow temperature and when it was read, changes its poll interval
(a value past the bound refused on the page, naming the field); the controller stopped, the
page says it is not answering, in the client's words. A viewer sees the same page with no edit
controls."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from django.contrib.auth.models import Group, User
from playwright.sync_api import expect

from core.roles import ENGINEERS, VIEWERS
from sensors import cache
from sensors.devices.bacnet_client import ObjectInfo
from sensors.devices.bacnet_devices import add_device, map_points
from sensors.models import BacnetDevice
from sensors.tasks import poll_bacnet_device
from tests.browser import logged_in_page
from tests.integration.test_staff_ux_browser import in_thread
from tests.live_http import KioskServer
from tests.sensors import bacnet_peer
from tests.sensors.bacnet_peer import INSTANCE

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]

controller = bacnet_peer.controller
PASSWORD = "bacnet-browser-pw"
VIEWPORT = {"width": 1400, "height": 1000}


@pytest.fixture
def device(controller, redis_client) -> BacnetDevice:
    cache.clear_all()
    for name, group in (("estates", ENGINEERS), ("visitor", VIEWERS)):
        user = User.objects.create_user(name, password=PASSWORD, is_staff=True)
        user.groups.add(Group.objects.get(name=group))
    device = add_device("boiler-house", controller.address, INSTANCE, interval=30)
    device.timeout_s = 0.5
    device.save()
    map_points(device, [ObjectInfo("analog-input", 1, "Boiler flow temperature",
                                   "degrees-celsius"),
                        ObjectInfo("binary-output", 1, "Boiler enable", ""),
                        ObjectInfo("binary-output", 2, "Hall valve", "no-units")])  # fmt: skip
    return device


@pytest.fixture
def server(device) -> Iterator[KioskServer]:
    srv = KioskServer()
    srv.start()
    yield srv
    srv.stop()


def test_an_engineer_sees_the_controllers_last_reading_and_then_its_loss(
    server, device, controller, settings
):
    settings.BMS_STAFF_LIVE_S = 1
    report = poll_bacnet_device(device.node_id)
    assert report["values"] == {"analog-input-1": 61.5, "binary-output-1": 1.0,
                                "binary-output-2": 0.0}  # fmt: skip
    with logged_in_page(server.url, "estates", PASSWORD, "/staff/bacnet/", VIEWPORT) as opened:
        page, seen = opened
        section = page.locator(f"#controller-{device.pk}")
        expect(section.locator("h2")).to_contain_text(f"device {INSTANCE} at {controller.address}")
        expect(section.locator(".state")).to_contain_text("Answering")
        point = section.locator("tr", has_text="analog-input,1")
        expect(point.locator(".value")).to_have_text("61.5 °C")
        expect(point).to_contain_text("Boiler flow temperature")
        expect(point.locator(".age")).to_contain_text(re.compile(r"\d+ s ago"))
        # Binary points as BACnet's active and inactive: on and off, never "1" or "0 no-units".
        expect(section.locator("tr", has_text="binary-output,1").locator(".value")).to_have_text(
            "on"
        )
        expect(section.locator("tr", has_text="binary-output,2").locator(".value")).to_have_text(
            "off"
        )
        expect(section).not_to_contain_text("no-units")

        page.fill(f"#interval-{device.pk}", "4")  # below the 5 s bound: the server refuses
        page.evaluate(
            "document.querySelectorAll('input[name=interval]').forEach("
            "i => i.removeAttribute('min'))"
        )  # fmt: skip  (past the browser's check)
        section.get_by_role("button", name="Save").click()
        # In the Add form's words, not the serializer's "Ensure this value is greater ...".
        expect(page.locator(".errorlist")).to_have_text("interval: 4 s is outside 5-86400 s")
        page.fill(f"#interval-{device.pk}", "")
        page.fill(f"#timeout-{device.pk}", "")
        section.get_by_role("button", name="Save").click()  # empty boxes: refused, each named
        expect(page.locator(".errorlist")).to_have_text([
            "interval: give the seconds between polls, 5-86400 s",
            "timeout_s: give the seconds to wait for each answer, 0.5-30 s"])  # fmt: skip
        page.fill(f"#interval-{device.pk}", "60")
        page.fill(f"#timeout-{device.pk}", "0.5")
        page.locator(f"#controller-{device.pk}").get_by_role("button", name="Save").click()
        expect(page.get_by_text("Saved: boiler-house polled every 60 s.")).to_be_visible()
        expect(page.locator(f"#interval-{device.pk}")).to_have_value("60")
        page.locator(f"#controller-{device.pk}").get_by_role("button", name="Save").click()
        expect(page.get_by_text("boiler-house: no change.")).to_be_visible()  # the same again

        controller.stop()
        in_thread(lambda: poll_bacnet_device(device.node_id))
        # The live region shows the loss within a second, without a reload.
        expect(page.locator(f"#controller-{device.pk} .state")).to_contain_text(
            "Not answering", timeout=10_000
        )
        expect(page.locator(f"#controller-{device.pk} .state")).to_contain_text("no answer within")
        expect(point.locator(".value")).to_have_text("61.5 °C")  # the last reading kept
        refused = "the server responded with a status of 400"  # the refused save, on purpose
        assert [e for e in seen["errors"] if refused not in e] == [], seen["errors"]


def test_a_viewer_sees_the_reading_and_no_edit_controls(server, device):
    poll_bacnet_device(device.node_id)
    with logged_in_page(server.url, "visitor", PASSWORD, "/staff/bacnet/", VIEWPORT) as opened:
        page, seen = opened
        section = page.locator(f"#controller-{device.pk}")
        expect(section.locator("tr", has_text="analog-input,1").locator(".value")).to_have_text(
            "61.5 °C"
        )
        expect(page.get_by_text("Read only: engineers change controllers.")).to_be_visible()
        expect(page.locator("form.edit-controller")).to_have_count(0)
        expect(page.get_by_role("button", name="Poll now")).to_have_count(0)
        expect(page.locator("input[name=interval]")).to_have_count(0)
        assert not seen["errors"], seen["errors"]


def test_an_engineer_discovers_the_controller_from_the_page(server, device, controller, settings):
    """The button queues a Who-Is for the worker; the worker's run (here, the task called as the
    worker calls it) answers, and the page shows the controller by itself."""
    from sensors.tasks import discover_bacnet

    settings.BMS_STAFF_LIVE_S = 1
    with logged_in_page(server.url, "estates", PASSWORD, "/staff/bacnet/", VIEWPORT) as opened:
        page, seen = opened
        page.fill("#discover-target", "300.1.2.3")
        page.get_by_role("button", name="Discover").click()
        expect(page.locator(".errorlist")).to_contain_text("target: '300.1.2.3' is not an IPv4")
        page.fill("#discover-target", controller.address)
        page.get_by_role("button", name="Discover").click()
        discovery = page.locator("#discovery")
        expect(discovery).to_contain_text("waiting for the worker")
        in_thread(lambda: discover_bacnet(controller.address))  # the worker's part
        expect(discovery).to_contain_text("1 answered.")
        expect(discovery).to_contain_text(
            f"device {INSTANCE} at {controller.address} (vendor id 999) · recorded as boiler-house"
        )
