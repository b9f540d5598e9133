"""The findings page in real headless Chromium: an estates manager logs in and finds the most
costly fault of the week at the top, with its cost and what to check; an engineer marks it
acknowledged and sees their name on it (issue #30)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User
from playwright.sync_api import Page, expect

from core.roles import ENGINEERS, VIEWERS
from findings.evaluate import evaluate
from tests.browser import logged_in_page
from tests.findings.conftest import MONDAY, WEEK, command, site_model  # noqa: F401 (fixture)
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
    top = page.locator("#open-findings tbody tr").first
    top.get_by_role("button", name="Fixed").click()
    expect(page.locator("#open-findings tbody tr")).to_have_count(1)
    expect(page.locator("#closed-findings")).to_contain_text("Zone 'Hall'")
    assert seen["errors"] == []
