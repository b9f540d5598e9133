"""The staff energy page in real headless Chromium: a viewer picks a building and a
period on a small metering tree fed from real PHPFina files, and the figures on screen equal
the ones computed here from the data written. Also: no sideways scroll at 390 px."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from urllib.parse import urlparse
from zoneinfo import ZoneInfo

import numpy as np
import pytest
from django.conf import settings
from django.contrib.auth.models import Group, User
from playwright.sync_api import Page, expect

from core.dates import day_text
from core.roles import VIEWERS
from energy import refresh
from energy.benchmarks import TM46_TYPICAL
from energy.models import EnergySite, ExpectedUse, FuelRate, Meter, MeterNode
from feeds.models import Feed
from feeds.store import phpfina
from sensors.models import Site
from tests.browser import logged_in_page
from tests.integration.test_staff_ux_browser import shoot
from tests.live_http import KioskServer

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]

LONDON = ZoneInfo("Europe/London")
NOW = 2_000_000_000  # far after the data: nothing is "in the future"
PASSWORD = "energy-browser-pw"
FIRST, LAST = date(2025, 1, 6), date(2025, 1, 19)  # two whole weeks, Monday to Sunday (GMT)
STEP = 600
ELEC_FACTOR, GAS_FACTOR, PRICE = 0.2, 0.18, 0.25


def _midnight(d: date) -> int:
    return int(datetime(d.year, d.month, d.day, tzinfo=LONDON).timestamp())


def _write(feed: Feed, times, values) -> None:
    phpfina.write_points(settings.BMS_FEED_DIR, feed.pk, feed.interval, list(times), list(values),
                         now=NOW)  # fmt: skip


def _power_feed(name: str, watts_on_day) -> tuple[Feed, list[float]]:
    """A W feed every 10 minutes, constant through each day; returns the kWh of each day."""
    feed = Feed.objects.create(name=name, tag="energy", interval=STEP)
    times, values, kwh = [], [], []
    for i in range((LAST - FIRST).days + 1):
        d = FIRST + timedelta(days=i)
        day_times = np.arange(_midnight(d), _midnight(d + timedelta(days=1)), STEP)
        times.extend(int(t) for t in day_times)
        values.extend([watts_on_day(i)] * len(day_times))
        kwh.append(watts_on_day(i) * len(day_times) * STEP / 3600 / 1000)
    _write(feed, times, values)
    return feed, kwh


@pytest.fixture
def tree(redis_client) -> dict:
    """Two buildings: Library (its main meter on power, a café sub-meter on a register, an
    imported model) and Workshop (power). Returns what the page must show."""
    viewer = User.objects.create_user("facilities", password=PASSWORD, is_staff=True)
    viewer.groups.add(Group.objects.get(name=VIEWERS))
    site = Site.objects.create(name="Campus", slug="campus", time_zone="Europe/London")
    EnergySite.objects.create(site=site)
    FuelRate.objects.create(site=site, fuel="electricity", price_per_unit=PRICE,
                            kg_co2e_per_unit=ELEC_FACTOR)  # fmt: skip
    FuelRate.objects.create(site=site, fuel="gas", kg_co2e_per_unit=GAS_FACTOR)
    library = MeterNode.objects.create(site=site, name="Library", kind="building",
                                       floor_area_m2=500, tm46_category="general_office")  # fmt: skip
    cafe = MeterNode.objects.create(site=site, parent=library, name="Café", kind="room")
    workshop = MeterNode.objects.create(site=site, name="Workshop", kind="building",
                                        floor_area_m2=200, tm46_category="general_office")  # fmt: skip

    lib_feed, lib_kwh = _power_feed("library W", lambda i: 2000.0 + 250.0 * i)
    shop_feed, shop_kwh = _power_feed("workshop W", lambda i: 1500.0)
    # The café's register counts 0.05 kWh every 10 minutes, from the day before (the register
    # at the first midnight must be known).
    cafe_feed = Feed.objects.create(name="café kWh", tag="energy", interval=STEP)
    reg_times = np.arange(_midnight(FIRST - timedelta(days=1)), _midnight(LAST) + 86400 + 1, STEP)
    _write(cafe_feed, reg_times, [0.05 * k for k in range(len(reg_times))])
    meters = [
        Meter.objects.create(node=library, name="Library main", fuel="electricity",
                             source="power", feed=lib_feed),
        Meter.objects.create(node=cafe, name="Café sub-meter", fuel="electricity",
                             source="cumulative", feed=cafe_feed),
        Meter.objects.create(node=workshop, name="Workshop main", fuel="electricity",
                             source="power", feed=shop_feed),
    ]  # fmt: skip
    # The model: 420 kWh in the first week, 450 in the second.
    model = {(FIRST, FIRST + timedelta(days=6)): 420.0, (FIRST + timedelta(days=7), LAST): 450.0}
    for (start, end), value in model.items():
        ExpectedUse.objects.create(node=library, fuel="electricity", start=start, end=end,
                                   value=value)  # fmt: skip
    refresh.refresh(meters, FIRST, LAST, now=NOW)

    weeks = [sum(lib_kwh[:7]), sum(lib_kwh[7:])]
    expected = list(model.values())
    cusum = [weeks[0] - expected[0], weeks[0] - expected[0] + weeks[1] - expected[1]]
    total, exp_total = sum(lib_kwh), sum(expected)
    ndays = (LAST - FIRST).days + 1
    bench = TM46_TYPICAL["general_office"]
    annual_per_m2 = total * 365 / ndays / 500
    # DEC operational rating: CO2 per m² against the typical building's (no fossil use, so the
    # fossil benchmark takes the gas factor).
    rating = (
        100
        * annual_per_m2
        * ELEC_FACTOR
        / (bench.electricity * ELEC_FACTOR + bench.fossil * GAS_FACTOR)
    )
    return {
        "library": library.pk, "workshop": workshop.pk, "cafe": cafe.pk,
        "weeks": weeks, "expected": expected, "cusum": cusum, "total": total,
        "exp_total": exp_total, "saved": exp_total - total, "rating": rating,
        "per_m2": total / 500, "change": 100 * (total - exp_total) / exp_total,
        "shop_total": sum(shop_kwh), "shop_per_m2": sum(shop_kwh) / 200,
    }  # fmt: skip


@pytest.fixture
def server(tree) -> Iterator[KioskServer]:
    srv = KioskServer()
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture
def page(server) -> Iterator[tuple[Page, dict]]:
    """Chromium logged in as a viewer (read only) through the real login form."""
    viewport = {"width": 1100, "height": 900}
    with logged_in_page(server.url, "facilities", PASSWORD, "/staff/energy/", viewport) as opened:
        yield opened


def _whole(x: float) -> int:
    """Rounded half up, as the page (Django's floatformat) rounds: 304.5 -> 305."""
    return int(Decimal(repr(x)).quantize(Decimal(1), rounding=ROUND_HALF_UP))


def _kwh(x: float, digits: int = 1) -> str:
    return f"{x:.{digits}f} kWh"


def test_a_viewer_picks_a_building_and_a_period_and_sees_the_figures(page, server, tree):
    browser_page, seen = page
    # The period: two weeks, by week.
    browser_page.fill("input[name=start]", FIRST.isoformat())
    browser_page.fill("input[name=end]", LAST.isoformat())
    browser_page.select_option("select[name=period]", "week")
    browser_page.click("#show")
    browser_page.wait_for_url("**period=week**")

    # The building: Workshop first, then Library (a link of the tree keeps the period).
    browser_page.click(f"#energy-tree a[data-node='{tree['workshop']}']")
    expect(browser_page.locator("#node-name")).to_contain_text("Workshop")
    expect(browser_page.locator("#total")).to_have_text(_kwh(tree["shop_total"]))
    # no model for the Workshop and no outside temperature to fit a baseline to: said plainly
    expect(browser_page.locator("#expected")).to_have_text("none to compare with")
    expect(browser_page.locator("#baseline")).to_contain_text("No reliable model:")
    expect(browser_page.locator("#cusum")).to_have_count(0)  # no running difference drawn
    browser_page.click(f"#energy-tree a[data-node='{tree['library']}']")
    expect(browser_page.locator("#node-name")).to_contain_text("Library")
    assert "start=2025-01-06" in browser_page.url and "period=week" in browser_page.url
    expect(browser_page.locator("#energy-tree")).to_contain_text("Café")

    expect(browser_page.locator("#total")).to_have_text(_kwh(tree["total"]))
    expect(browser_page.locator("#expected")).to_have_text(
        f"{_kwh(tree['exp_total'])} on the 14 days with actual use"
    )
    expect(browser_page.locator("#cusum-end")).to_have_text(_kwh(tree["cusum"][-1]))
    over = -tree["saved"]  # the Library used more than its model: said in words, no sign
    assert over > 10
    expect(browser_page.locator("#saved")).to_have_text(
        f"Used {over:.0f} kWh (£{over * PRICE:.0f}) more than expected · "
        f"{tree['change']:.1f} % over expected · {over * ELEC_FACTOR:.1f} kg CO₂e more"
    )
    rows = browser_page.locator("#periods tbody tr")
    expect(rows).to_have_count(2)
    for i, week_start in enumerate((FIRST, FIRST + timedelta(days=7))):
        cells = rows.nth(i).locator("td")
        expect(cells.nth(0)).to_have_text(day_text(week_start))
        expect(cells.nth(1)).to_have_text(f"{tree['weeks'][i]:.1f}")
        expect(cells.nth(2)).to_have_text(f"{tree['expected'][i]:.1f}")
        expect(cells.nth(3)).to_have_text(f"{tree['cusum'][i]:.1f}")
        expect(cells.nth(5)).to_have_text("measured")

    # The league: Workshop uses more per m², so it comes first; Library's row in full.
    league = browser_page.locator("#league tbody tr")
    expect(league).to_have_count(2)
    expect(league.nth(0)).to_have_attribute("data-node", str(tree["workshop"]))
    cells = browser_page.locator(f"#league tr[data-node='{tree['library']}'] td")
    expect(cells.nth(0)).to_have_text("Library")
    expect(cells.nth(1)).to_have_text(f"{tree['total']:,.0f}")  # electricity kWh
    expect(cells.nth(2)).to_have_text(f"{tree['total']:,.0f}")  # all fuels
    expect(cells.nth(3)).to_have_text(f"£{_whole(tree['total'] * PRICE):,}")
    expect(cells.nth(3)).to_have_attribute("data-sort", f"{tree['total'] * PRICE:g}")
    expect(cells.nth(4)).to_have_text(f"{_whole(tree['total'] * ELEC_FACTOR):,}")
    expect(cells.nth(5)).to_contain_text(f"{tree['per_m2']:.1f}")
    grade = "ABCDEFG"[min(6, max(0, (round(tree["rating"]) - 1) // 25))]
    expect(cells.nth(7).locator(".dec-rating")).to_have_text(f"{round(tree['rating'])} ({grade})")
    # under the rating, what adjusted its benchmark (this site has no outside temperature)
    expect(cells.nth(7).locator(".dec-notes li")).to_have_text([
        "weather: not adjusted (no outside temperature in the range)",
        "occupancy: standard hours (2,040 h a year) assumed",
    ])  # fmt: skip
    expect(cells.nth(6)).to_contain_text(f"Used {over:.0f} kWh (£{over * PRICE:.0f}) more than")
    expect(cells.nth(6)).to_contain_text(f"{tree['change']:.1f} % over expected")
    expect(cells.nth(6)).to_contain_text("from the model for electricity, over 14 days")
    # the Workshop has neither a model nor a baseline: its row says so, not "–"
    expect(
        browser_page.locator(f"#league tr[data-node='{tree['workshop']}'] .no-model")
    ).to_contain_text("No reliable model for electricity")
    browser_page.wait_for_function("document.body.dataset.chartsReady === '1'")
    shoot(browser_page, "energy")

    # A phone: 390 px wide, nothing scrolls sideways.
    browser_page.set_viewport_size({"width": 390, "height": 844})
    browser_page.reload()
    browser_page.wait_for_function("document.body.dataset.chartsReady === '1'")
    width = browser_page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390, f"the energy page is {width} px wide at 390 px"
    assert seen["errors"] == []
    assert seen["hosts"] == {urlparse(server.url).netloc}


def test_an_engineer_sets_occupancy_hours_and_a_separable_meter_and_the_page_shows_them(
    tree, server
):
    """The DEC adjustments as an estates engineer makes them: the building's occupancy
    hours and the café's sub-meter as a separable use, both in the admin through Chromium; a
    value over the bound is refused on the form; the energy page's notes then say both."""
    from core.roles import ENGINEERS

    engineer = User.objects.create_user("estates", password=PASSWORD, is_staff=True)
    engineer.groups.add(Group.objects.get(name=ENGINEERS))
    site = Site.objects.get(slug="campus")
    cafe_meter = Meter.objects.get(name="Café sub-meter")
    library = f"{server.url}/admin/energy/meternode/{tree['library']}/change/"
    viewport = {"width": 1100, "height": 900}
    with logged_in_page(server.url, "estates", PASSWORD, "/admin/", viewport) as (page, seen):
        page.goto(library)
        page.fill("#id_annual_occupancy_hours", "8785")
        page.click("input[name=_save]")
        expect(page.locator(".errorlist")).to_contain_text("less than or equal to 8784")
        page.fill("#id_annual_occupancy_hours", "5400")
        page.click("input[name=_save]")
        expect(page.locator(".messagelist")).to_contain_text("was changed successfully")

        page.goto(f"{server.url}/admin/energy/meter/{cafe_meter.pk}/change/")
        page.fill("#id_separable_use", "catering kitchen")
        page.click("input[name=_save]")
        expect(page.locator(".messagelist")).to_contain_text("was changed successfully")

        page.goto(f"{server.url}/staff/energy/?site={site.pk}&start={FIRST}&end={LAST}")
        notes = page.locator(f"#league tr[data-node='{tree['library']}'] .dec-notes li")
        expect(notes.nth(1)).to_have_text(
            "occupancy: 5,400 h a year counted (standard 2,040, maximum 8,760)"
        )
        expect(notes.nth(2)).to_contain_text("catering kitchen (Café sub-meter, electricity)")
        assert seen["errors"] == []


def test_a_viewer_sees_the_dec_fields_read_only_in_the_admin(page, tree, server):
    """The refused side: the viewer of the page fixture may read the building in the admin
    (view permission) but gets no field to change its occupancy hours and no save button; a
    post of the form is a 403 (tests/security, the authorization matrix)."""
    browser_page, seen = page
    browser_page.goto(f"{server.url}/admin/energy/meternode/{tree['library']}/change/")
    expect(browser_page.locator(".field-annual_occupancy_hours")).to_be_visible()
    expect(browser_page.locator("#id_annual_occupancy_hours")).to_have_count(0)
    expect(browser_page.locator("input[name=_save]")).to_have_count(0)
    assert seen["errors"] == []
