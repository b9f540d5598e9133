"""An engineer reads an alarm on the staff page, follows its help link and lands on that
alarm's row of ALARMS.md served with the site; the link to the sensor opens its admin page
(#28 item 4), in real Chromium."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.contrib.auth.models import Group, User
from playwright.sync_api import expect

from core.roles import ENGINEERS
from sensors.ingest.processing import ingest_rows
from sensors.models import Node, Sensor
from tests.browser import logged_in_page
from tests.live_http import KioskServer

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]

PASSWORD = "browser-test-pw"


@pytest.fixture
def server(redis_client) -> Iterator[KioskServer]:
    user = User.objects.create_user("estates", password=PASSWORD, is_staff=True)
    user.groups.add(Group.objects.get(name=ENGINEERS))
    node = Node(name="emontx6", location="Seminar room", interval=10)
    node.set_new_key()
    node.save()
    Sensor.objects.create(
        node=node, key="t", name="temperature", kind="temperature", unit="°C", max_valid=10.0
    )
    ingest_rows(node.pk, [[1_700_000_000, {"t": 11.55}]])
    srv = KioskServer()
    srv.start()
    yield srv
    srv.stop()


def test_an_engineer_follows_a_range_alarm_to_its_help_and_to_its_sensor(server):
    viewport = {"width": 1280, "height": 900}
    with logged_in_page(server.url, "estates", PASSWORD, "/staff/alarms/", viewport) as (
        page,
        seen,
    ):
        row = page.locator("#open-alarms tbody tr").first
        expect(row).to_contain_text(
            "Seminar room temperature read 11.6 °C, outside its valid range up to 10.0 °C"
        )
        expect(row).to_contain_text("Check the probe and its wiring")
        row.get_by_role("link", name="What this alarm means").click()
        page.wait_for_url("**/staff/help/alarms#sensor-range")
        target = page.locator("tr:target")
        expect(target).to_have_id("sensor-range")
        expect(target).to_contain_text("outside the sensor's")
        expect(target).to_be_in_viewport()
        page.go_back()
        page.locator("#open-alarms tbody tr").first.get_by_role(
            "link", name="Open the sensor"
        ).click()
        expect(page.locator("h1, h2").first).to_contain_text("sensor")
        assert "/admin/sensors/sensor/" in page.url
        assert seen["errors"] == []
