"""A staff task in real headless Chromium: an engineer imports the site energy model
(CSV) on the staff energy page and sees the building's use against it; a bad file is named by
row and field and stores nothing; a viewer has no import form."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

import numpy as np
import pytest
from django.conf import settings
from django.contrib.auth.models import Group, User
from playwright.sync_api import expect

from core.roles import ENGINEERS, VIEWERS
from energy import refresh
from energy.models import ExpectedUse, Meter, MeterNode
from feeds.models import Feed
from feeds.store import phpfina
from sensors.models import Site
from tests.browser import logged_in_page
from tests.live_http import KioskServer

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]

LONDON = ZoneInfo("Europe/London")
NOW = 2_000_000_000
PASSWORD = "model-import-pw"
FIRST, LAST = date(2025, 3, 3), date(2025, 3, 9)  # a week (GMT, before the spring change)
VIEWPORT = {"width": 1100, "height": 900}


def _midnight(d: date) -> int:
    return int(datetime(d.year, d.month, d.day, tzinfo=LONDON).timestamp())


@pytest.fixture
def campus(redis_client) -> dict:
    """The Library draws 2 kW all week: 48 kWh a day, 336 kWh."""
    for name, group in (("estates-eng", ENGINEERS), ("estates-view", VIEWERS)):
        user = User.objects.create_user(name, password=PASSWORD, is_staff=True)
        user.groups.add(Group.objects.get(name=group))
    site = Site.objects.create(name="Campus", slug="campus", time_zone="Europe/London")
    library = MeterNode.objects.create(site=site, name="Library", kind="building",
                                       floor_area_m2=500)  # fmt: skip
    feed = Feed.objects.create(name="library W", tag="energy", interval=600)
    times = np.arange(_midnight(FIRST), _midnight(LAST + timedelta(days=1)), 600)
    phpfina.write_points(settings.BMS_FEED_DIR, feed.pk, 600, [int(t) for t in times],
                         [2000.0] * len(times), now=NOW)  # fmt: skip
    meter = Meter.objects.create(node=library, name="Library main", fuel="electricity",
                                 source="power", feed=feed)  # fmt: skip
    refresh.refresh([meter], FIRST, LAST, now=NOW)
    return {"site": site.pk, "library": library.pk}


@pytest.fixture
def server(campus) -> Iterator[KioskServer]:
    srv = KioskServer()
    srv.start()
    yield srv
    srv.stop()


def _node_url(campus: dict) -> str:
    return (f"/staff/energy/?site={campus['site']}&node={campus['library']}"
            f"&start={FIRST}&end={LAST}&period=day")  # fmt: skip


@contextmanager
def _as(server: KioskServer, campus: dict, username: str):
    """Chromium logged in as `username` (real login form), on the Library's week."""
    with logged_in_page(server.url, username, PASSWORD, "/staff/energy/", VIEWPORT) as opened:
        opened[0].goto(server.url + _node_url(campus))
        yield opened


def _csv(*rows: str) -> dict:
    body = "\n".join(["building,fuel,start,end,kwh", *rows]) + "\n"
    return {"name": "model.csv", "mimeType": "text/csv", "buffer": body.encode()}


def test_an_engineer_imports_the_model_and_sees_use_against_it(server, campus):
    with _as(server, campus, "estates-eng") as (page, seen):
        expect(page.locator("#total")).to_have_text("336.0 kWh")
        expect(page.locator("#expected")).to_have_text("none to compare with")  # no model yet
        page.set_input_files("#model-import input[name=file]",
                             _csv(f"Library,electricity,{FIRST},{LAST},350"))  # fmt: skip
        # Hold the import's request, so the page is seen while the figures are recomputed.
        held = []
        page.route("**/staff/energy/model/", lambda route: held.append(route))
        with page.expect_request("**/staff/energy/model/"):
            page.click("#import-model")
        status = page.locator("#recomputing")
        expect(status).to_have_text("Importing the model and recomputing the figures…")
        expect(page.locator("#league-card")).to_have_attribute("aria-busy", "true")
        assert len(held) == 1  # still held: what is on screen is the state while it runs
        held[0].continue_()
        # it resolves in place: the building, fuel and range stay the ones shown
        expect(page.locator("#recomputing")).to_have_text(
            "Recomputed with the model just imported: the figures below use it."
        )
        expect(page.locator(".messages")).to_have_text(
            "Site energy model: 1 row imported from model.csv."
        )
        expect(page.locator("#league-card")).not_to_have_attribute("aria-busy", "true")
        expect(page.locator("#expected")).to_have_text("350.0 kWh on the 7 days with actual use")
        expect(
            page.locator(f"#league tr[data-node='{campus['library']}'] .against")
        ).to_contain_text("Used 14 kWh less than expected")
        page.reload()  # and it is stored: the same after a reload
        expect(page.locator("#expected")).to_have_text("350.0 kWh on the 7 days with actual use")
        expect(page.locator("#cusum-end")).to_have_text("-14.0 kWh")  # 336 - 350
        expect(page.locator("#saved")).to_contain_text("Used 14 kWh less than expected")
        assert seen["errors"] == []
    (row,) = ExpectedUse.objects.all()
    assert (row.node_id, row.fuel, row.start, row.end, row.value) == (
        campus["library"], "electricity", FIRST, LAST, 350.0,
    )  # fmt: skip


def test_a_bad_row_is_named_and_nothing_is_stored(server, campus):
    with _as(server, campus, "estates-eng") as (page, _seen):
        page.set_input_files(
            "#model-import input[name=file]",
            _csv(f"Library,electricity,{FIRST},{LAST},350", f"Nope,gas,{FIRST},{LAST},10"),
        )
        page.click("#import-model")
        expect(page.locator("#recomputing")).to_have_text(
            "Nothing recomputed: the model was not imported (see above)."
        )
        message = page.locator(".messages")
        expect(message).to_contain_text("Model not imported (no row was stored): row 3, building")
        expect(message).to_contain_text("Nope")
    assert ExpectedUse.objects.count() == 0  # all rows or none: the good first row is not kept


def test_a_viewer_has_no_import_form(server, campus):
    with _as(server, campus, "estates-view") as (page, _seen):
        expect(page.locator("#total")).to_have_text("336.0 kWh")
        expect(page.locator("#model-import")).to_have_count(0)
        # and the server refuses the post itself, whatever the page shows
        status = page.evaluate(
            """async () => {
                const token = document.cookie.split('; ').find(c => c.startsWith('csrftoken='));
                const body = new FormData();
                body.append('site', '1');
                const r = await fetch('/staff/energy/model/', {method: 'POST', body,
                    headers: {'X-CSRFToken': token ? token.split('=')[1] : ''}});
                return r.status;
            }"""
        )
        assert status == 403
