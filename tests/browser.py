"""Real Chromium for the staff browser tests: Debian's binary (never a download), logged in
through the real login form, with console errors and requested hosts collected."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlparse

from playwright.sync_api import Page, Request, sync_playwright

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def staff_login(page: Page, url: str, username: str, password: str, next_path: str) -> None:
    page.goto(f"{url}/admin/login/?next={next_path}")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("input[type=submit]")
    page.wait_for_url(f"**{next_path}")


@contextmanager
def logged_in_page(
    url: str,
    username: str,
    password: str,
    next_path: str,
    viewport: dict[str, int],
    timezone_id: str | None = None,
    locale: str | None = None,
) -> Iterator[tuple[Page, dict]]:
    """(page, seen): seen["errors"] holds console and page errors, seen["hosts"] every host
    a request went to. `locale`: the browser's language (e.g. "en-US", whose clock is
    12-hour). Playwright's sync API runs an event loop in this thread: enter it after the ORM
    work."""
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport=viewport, timezone_id=timezone_id, locale=locale)
        page = context.new_page()
        seen: dict = {"errors": [], "hosts": set()}
        page.on("console", lambda m: seen["errors"].append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: seen["errors"].append(str(e)))
        page.on("request", lambda r: seen["hosts"].add(urlparse(r.url).netloc))
        pending = _track_pending(page)
        try:
            staff_login(page, url, username, password, next_path)
            yield page, seen
        except Exception as exc:
            # Which request the page still waited for when a wait timed out: a hung request
            # is the usual reason a navigation never reaches its load event.
            now = time.monotonic()
            waiting = [f"{r.method} {r.url} ({now - t:.1f} s)" for r, t in pending.items()]
            exc.add_note(f"page at {page.url}; requests in flight: {waiting or 'none'}")
            raise
        finally:
            browser.close()


def _track_pending(page: Page) -> dict[Request, float]:
    """The page's requests not yet finished or failed, with when each was sent."""
    pending: dict[Request, float] = {}
    page.on("request", lambda r: pending.__setitem__(r, time.monotonic()))
    page.on("requestfinished", lambda r: pending.pop(r, None))
    page.on("requestfailed", lambda r: pending.pop(r, None))
    return pending
