"""The findings page in real headless Chromium: an estates manager logs in and finds the most
costly fault of the week at the top, with its cost and what to check; an engineer marks it
acknowledged and sees their name on it (issue #30)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User
from playwright.sync_api import Page, expect

from core.roles import ENGINEERS, VIEWERS
from findings.evaluate import evaluate
from tests.browser import logged_in_page
from tests.findings.conftest import (  # noqa: F401 (fixtures)
    MONDAY,
    WEEK,
    after_the_recorded_weeks,
    command,
    site_model,
)
from tests.integration import test_staff_browser as _base

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]

server = _base.server  # a real WSGI server in this process, on a free port
VIEWPORT = {"width": 1280, "height": 900}
H = timedelta(hours=1)


@pytest.fixture
def site_data(site_model) -> dict:  # noqa: F811
    for name, group in (("manager", VIEWERS), ("estates", ENGINEERS)):
        user = User.objects.create_user(name, password=_base.PASSWORD, is_staff=True)
        user.groups.add(Group.objects.get(name=group))
    valve, boiler = site_model["valve"], site_model["boiler"]
    for day in range(5):  # the hall heated to 23:00 every weekday: 6 h an evening past 17:00
        command(valve, MONDAY + day * 24 * H + 8 * H, True)
        command(valve, MONDAY + day * 24 * H + 23 * H, False)
    for i in range(18):  # the boiler: 9 starts an hour for two hours on Tuesday morning
        at = MONDAY + 30 * H + i * timedelta(minutes=60 / 9)
        command(boiler, at, True, "heating_plant")
        command(boiler, at + timedelta(minutes=3), False, "heating_plant")
    evaluate(MONDAY, MONDAY + WEEK)
    return site_model


def _page(server, username: str) -> Iterator[tuple[Page, dict]]:
    with logged_in_page(server.url, username, _base.PASSWORD, "/staff/", VIEWPORT) as opened:
        yield opened


@pytest.fixture
def manager_page(server) -> Iterator[tuple[Page, dict]]:
    yield from _page(server, "manager")


@pytest.fixture
def engineer_page(server) -> Iterator[tuple[Page, dict]]:
    yield from _page(server, "estates")


def test_a_manager_finds_the_most_costly_fault_at_the_top_with_its_cost_and_what_to_check(
    manager_page, server
):
    page, seen = manager_page
    page.get_by_role("link", name="Findings").click()
    expect(page.get_by_role("heading", name="Findings")).to_be_visible()
    rows = page.locator("#open-findings tbody tr")
    expect(rows).to_have_count(2)
    top = rows.first
    # 5 evenings × 6 h × 3 kW ÷ 0.85 = 105.9 kWh of gas; × £0.07 = £7.41; × 0.18293 = 19.4 kg
    expect(top).to_contain_text("Heating an empty room")
    expect(top).to_contain_text("Zone 'Hall'")
    expect(top.locator(".cost")).to_contain_text("7.41 GBP")
    expect(top.locator(".cost")).to_contain_text("105.9 kWh")
    expect(top.locator(".cost")).to_contain_text("19.4 kg CO₂")
    expect(top.locator(".check")).to_contain_text("the zone's schedule and bookings")
    top.get_by_role("link", name="Hall valve: commands").click()  # the evidence: its audit rows
    expect(page.locator("#result_list")).to_contain_text("Hall valve")
    page.go_back()
    expect(rows.nth(1)).to_contain_text("Boiler short-cycling")
    expect(rows.nth(1).locator(".cost")).to_contain_text("0.49 GBP")
    expect(page.get_by_role("button", name="Acknowledged")).to_have_count(0)  # read-only
    assert seen["errors"] == []


def test_an_engineer_acknowledges_a_finding_and_their_name_is_kept(engineer_page, server):
    page, seen = engineer_page
    page.goto(server.url + "/staff/findings/")
    top = page.locator("#open-findings tbody tr").first
    top.get_by_role("button", name="Acknowledged").click()
    expect(page.locator("#open-findings tbody tr").first).to_contain_text("Acknowledged by estates")
    # A second tab drawn before the finding is fixed: its buttons are stale.
    stale = page.context.new_page()
    stale.goto(server.url + "/staff/findings/")
    top = page.locator("#open-findings tbody tr").first
    top.get_by_role("button", name="Fixed").click()
    expect(page.locator("#open-findings tbody tr")).to_have_count(1)
    closed = page.locator("#closed-findings tbody tr")
    expect(closed).to_have_count(1)
    expect(closed.first).to_contain_text("Zone 'Hall'")
    expect(closed.first).to_contain_text("Fixed by estates")
    # A fixed finding is final: the stale tab's "Acknowledged" is refused in words (a 400),
    # with the way back, and the finding stays fixed.
    answers = []
    stale.on("response", lambda r: answers.append(r.status) if "/state" in r.url else None)
    stale.locator("#open-findings tbody tr").first.get_by_role(
        "button", name="Acknowledged"
    ).click()
    expect(stale.get_by_role("heading", name="Finding not marked")).to_be_visible()
    expect(stale.locator("#refusal")).to_contain_text("is fixed and closed")
    assert answers == [400]
    stale.get_by_role("link", name="Back to the findings").click()
    expect(stale.locator("#closed-findings")).to_contain_text("Fixed by estates")
    # A finding that no longer exists (deleted since the page was drawn): a 404 in words.
    stale.evaluate(
        """() => {
            const form = document.querySelector("#open-findings form");
            form.action = "/staff/findings/999999/state";
            form.querySelector("button[value=fixed]").click();
        }"""
    )
    expect(stale.locator("#refusal")).to_contain_text("There is no finding 999999")
    assert answers == [400, 404]
    errors = [e for e in seen["errors"] if "status of 40" not in e]  # the refusals themselves
    assert errors == []


@pytest.fixture
def base_load_data(site_data) -> dict:
    """With the heating findings (and the users) of site_data, the office's meter: 0.5 kW every night for four weeks, then 1 kW for the week judged."""
    from energy.models import FuelRate, Meter, MeterNode
    from feeds.models import Feed
    from tests.findings.test_energy_rules import HISTORY, office_load, record

    site = site_data["site"]
    FuelRate.objects.create(site=site, fuel="electricity", price_per_unit=0.25)
    node = MeterNode.objects.create(site=site, name="Office", kind="building")
    feed = Feed.objects.create(name="Office main", tag="t", unit="W", interval=3600)
    Meter.objects.create(node=node, name="Office main", fuel="electricity", source="power",
                         feed=feed)  # fmt: skip
    record(feed.pk, MONDAY - HISTORY, 4 * 168, office_load(500))
    record(feed.pk, MONDAY, 168, office_load(1000))
    evaluate(MONDAY, MONDAY + WEEK)
    return {"feed": feed}


