"""A manager answers "which building used most last week, in £" from one page, in real
headless Chromium (issue #28 item 3): the "Last week" link, then a click on the cost column.

Three buildings, none with a baseline period set: the Lecture block's gas follows the weather
exactly (30 + 60 kWh per degree day) all year and 20 % more last week, so a baseline fitted
from its own year before is used; the Workshop's electricity follows its weekday timetable,
not the weather, so it has no reliable model and says so; the Visitor centre has an imported
model. Most kWh (Lecture block, cheap gas), most £ (Workshop) and most kWh/m² (Visitor
centre, the default order) are three different buildings, so only the sort by £ answers it.
The site's clock is held at Wednesday 13 January 2027 (time-machine), "last week" is 4-10
January.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
import time_machine
from django.conf import settings
from django.contrib.auth.models import Group, User
from playwright.sync_api import expect

from core.roles import VIEWERS
from energy.models import EnergySite, ExpectedUse, FuelRate, Meter, MeterDay, MeterNode
from feeds.models import Feed
from feeds.store import phpfina
from sensors.models import Site
from tests.browser import logged_in_page
from tests.live_http import KioskServer

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]

LONDON = ZoneInfo("Europe/London")
TODAY = date(2027, 1, 13)  # a Wednesday
WEEK = [date(2027, 1, 4) + timedelta(days=i) for i in range(7)]  # last week, Monday-Sunday
HISTORY_START = date(2025, 12, 1)  # over a year before last week: the fitted baseline's year
PASSWORD = "league-browser-pw"
GAS_PRICE, ELEC_PRICE = 0.07, 0.30


def _midnight(d: date) -> int:
    return int(datetime(d.year, d.month, d.day, tzinfo=LONDON).timestamp())


def _mean_c(d: date) -> float:
    """The day's outside temperature: a seasonal wave, coldest at the turn of the year."""
    return 8.0 - 7.0 * math.cos(2 * math.pi * (d.timetuple().tm_yday - 10) / 365)


def _hdd(d: date) -> float:
    return max(0.0, 15.5 - _mean_c(d))


def _days(first: date, last: date) -> list[date]:
    return [first + timedelta(days=i) for i in range((last - first).days + 1)]


def _meter(node: MeterNode, fuel: str, use) -> Meter:
    feed = Feed.objects.create(name=f"{node.name} {fuel}", tag="energy", interval=3600)
    meter = Meter.objects.create(node=node, name=f"{node.name} {fuel}", fuel=fuel,
                                 source="power", feed=feed)  # fmt: skip
    MeterDay.objects.bulk_create(
        MeterDay(meter=meter, day=d, value=use(d), status="measured")
        for d in _days(HISTORY_START, TODAY - timedelta(days=1))
    )
    return meter


def _gas(d: date) -> float:
    return (30.0 + 60.0 * _hdd(d)) * (1.2 if d in WEEK else 1.0)


def _timetable(d: date) -> float:
    return 900.0 if d.weekday() < 5 else 50.0


@pytest.fixture
def campus(redis_client) -> dict:
    viewer = User.objects.create_user("manager", password=PASSWORD, is_staff=True)
    viewer.groups.add(Group.objects.get(name=VIEWERS))
    site = Site.objects.create(name="Campus", slug="campus", time_zone="Europe/London")
    # the outside temperature, hourly, each day at its mean
    temp = Feed.objects.create(name="outside", tag="weather", interval=3600, unit="°C")
    hours, values = [], []
    for d in _days(HISTORY_START, TODAY):
        for h in range(_midnight(d), _midnight(d + timedelta(days=1)), 3600):
            hours.append(h)
            values.append(_mean_c(d))
    phpfina.write_points(settings.BMS_FEED_DIR, temp.pk, 3600, hours, values,
                         now=_midnight(TODAY))  # fmt: skip
    EnergySite.objects.create(site=site, outside_temperature_feed=temp)
    FuelRate.objects.create(site=site, fuel="gas", price_per_unit=GAS_PRICE)
    FuelRate.objects.create(site=site, fuel="electricity", price_per_unit=ELEC_PRICE)
    build = {
        name: MeterNode.objects.create(site=site, name=name, kind="building", floor_area_m2=area)
        for name, area in (("Lecture block", 620), ("Workshop", 1000), ("Visitor centre", 50))
    }
    _meter(build["Lecture block"], "gas", _gas)
    _meter(build["Workshop"], "electricity", _timetable)
    _meter(build["Visitor centre"], "electricity", lambda d: 150.0)
    ExpectedUse.objects.create(node=build["Visitor centre"], fuel="electricity", start=WEEK[0],
                               end=WEEK[-1], value=980.0)  # fmt: skip
    return {"site": site.pk, **{name: node.pk for name, node in build.items()}}


@pytest.fixture
def server(campus) -> Iterator[KioskServer]:
    # The site's clock, the server's too; a little after real time, so the browser's cookies
    # (dated by the server) are not already expired.
    with time_machine.travel(datetime(2027, 1, 13, 12, tzinfo=UTC), tick=True):
        srv = KioskServer()
        srv.start()
        yield srv
        srv.stop()


