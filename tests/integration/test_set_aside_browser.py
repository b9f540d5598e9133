"""The requests-set-aside page in real headless Chromium (#26): an engineer goes from the
inputs page to the requests the drain set aside, retries one, sees it gone from the list, and
once the drain has run sees its reading as the input's last value; the feed holds it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.contrib.auth.models import Group, User
from playwright.sync_api import Page, expect

from core.roles import ENGINEERS
from feeds.models import Feed
from feeds.store import service
from sensors import cache
from sensors.ingest import set_aside, stream
from sensors.ingest.drain import drain_shard
from sensors.models import Node, Sensor
from tests.browser import logged_in_page
from tests.integration.test_staff_ux_browser import in_thread
from tests.live_http import KioskServer

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]

PASSWORD = "set-aside-browser-pw"
VIEWPORT = {"width": 1400, "height": 1000}
T0 = 1_700_000_000


@pytest.fixture
def site(redis_client) -> dict:
    cache.clear_all()
    user = User.objects.create_user("estates", password=PASSWORD, is_staff=True)
    user.groups.add(Group.objects.get(name=ENGINEERS))
    node = Node(name="boilerhouse-tx", node_id=12, interval=10)
    node.set_new_key()
    node.save()
    feed = Feed.objects.create(name="flow temperature", tag="boilerhouse", interval=10)
    Sensor.objects.create(
        node=node, key="flow", unit="°C", processes=[{"process": "log_to_feed", "feed": feed.pk}]
    )
    for i, why in enumerate(("WRONGTYPE Operation against a key", "IntegrityError: duplicate")):
        set_aside.move_aside(
            redis_client, node.pk, [f"{T0 + i}000-0"], [[T0 + 10 * i, {"flow": 61.5 + i}]],
            RuntimeError(why),
        )  # fmt: skip
    return {"node": node, "feed": feed}


@pytest.fixture
def page(site) -> Iterator[tuple[Page, dict]]:
    server = KioskServer()
    server.start()
    try:
        with logged_in_page(server.url, "estates", PASSWORD, "/staff/", VIEWPORT) as opened:
            yield opened
    finally:
        server.stop()


def test_an_engineer_retries_a_request_and_its_reading_arrives(page, site):
    page, seen = page
    page.get_by_role("link", name="Inputs").click()
    page.click("#set-aside-link")
    expect(page.get_by_role("heading", name="Requests set aside")).to_be_visible()
    rows = page.locator("#set-aside tbody tr")
    expect(rows).to_have_count(2)
    first = rows.filter(has_text="WRONGTYPE Operation against a key")
    expect(first).to_contain_text("boilerhouse-tx")
    expect(first).to_contain_text("1 rows, 1 values")
    first.get_by_role("button", name="Retry").click()
    expect(page.locator(".messages")).to_contain_text("Retried: 1 rows of 'boilerhouse-tx'")
    expect(rows).to_have_count(1)
    expect(page.get_by_text("WRONGTYPE Operation against a key")).to_have_count(0)
    expect(page.locator("#set-aside")).to_contain_text("IntegrityError: duplicate")

    in_thread(lambda: drain_shard(stream.shard_of(site["node"].pk)))  # the worker's drain
    page.goto(page.url.split("/staff/")[0] + "/staff/inputs/")
    expect(page.locator(f"#node-{site['node'].pk} .value")).to_contain_text("61.5 °C")
    pending = service.get_buffer().pending(site["feed"].pk)
    assert list(zip(pending["t"].tolist(), pending["v"].tolist(), strict=True)) == [(T0, 61.5)]
    assert seen["errors"] == []


def test_discard_asks_first_and_the_request_is_gone(page, site):
    page, seen = page
    page.goto(page.url.split("/staff/")[0] + "/staff/inputs/set-aside/")
    row = page.locator("#set-aside tbody tr").filter(has_text="IntegrityError: duplicate")
    row.get_by_role("link", name="Discard…").click()
    expect(page.get_by_role("heading", name="Discard a request set aside?")).to_be_visible()
    page.get_by_role("button", name="Discard for good").click()
    expect(page.locator(".messages")).to_contain_text("Discarded: 1 rows of 'boilerhouse-tx'")
    expect(page.locator("#set-aside tbody tr")).to_have_count(1)
    assert seen["errors"] == []
