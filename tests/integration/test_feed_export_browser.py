"""An estates manager exports a month of a meter from the feed explorer with the date
pickers, in real Chromium (#28 item 5): ticks the feed, picks 1 and 31 October, one row a day,
and gets a file named for the feed and the dates, with 31 rows of energy used per day in the
site's local dates."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest
from django.contrib.auth.models import Group, User
from playwright.sync_api import expect

from core.roles import ENGINEERS
from feeds.models import Feed
from feeds.store import service
from tests.browser import logged_in_page
from tests.live_http import KioskServer

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]

PASSWORD = "browser-test-pw"
LONDON = ZoneInfo("Europe/London")
START = int(datetime(2026, 9, 30, tzinfo=LONDON).timestamp())


@pytest.fixture
def server(redis_client, settings) -> Iterator[KioskServer]:
    settings.TIME_ZONE = "Europe/London"
    user = User.objects.create_user("estates", password=PASSWORD, is_staff=True)
    user.groups.add(Group.objects.get(name=ENGINEERS))
    meter = Feed.objects.create(name="Main meter", tag="library", unit="kWh", interval=3600)
    service.log_points((meter.pk, START + 3600 * h, float(h)) for h in range(34 * 24))
    srv = KioskServer()
    srv.start()
    yield srv
    srv.stop()


def test_a_month_of_a_meter_exported_with_the_date_pickers(server):
    viewport = {"width": 1280, "height": 900}
    with logged_in_page(server.url, "estates", PASSWORD, "/staff/feeds/", viewport) as (page, seen):
        # Nothing ticked: told so, nothing downloaded.
        page.get_by_role("button", name="Export CSV for these days").click()
        expect(page.locator("#error")).to_have_text("Tick at least one feed to export.")

        page.get_by_label("Main meter").check()
        page.fill("#export-from", "2026-10-01")
        page.fill("#export-to", "2026-10-31")
        page.get_by_label("Rows").select_option("daily")
        with page.expect_download() as caught:
            page.get_by_role("button", name="Export CSV for these days").click()
        download = caught.value
        assert download.suggested_filename == "library-main-meter_2026-10-01_to_2026-10-31.csv"
        rows = list(csv.reader(io.StringIO(open(download.path(), encoding="utf-8").read())))
        assert rows[0] == ["time (Europe/London)", "unix", "library:Main meter (kWh used per day)"]
        assert len(rows) == 1 + 31
        assert (rows[1][0], rows[-1][0]) == ("2026-10-01", "2026-10-31")
        assert {r[0]: r[2] for r in rows[1:]}["2026-10-25"] == "25"  # the day clocks go back
        # The same days as a workbook.
        with page.expect_download() as caught:
            page.get_by_role("button", name="Excel (.xlsx)").click()
        assert caught.value.suggested_filename == (
            "library-main-meter_2026-10-01_to_2026-10-31.xlsx"
        )
        from openpyxl import load_workbook

        sheet = load_workbook(io.BytesIO(caught.value.path().read_bytes())).active
        assert sheet.max_row == 1 + 31 and sheet["C26"].value == 25
        assert seen["errors"] == []
