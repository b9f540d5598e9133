"""The inputs page and the process-list editor driven in real headless Chromium (issue #26
item 10), as an emoncms user would: see an input's last value and age, build its process list
by picking processes and creating feeds inline, reorder, see a bad step's error beside it,
remove it, save; then readings posted to /input/post reach both feeds. A viewer sees the
same pages with no edit controls."""

from __future__ import annotations

import json
import re
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import pytest
from django.contrib.auth.models import Group, User
from playwright.sync_api import Page, expect

from core.roles import ENGINEERS, VIEWERS
from feeds.models import Feed
from feeds.store import service
from sensors import cache
from sensors.ingest import stream
from sensors.ingest.drain import drain_shard
from sensors.models import Node, Sensor
from tests.browser import logged_in_page
from tests.integration.test_staff_ux_browser import in_thread
from tests.live_http import KioskServer

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]

PASSWORD = "inputs-browser-pw"
IMG = Path(__file__).resolve().parents[2] / "docs" / "img"
VIEWPORT = {"width": 1400, "height": 1000}


@pytest.fixture
def site(redis_client) -> dict:
    cache.clear_all()
    for name, group in (("estates", ENGINEERS), ("visitor", VIEWERS)):
        user = User.objects.create_user(name, password=PASSWORD, is_staff=True)
        user.groups.add(Group.objects.get(name=group))
    node = Node(name="emontx", node_id=10, interval=10)
    key = node.set_new_key()
    node.save()
    # Configured by hand, no steps yet: readings update the input, nothing is stored.
    sensor = Sensor.objects.create(node=node, key="power1", unit="W")
    return {"node": node, "key": key, "sensor": sensor}


@pytest.fixture
def server(site) -> Iterator[KioskServer]:
    srv = KioskServer()
    srv.start()
    yield srv
    srv.stop()


def post(server: KioskServer, site: dict, t: int, watts: float) -> None:
    """An emonTx's post, as emonhub sends it, then the ingest worker's drain of its shard."""
    form = urllib.parse.urlencode(
        {
            "node": "emontx",
            "fulljson": json.dumps({"power1": watts}),
            "time": t,
            "apikey": site["key"],
        }  # fmt: skip
    ).encode()
    with urllib.request.urlopen(f"{server.url}/input/post", data=form, timeout=30) as answer:
        assert answer.status == 200, answer.read()
    # The drain reads the database: beside Playwright's event loop, in a thread of its own.
    report = in_thread(lambda: drain_shard(stream.shard_of(site["node"].pk)))
    assert report is not None and report.dropped == 0 and not report.stopped


def row(page: Page, sensor: Sensor):
    return page.locator(f"#input-{sensor.pk}")


def step_cells(page: Page) -> list[list[str]]:
    return page.eval_on_selector_all(
        "#steps tbody tr[data-step]",
        "rows => rows.map(r => [...r.cells].slice(1, 3).map(c => c.textContent))",
    )


def add_step(page: Page, process: str, **fields: str) -> None:
    page.select_option("#process", process)
    for selector, value in fields.items():
        if selector == "feed":
            page.select_option("#arg-feed", value)
        else:
            page.fill(f"#{selector.replace('_', '-')}", value)
    page.click("#add")