def test_a_manager_finds_who_used_most_last_week_in_pounds(server, campus):
    lecture_kwh = sum(_gas(d) for d in WEEK)
    lecture_over = lecture_kwh - sum(30.0 + 60.0 * _hdd(d) for d in WEEK)
    workshop_kwh = sum(_timetable(d) for d in WEEK)
    # the numbers of the story: most kWh, most £ and most kWh/m² are three buildings
    assert lecture_kwh > workshop_kwh and workshop_kwh * ELEC_PRICE > lecture_kwh * GAS_PRICE
    viewport = {"width": 1280, "height": 900}
    with logged_in_page(server.url, "manager", PASSWORD, "/staff/energy/", viewport) as (
        page,
        seen,
    ):
        page.click("#presets >> text=Last week")
        page.wait_for_url("**start=2027-01-04&end=2027-01-10**")
        expect(page.locator("#league-card h2")).to_have_text(
            "Buildings, Mon 4 Jan 2027 to Sun 10 Jan 2027"
        )
        rows = page.locator("#league tbody tr")
        expect(rows.first).to_have_attribute("data-node", str(campus["Visitor centre"]))

        page.click("#sort-cost button")
        expect(page.locator("#sort-cost")).to_have_attribute("aria-sort", "descending")
        expect(rows.first).to_have_attribute("data-node", str(campus["Workshop"]))
        expect(rows.first.locator("td.cost")).to_have_text(f"£{workshop_kwh * ELEC_PRICE:,.0f}")
        names = [rows.nth(i).locator("td").first.inner_text() for i in range(3)]
        assert names == ["Workshop", "Lecture block", "Visitor centre"]  # £1,380, £..., £315
        page.click("#sort-cost button")  # again: the cheapest first
        expect(rows.first).to_have_attribute("data-node", str(campus["Visitor centre"]))

        # The Workshop's use follows its timetable, not the weather: said plainly, no line.
        workshop = page.locator(f"#league tr[data-node='{campus['Workshop']}']")
        expect(workshop.locator(".no-model")).to_contain_text(
            "No reliable model for electricity: the weather explains only"
        )
        # The Lecture block has no model and no baseline set: one fitted from its own year.
        lecture = page.locator(f"#league tr[data-node='{campus['Lecture block']}'] .against")
        expect(lecture).to_contain_text(
            f"Used {lecture_over:,.0f} kWh (£{lecture_over * GAS_PRICE:,.0f}) more than expected"
        )
        expect(lecture).to_contain_text("20.0 % over expected")
        expect(lecture).to_contain_text("from the fitted baseline for gas, over 7 days")
        visitor = page.locator(f"#league tr[data-node='{campus['Visitor centre']}'] .against")
        expect(visitor).to_contain_text("Used 70 kWh (£21) more than expected")
        expect(visitor).to_contain_text("from the model")

        # The Workshop's own page: no line, no running difference drawn, the reason why.
        page.click(f"#league tr[data-node='{campus['Workshop']}'] a")
        expect(page.locator("#node-name")).to_have_text("Workshop · electricity")
        assert "start=2027-01-04" in page.url and "end=2027-01-10" in page.url
        expect(page.locator("#baseline")).to_contain_text("No reliable model: the weather explains")
        expect(page.locator("#expected")).to_have_text("none to compare with")
        expect(page.locator("#cusum")).to_have_count(0)
        expect(page.locator("#line")).to_have_count(0)
        # The Lecture block's page (from its league row: a fuel it has) shows the fitted
        # baseline it used, in words.
        page.click(f"#league tr[data-node='{campus['Lecture block']}'] a")
        expect(page.locator("#node-name")).to_have_text("Lecture block · gas")
        expect(page.locator("#baseline")).to_contain_text(
            "Expected use from a baseline fitted from this building's own use"
        )
        expect(page.locator("#cusum")).to_have_count(1)
        assert seen["errors"] == []


def test_the_tree_keeps_the_fuel_and_the_period(server, campus):
    with logged_in_page(server.url, "manager", PASSWORD, "/staff/energy/",
                        {"width": 1100, "height": 900}) as (page, seen):  # fmt: skip
        page.goto(f"{server.url}/staff/energy/?site={campus['site']}&node={campus['Workshop']}"
                  "&fuel=gas&start=2027-01-04&end=2027-01-10&period=week")  # fmt: skip
        page.click(f"#energy-tree a[data-node='{campus['Visitor centre']}']")
        expect(page.locator("#node-name")).to_have_text("Visitor centre · gas")
        for part in ("fuel=gas", "start=2027-01-04", "end=2027-01-10", "period=week"):
            assert part in page.url
        # no gas meter there: said, not "7 gap days"
        expect(page.locator("#no-meter")).to_contain_text("No meter measures gas")
        expect(page.locator("#gap-days")).to_have_count(0)
        assert seen["errors"] == []