def test_a_manager_opens_a_findings_chart_and_sees_the_meter_it_tripped_on(base_load_data, server):
    # An American browser, whose clock is 12-hour: the chart still reads 24-hour, as the UK
    # site's other charts do (the fresh-eyes tester saw "05:00 PM").
    with logged_in_page(
        server.url, "manager", _base.PASSWORD, "/staff/", VIEWPORT, locale="en-US"
    ) as opened:
        page, seen = opened
        page.get_by_role("link", name="Findings").click()
        row = page.locator("#open-findings tbody tr", has_text="Out-of-hours base load rising")
        # 0.5 kW more × 108 out-of-hours hours = 54 kWh a week, × £0.25 = £13.50
        expect(row.locator(".cost")).to_contain_text("13.50 GBP")
        expect(row.locator(".check")).to_contain_text("left on")
        expect(row).to_contain_text("the rise (kW) × 108 out-of-hours hours a week")
        row.get_by_text("Chart of the evidence").click()
        canvas = row.locator("canvas")
        expect(canvas).to_be_visible()
        handle = canvas.element_handle()
        page.wait_for_function("(c) => Chart.getChart(c) !== undefined", arg=handle)
        drawn = page.evaluate(
            """(c) => {
                const chart = Chart.getChart(c);
                const data = chart.data.datasets[0].data;
                return {label: chart.data.datasets[0].label, points: data.length,
                        values: data.filter((p) => p.y !== null).map((p) => p.y),
                        width: c.width};
            }""",
            handle,
        )
        sent = page.evaluate(
            "(u) => fetch(u).then((r) => r.json())", canvas.get_attribute("data-url")
        )
        labels = page.evaluate(
            """(c) => {
                const chart = Chart.getChart(c);
                const x = chart.scales.x;
                return {ticks: x.ticks.map((t) => String(t.label)),
                        evening: x.options.ticks.callback(Date.UTC(2030, 0, 7, 17, 5))};
            }""",
            handle,
        )
        assert labels["evening"] == "Mon 7, 17:05"
        assert labels["ticks"] and all(
            re.search(r"\b([01]\d|2[0-3]):[0-5]\d$", t) and "M" not in t[-3:]
            for t in labels["ticks"]
        ), labels
        assert drawn["label"] == "Office main"
        # every point the server sent is on the chart, at the feed's own hourly interval: the
        # week and an hour either side, with readings in the week's 168 h and the hour before
        assert drawn["points"] == len(sent["series"][0]["points"]) >= 170
        assert len(drawn["values"]) == 168 + 1
        assert set(drawn["values"]) == {1000.0, 5000.0, 500.0}
        # A reading between gaps (a sensor posting less often than the chart's step) has no
        # line to draw: it is drawn as a dot (the chart was empty: fresh-eyes tester, #30).
        radii = page.evaluate(
            """(c) => {
                const chart = Chart.getChart(c);
                chart.data.datasets[0].data = [{x: 1, y: null}, {x: 2, y: 5}, {x: 3, y: null},
                                               {x: 4, y: 6}, {x: 5, y: 7}];
                chart.update();
                return chart.getDatasetMeta(0).data.map((e) => e.options.radius);
            }""",
            handle,
        )
        assert radii[1] > 0 and radii[3] == radii[4] == 0
        assert drawn["width"] > 0
        assert seen["errors"] == []
