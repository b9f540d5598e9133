"""Staff pages driven in real headless Chromium the way a person uses them: fill in,
click, wait for what the page shows. Screenshots of each page land in docs/img/."""

from __future__ import annotations

import re
import threading
from datetime import time, timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect

from alarms.lifecycle import clear_alarm, raise_alarm
from alarms.models import Alarm
from control.models import Booking, Override, Zone
from core.dates import day_text
from tests.integration import test_staff_browser as _base

# The fixtures of the first staff browser tests: a logged-in engineer in real Chromium.
site_data, server, page = _base.site_data, _base.server, _base.page

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]

IMG = Path(__file__).resolve().parents[2] / "docs" / "img"


def shoot(browser_page: Page, name: str) -> None:
    """A small screenshot of what the person sees, for the docs (overwritten each run)."""
    IMG.mkdir(exist_ok=True)
    browser_page.screenshot(path=str(IMG / f"staff-{name}.png"))


def test_create_move_and_cancel_a_booking(page, server):
    browser_page, seen = page
    browser_page.set_viewport_size({"width": 1100, "height": 900})
    today = timezone.localdate()
    next_monday = today + timedelta(days=7 - today.weekday())
    browser_page.goto(f"{server.url}/staff/bookings/lecture/?week={next_monday}")
    # The day of a new booking is pre-filled with the shown week's Monday when that is later
    # than today (an ISO value the browser keeps; the en-gb "24/11/2026" was dropped, leaving
    # the field empty).
    expect(browser_page.locator("#id_day")).to_have_value(next_monday.isoformat())
    browser_page.fill("#id_title", "Choir")
    browser_page.fill("#id_start", "10:00")
    browser_page.fill("#id_end", "11:30")
    browser_page.get_by_role("button", name="Book", exact=True).click()
    expect(browser_page.locator(".messages")).to_contain_text("Booked: Choir")
    row = browser_page.locator("tr", has_text="Choir")
    expect(row).to_contain_text("10:00–11:30")
    shoot(browser_page, "booking-calendar")

    row.locator("text=move").click()
    browser_page.wait_for_url("**/staff/bookings/lecture/*/")
    expect(browser_page.locator("#id_day")).to_have_value(next_monday.isoformat())
    expect(browser_page.locator("#id_start")).to_have_value("10:00")
    new_day = next_monday + timedelta(days=2)
    browser_page.fill("#id_day", new_day.isoformat())
    browser_page.fill("#id_start", "14:00")
    browser_page.fill("#id_end", "15:00")
    shoot(browser_page, "booking-move")
    browser_page.get_by_role("button", name="Save", exact=True).click()
    expect(browser_page.locator(".messages")).to_contain_text("Moved: Choir")
    row = browser_page.locator("tr", has_text="Choir")
    expect(row).to_contain_text(f"{day_text(new_day)} 14:00–15:00")

    row.get_by_role("link", name="cancel…").click()  # asks first (issue #28)
    browser_page.get_by_role("button", name="Yes, cancel it").click()
    expect(browser_page.locator(".messages")).to_contain_text("Cancelled: Choir")
    expect(browser_page.locator("tr", has_text="Choir")).to_contain_text("(cancelled)")
    assert seen["errors"] == []


def test_an_early_booking_its_schedule_and_the_all_rooms_week(page, server):
    """A 05:15 booking made on the page is drawn (the calendar widens past 06:00), the room's
    schedule shows beside it, and the all-rooms week lists both."""
    browser_page, seen = page
    browser_page.set_viewport_size({"width": 1100, "height": 900})
    today = timezone.localdate()
    next_monday = today + timedelta(days=7 - today.weekday())

    def give_the_room_a_schedule():
        from control.models import Schedule, SchedulePeriod

        schedule = Schedule.objects.create(name="Lectures")
        SchedulePeriod.objects.create(
            schedule=schedule, weekday=1, start=time(9), end=time(12), setpoint=20.0
        )
        Zone.objects.filter(slug="lecture").update(schedule=schedule)

    in_thread(give_the_room_a_schedule)
    browser_page.goto(f"{server.url}/staff/bookings/lecture/?week={next_monday}")
    expect(browser_page.locator(".hours div").first).to_have_text("06:00")
    browser_page.fill("#id_title", "Sunrise yoga")
    browser_page.fill("#id_start", "05:15")
    browser_page.fill("#id_end", "06:00")
    browser_page.get_by_role("button", name="Book", exact=True).click()
    expect(browser_page.locator(".messages")).to_contain_text("Booked: Sunrise yoga")
    expect(browser_page.locator(".hours div").first).to_have_text("05:00")
    block = browser_page.locator(".day .booking", has_text="Sunrise yoga")
    expect(block).to_contain_text("05:15–06:00")
    assert block.bounding_box()["y"] >= browser_page.locator(".day").first.bounding_box()["y"]
    expect(browser_page.locator(".day .schedule")).to_contain_text("09:00–12:00 Lectures")
    shoot(browser_page, "booking-calendar-early-and-schedule")

    browser_page.get_by_role("link", name="All rooms this week").click()
    table = browser_page.locator("#all-rooms")
    row = table.locator("tr", has_text="Lecture theatre")
    expect(row.locator("td").nth(0)).to_contain_text("05:15–06:00 Sunrise yoga")
    expect(row.locator("td").nth(1)).to_contain_text("09:00–12:00 Lectures")
    shoot(browser_page, "bookings-all-rooms")
    assert seen["errors"] == []


