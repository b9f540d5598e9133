"""Staff pages driven in real headless Chromium the way a person uses them (#16): fill in,
click, wait for what the page shows. Screenshots of each page land in docs/img/."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect

from tests.integration.test_staff_browser import (  # noqa: F401  (pytest fixtures)
    page,
    server,
    site_data,
)

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
    # The day of a new booking is pre-filled with the shown week's Monday (an ISO value the
    # browser keeps; the en-gb "24/11/2026" was dropped, leaving the field empty).
    expect(browser_page.locator("#id_day")).to_have_value(next_monday.isoformat())
    browser_page.fill("#id_title", "Choir")
    browser_page.fill("#id_start", "10:00")
    browser_page.fill("#id_end", "11:30")
    browser_page.get_by_role("button", name="Book", exact=True).click()
    expect(browser_page.locator(".messages")).to_contain_text("Booked: Choir")
    row = browser_page.locator("tr", has_text="Choir")
    expect(row).to_contain_text("10:00–11:30")
    shoot(browser_page, "bookings")

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
    expect(row).to_contain_text(f"{new_day:%a %d %b} 14:00–15:00")

    row.locator("button", has_text="Cancel").click()
    expect(browser_page.locator(".messages")).to_contain_text("Cancelled: Choir")
    expect(browser_page.locator("tr", has_text="Choir")).to_contain_text("(cancelled)")
    assert seen["errors"] == []