def test_an_engineer_builds_a_process_list_and_readings_reach_its_feeds(server, site, settings):
    settings.BMS_STAFF_LIVE_S = 1  # the inputs page updates every second for the test
    sensor = site["sensor"]
    now = int(time.time())
    post(server, site, now - 30, 1234.5)
    with logged_in_page(server.url, "estates", PASSWORD, "/staff/inputs/", VIEWPORT) as opened:
        page, seen = opened
        # The input's last value and its age.
        expect(row(page, sensor).locator(".value")).to_have_text("1234.5 W")
        expect(row(page, sensor).locator(".age")).to_have_text(re.compile(r"^\d+ s ago"))
        expect(row(page, sensor).locator(".processes")).to_contain_text("none")

        row(page, sensor).get_by_role("link", name="Edit processes").click()
        page.wait_for_url(f"**/staff/inputs/{sensor.pk}/processes/")
        # log_to_feed to a new feed: the form offers the node's tag and interval.
        page.select_option("#process", "log_to_feed")
        page.select_option("#arg-feed", "new")
        expect(page.locator("#new-feed-name")).to_have_value("power1")
        expect(page.locator("#new-feed-tag")).to_have_value("emontx")
        expect(page.locator("#new-feed-interval")).to_have_value("10")
        page.fill("#new-feed-unit", "W")
        page.click("#add")
        # A second new feed is not offered the name the first one took.
        expect(page.locator("#new-feed-name")).to_have_value("power1_2")
        # power_to_kwh to another new feed.
        add_step(page, "power_to_kwh", feed="new", new_feed_name="power1_kwh",
                 new_feed_unit="kWh")  # fmt: skip
        # A step with a value that is not a number: the server says so beside it.
        add_step(page, "scale", arg_value="two")
        assert [c[0] for c in step_cells(page)] == ["log_to_feed", "power_to_kwh", "scale"]
        # Reorder: kWh first.
        page.locator('#steps tr[data-step="1"] button[data-action="up"]').click()
        assert step_cells(page) == [
            ["power_to_kwh", "new feed emontx:power1_kwh (10 s)"],
            ["log_to_feed", "new feed emontx:power1 (10 s)"],
            ["scale", "two"],
        ]
        page.click("#save")
        expect(page.locator("#save-status")).to_contain_text("Not saved")
        expect(page.locator('#steps tr[data-step="2"] .step-error')).to_have_text(
            "step 2 (scale): 'arg' must be a finite number"
        )
        assert in_thread(lambda: Feed.objects.filter(tag="emontx").count()) == 0  # none half-made
        # Remove it and save.
        page.locator('#steps tr[data-step="2"] button[data-action="remove"]').click()
        page.click("#save")
        expect(page.locator("#save-status")).to_have_text("Saved: 2 steps")
        kwh, log = in_thread(lambda: (Feed.objects.get(name="power1_kwh"),
                                      Feed.objects.get(name="power1")))  # fmt: skip
        assert step_cells(page) == [["power_to_kwh", "emontx:power1_kwh"],
                                    ["log_to_feed", "emontx:power1"]]  # fmt: skip
        assert in_thread(lambda: Sensor.objects.get(pk=sensor.pk).processes) == [
            {"process": "power_to_kwh", "feed": kwh.pk},
            {"process": "log_to_feed", "feed": log.pk},
        ]

        # Readings posted now run through the saved list into both feeds.
        post(server, site, now - 20, 1000.0)
        post(server, site, now - 10, 1000.0)
        assert service.last_value(log.pk)[1] == 1000.0
        assert service.last_value(kwh.pk)[1] == pytest.approx(1000.0 * 10 / 3_600_000)
        page.reload()
        page.screenshot(path=str(IMG / "staff-process-editor.png"))
        expect(page.locator("#steps tbody tr").nth(1).locator(".feed-now")).to_have_text("1000")
        expect(page.locator("#steps tbody tr").nth(0).locator(".feed-now")).to_have_text(
            "0.00277778"
        )
        page.goto(server.url + "/staff/inputs/")
        expect(row(page, sensor).locator(".value")).to_have_text("1000 W")
        expect(row(page, sensor).locator(".processes")).to_have_text(
            "power_to_kwh → emontx:power1_kwh log_to_feed → emontx:power1"
        )
        # Live: a new reading shows without a reload.
        post(server, site, now, 1500.0)
        expect(row(page, sensor).locator(".value")).to_have_text("1500 W")
        assert page.evaluate("window.bmsLive.failures") == 0
        page.screenshot(path=str(IMG / "staff-inputs.png"))
        for path in ("/staff/inputs/", f"/staff/inputs/{sensor.pk}/processes/"):
            page.goto(server.url + path)
            sideways = page.evaluate("document.documentElement.scrollWidth > innerWidth + 1")
            assert not sideways, f"{path} scrolls sideways"
        # The browser logs the refused save's 400 (expected above); nothing else went wrong.
        refused = "the server responded with a status of 400 (Bad Request)"
        assert [e for e in seen["errors"] if refused not in e] == [], seen["errors"]
        assert seen["hosts"] == {urlparse(server.url).netloc}


def test_a_viewer_sees_the_lists_with_no_edit_controls(server, site):
    sensor = site["sensor"]
    feed = Feed.objects.create(name="power1", tag="emontx", interval=10)
    sensor.processes = [{"process": "log_to_feed", "feed": feed.pk}]
    sensor.save()
    with logged_in_page(server.url, "visitor", PASSWORD, "/staff/inputs/", VIEWPORT) as opened:
        page, seen = opened
        expect(row(page, sensor).locator(".processes")).to_have_text("log_to_feed → emontx:power1")
        expect(page.get_by_text("Edit processes")).to_have_count(0)
        row(page, sensor).get_by_role("link", name="View").click()
        page.wait_for_url(f"**/staff/inputs/{sensor.pk}/processes/")
        expect(page.locator("#steps tbody")).to_contain_text("emontx:power1")
        expect(page.get_by_text("Only engineers can change it")).to_be_visible()
        for control in ("#add-step", "#save", "#steps button"):
            expect(page.locator(control)).to_have_count(0)
        # A hand-made save from the viewer's own session, with its CSRF cookie: refused.
        csrf = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
        answer = page.request.post(
            f"{server.url}/staff/inputs/{sensor.pk}/processes/save",
            data=json.dumps({"steps": []}),
            headers={
                "Content-Type": "application/json",
                "X-CSRFToken": csrf,
                "Referer": server.url + "/",
            },  # fmt: skip
        )
        assert answer.status == 403 and "only engineers" in answer.json()["error"]
        saved = in_thread(lambda: Sensor.objects.get(pk=sensor.pk).processes)
        assert saved == [{"process": "log_to_feed", "feed": feed.pk}]
        assert seen["hosts"] == {urlparse(server.url).netloc}


def test_names_are_text_in_the_editor_never_markup(server, site):
    """A feed and an input named as markup are drawn as their names: the editor builds its
    rows and options from JSON with textContent, never innerHTML."""
    sensor = site["sensor"]
    evil = "<img src=x onerror=window.pwned=1>"
    in_thread(lambda: Feed.objects.create(name=evil, tag="emontx", interval=10))
    in_thread(lambda: Sensor.objects.create(node=site["node"], key=evil))
    with logged_in_page(server.url, "estates", PASSWORD, "/staff/inputs/", VIEWPORT) as opened:
        page, _ = opened
        expect(page.locator("#live")).to_contain_text(evil)
        page.goto(f"{server.url}/staff/inputs/{sensor.pk}/processes/")
        page.select_option("#process", "log_to_feed")
        page.select_option("#arg-feed", label=f"emontx:{evil}")
        page.click("#add")
        page.select_option("#process", "add_input")
        page.select_option("#arg-input", label=f"emontx:{evil}")
        page.click("#add")
        assert step_cells(page) == [["log_to_feed", f"emontx:{evil}"],
                                    ["add_input", f"emontx:{evil}"]]  # fmt: skip
        assert page.evaluate("window.pwned") is None
        assert page.locator("#steps img").count() == 0