def in_thread(work):
    """Run ORM work beside Playwright: its sync API keeps an event loop in the test's thread,
    where Django refuses database calls."""
    from django.db import connection

    box: dict = {}

    def run() -> None:
        try:
            box["result"] = work()
        finally:
            connection.close()

    worker = threading.Thread(target=run)
    worker.start()
    worker.join(timeout=30)
    return box.get("result")


def test_plant_status_updates_in_place_and_keeps_a_half_typed_override(page, server, settings):
    settings.BMS_STAFF_LIVE_S = 1  # updates every second for the test (default 60)
    browser_page, seen = page
    browser_page.set_viewport_size({"width": 1100, "height": 900})
    browser_page.goto(server.url + "/staff/control/")
    expect(browser_page.locator("#live")).to_contain_text("No override in force")
    assert browser_page.locator("meta[http-equiv=refresh]").count() == 0
    browser_page.fill("#id_reason", "Boiler service visit")  # half-typed, not yet sent
    browser_page.fill("#id_hours", "3")

    def someone_else_overrides():
        zone = Zone.objects.get(slug="lecture")
        now = timezone.now()
        Override.objects.create(
            zone=zone, state=True, starts=now, expires=now + timedelta(hours=1),
            reason="Set from another screen",
        )  # fmt: skip

    in_thread(someone_else_overrides)
    # The next update shows it, in place: the page did not reload ...
    expect(browser_page.locator("#live")).to_contain_text("Set from another screen")
    polls = browser_page.evaluate("window.bmsLive.polls")
    browser_page.wait_for_function(f"window.bmsLive.polls > {polls}")  # one more for good measure
    # ... so what the person was typing is still there.
    expect(browser_page.locator("#id_reason")).to_have_value("Boiler service visit")
    expect(browser_page.locator("#id_hours")).to_have_value("3")
    expect(browser_page.locator("#live-status")).to_contain_text("Live · updated")

    browser_page.select_option("#id_target", label="Zone: Lecture theatre")
    browser_page.select_option("#id_state", label="OFF")
    browser_page.get_by_role("button", name="Set override").click()
    expect(browser_page.locator(".messages")).to_contain_text("Override set")
    row = browser_page.locator("#live tr", has_text="Boiler service visit")
    expect(row).to_contain_text("OFF")
    shoot(browser_page, "plant-status")
    row.get_by_role("button", name="Cancel").click()
    expect(browser_page.locator(".messages")).to_contain_text("Override cancelled")
    expect(browser_page.locator("#live")).not_to_contain_text("Boiler service visit")
    expect(browser_page.locator("#live")).to_contain_text("Set from another screen")
    assert seen["errors"] == []


def test_a_live_page_survives_the_server_going_away(page, server, settings):
    settings.BMS_STAFF_LIVE_S = 1
    browser_page, seen = page
    browser_page.set_viewport_size({"width": 1100, "height": 800})
    for path in ("/staff/control/", "/staff/"):
        browser_page.goto(server.url + path)
        url = browser_page.url
        if path == "/staff/control/":
            browser_page.fill("#id_reason", "Half typed")
        browser_page.wait_for_function("window.bmsLive.polls >= 1 && window.bmsLive.state === 'ok'")
        server.stop()
        try:
            browser_page.wait_for_function("window.bmsLive.state === 'lost'")
            polls = browser_page.evaluate("window.bmsLive.polls")
            browser_page.wait_for_function(f"window.bmsLive.polls >= {polls + 2}")  # retrying
            status = browser_page.locator("#live-status")
            expect(status).to_contain_text("Connection lost, retrying")
            # Still our page with the last data, not Chromium's error page.
            assert browser_page.url == url
            expect(browser_page.locator("#zone-lecture")).to_contain_text("Lecture theatre")
            if path == "/staff/control/":
                expect(browser_page.locator("#id_reason")).to_have_value("Half typed")
                shoot(browser_page, "plant-status-connection-lost")
        finally:
            server.start()
        browser_page.wait_for_function("window.bmsLive.state === 'ok'")
        expect(browser_page.locator("#live-status")).to_contain_text("Live · updated")
    # Failed fetches log console errors (net::ERR_CONNECTION_REFUSED); nothing else may.
    assert [e for e in seen["errors"] if "ERR_CONNECTION_REFUSED" not in e] == []


