"""A site's history budget on the staff feed explorer, in real headless Chromium: what 33 days
of posted history cost is shown; an engineer follows "Raise" to the admin, raises it and
sees the new budget; a viewer sees the figures but no way to raise them (issue #26 item 4)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from django.contrib.auth.models import Group, User
from playwright.sync_api import Page, expect

from core.roles import ENGINEERS, VIEWERS
from feeds.models import Feed
from sensors.models import Sensor, Site
from tests.browser import logged_in_page
from tests.integration import test_staff_browser as _base
from tests.sensors.conftest import make_node
from tests.wsgi_client import WsgiClient as Client

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]

server = _base.server  # a real WSGI server in this process, on a free port
VIEWPORT = {"width": 1280, "height": 900}


@pytest.fixture
def site_data(redis_client) -> dict:
    for name, group in (("estates", ENGINEERS), ("visitor", VIEWERS)):
        user = User.objects.create_user(name, password=_base.PASSWORD, is_staff=True)
        user.groups.add(Group.objects.get(name=group))
    site = Site.objects.create(name="Quarry", slug="quarry", history_budget_mb=2)
    node, key = make_node()
    node.site = site
    node.save()
    feed = Feed.objects.create(name="power", tag="emontx1", interval=10)
    Sensor.objects.create(
        node=node, key="1", name="1", processes=[{"process": "log_to_feed", "feed": feed.pk}]
    )
    # 33 days of one 10 s feed: 4 bytes x 285,120 slots = 1.1 MB of the site's 2 MB.
    old = int(time.time()) - 33 * 86_400
    answer = Client().post(
        "/input/bulk", {"data": json.dumps([[old, node.node_id, 1.0]]), "time": "0", "apikey": key}
    )
    assert answer.content == b"ok"
    return {"site": site}


def _page(server, username: str) -> Iterator[tuple[Page, dict]]:
    with logged_in_page(server.url, username, _base.PASSWORD, "/staff/", VIEWPORT) as opened:
        yield opened


@pytest.fixture
def engineer_page(server) -> Iterator[tuple[Page, dict]]:
    yield from _page(server, "estates")


@pytest.fixture
def viewer_page(server) -> Iterator[tuple[Page, dict]]:
    yield from _page(server, "visitor")


def test_an_engineer_sees_the_use_and_raises_the_budget(engineer_page, server):
    page, seen = engineer_page
    page.goto(server.url + "/staff/feeds/")
    row = page.locator('#history-budgets tr[data-site="quarry"]')
    expect(row).to_contain_text("Quarry")
    expect(row).to_contain_text("1.1 MB")
    expect(row).to_contain_text("2 MB")
    row.get_by_role("link", name="Raise").click()
    page.fill("#id_history_budget_mb", "64")
    page.click("input[name=_save]")
    expect(page.locator(".messagelist")).to_contain_text("was changed successfully")
    page.goto(server.url + "/staff/feeds/")
    expect(row).to_contain_text("64 MB")
    assert seen["errors"] == []


def test_a_viewer_sees_the_use_but_cannot_raise_it(viewer_page, server, site_data):
    page, seen = viewer_page
    page.goto(server.url + "/staff/feeds/")
    row = page.locator('#history-budgets tr[data-site="quarry"]')
    expect(row).to_contain_text("1.1 MB")
    expect(row.get_by_role("link", name="Raise")).to_have_count(0)
    assert seen["errors"] == []
    # The admin's change page of the site has no field to raise it with for a viewer.
    page.goto(server.url + f"/admin/sensors/site/{site_data['site'].pk}/change/")
    expect(page.locator("#id_history_budget_mb")).to_have_count(0)
    # (The API refuses a viewer's PATCH: tests/sensors/test_history_budget.py.)