def test_acknowledge_one_alarm_then_all(page, server):
    browser_page, seen = page
    browser_page.set_viewport_size({"width": 1100, "height": 800})

    def more_alarms():
        raise_alarm(
            "node-silent:1", "Node emontx-hall silent since Mon 23 Nov 2026 09:00:00", source="node"
        )
        raise_alarm("relay:7", "Relay 'Pump' did not confirm ON: no answer", source="relay",
                    severity=Alarm.Severity.CRITICAL)  # fmt: skip
        raise_alarm("relay:8", "Relay 'Valve 2' did not confirm ON: no answer", source="relay",
                    severity=Alarm.Severity.CRITICAL)  # fmt: skip
        clear_alarm("relay:8")  # cleared at once: shows in Recently cleared, with its severity

    in_thread(more_alarms)
    browser_page.goto(server.url + "/staff/alarms/")
    expect(browser_page.locator("#ack-all button")).to_have_text("Acknowledge all (3)")
    expect(browser_page.locator("#cleared-alarms tr", has_text="Valve 2")).to_contain_text(
        "critical"
    )
    row = browser_page.locator("#open-alarms tr", has_text="emontx-hall")
    expect(row.locator("[data-since]")).to_have_text(re.compile(r"^\d+ s$"))  # live duration
    row.get_by_role("button", name="Acknowledge").click()
    expect(browser_page.locator(".messages")).to_contain_text("Acknowledged: Node emontx-hall")
    expect(row).to_contain_text("estates at")
    expect(browser_page.locator("#ack-all button")).to_have_text("Acknowledge all (2)")

    # One more arrives while the page is open: "all" means all the person saw.
    in_thread(lambda: raise_alarm("relay:9", "Relay 'Fan' did not confirm OFF", source="relay"))
    browser_page.locator("#ack-all button").click()
    expect(browser_page.locator(".messages")).to_contain_text("Acknowledged 2 alarms.")
    expect(browser_page.locator("#open-alarms tr", has_text="Pump")).to_contain_text("estates at")
    unseen = browser_page.locator("#open-alarms tr", has_text="Fan")
    expect(unseen.get_by_role("button", name="Acknowledge")).to_be_visible()
    expect(browser_page.locator("#ack-all button")).to_have_text("Acknowledge all (1)")
    shoot(browser_page, "alarms")
    assert seen["errors"] == []


PHONE_PAGES = [*_base.STAFF_PAGES, "/staff/bookings/lecture/{booking}/"]


@pytest.mark.parametrize("width", [390, 360])
def test_every_staff_page_fits_a_phone(page, server, site_data, width):
    browser_page, seen = page
    browser_page.set_viewport_size({"width": width, "height": 800})
    booking = in_thread(lambda: Booking.objects.get(title="Yoga").pk)

    def long_title() -> int:
        # A long unbroken word in a title made "Move booking" 429 px.
        yoga = Booking.objects.get(title="Yoga")
        return Booking.objects.create(
            zone=yoga.zone,
            title="Pilates" * 8,
            start=yoga.end,
            end=yoga.end + (yoga.end - yoga.start),
        ).pk

    long_booking = in_thread(long_title)
    for template in [*PHONE_PAGES, f"/staff/bookings/lecture/{long_booking}/"]:
        path = template.format(booking=booking)
        response = browser_page.goto(server.url + path)
        assert response.status == 200, path
        scroll_width = browser_page.evaluate("document.documentElement.scrollWidth")
        assert scroll_width <= width, f"{path} is {scroll_width} px wide at {width} px"
        log_out = browser_page.locator("#log-out")
        expect(log_out).to_be_visible()
        box = log_out.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= width, path
        # White text on the dark bar: the bar is as tall as its wrapped contents.
        bar = browser_page.locator(".topbar").bounding_box()
        assert box["y"] + box["height"] <= bar["y"] + bar["height"], path
        if width == 390 and template in PHONE_PAGES:
            name = template.strip("/").replace("/", "-").replace("staff", "").strip("-")
            name = name.replace("bookings-lecture-{booking}", "booking-move")
            shoot(browser_page, f"phone-{name or 'overview'}")
    assert seen["errors"] == []


def test_desktop_screenshots_of_every_staff_page(page, server):
    browser_page, _ = page
    browser_page.set_viewport_size({"width": 1100, "height": 800})
    for path, heading in _base.STAFF_PAGES.items():
        browser_page.goto(server.url + path)
        expect(browser_page.locator("h1")).to_contain_text(heading)
        name = path.strip("/").replace("/", "-").replace("staff", "").strip("-") or "overview"
        shoot(browser_page, name)
