"""The export a spreadsheet user expects (#28 item 5; staff/export.py): dates in, both days
included and the end exclusive (31 days, 31 rows), times in the site's zone, a kWh register
exported as the energy used per day (not its readings), the unit once, a file named for its
feeds and dates. In the site's zone, October 2026 ends summer time on Sunday 25th: a 25-hour
day."""

from __future__ import annotations

import csv
import io
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest
from django.test import Client

from feeds.models import Feed
from feeds.store import service

pytestmark = pytest.mark.django_db

LONDON = ZoneInfo("Europe/London")
# The register reads 1 kWh more each hour, from 30 September to 2 November (UTC hours).
START = int(datetime(2026, 9, 30, tzinfo=LONDON).timestamp())
HOURS = 34 * 24 + 1


def _rows(response) -> list[list[str]]:
    assert response.status_code == 200, response.content
    return list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))


@pytest.fixture
def client(viewer, settings) -> Client:
    settings.TIME_ZONE = "Europe/London"
    c = Client()
    c.force_login(viewer)
    return c


@pytest.fixture
def meter(redis_client) -> Feed:
    feed = Feed.objects.create(name="Main meter", tag="library", unit="kWh", interval=3600)
    service.log_points((feed.pk, START + 3600 * h, float(h)) for h in range(HOURS))
    return feed


@pytest.fixture
def temp(redis_client) -> Feed:
    feed = Feed.objects.create(name="temp", tag="hall", unit="°C", interval=3600)
    service.log_points((feed.pk, START + 3600 * h, 20.0) for h in range(HOURS))
    return feed


def test_31_days_of_a_meter_are_31_rows_of_energy_used_in_local_days(client, meter):
    response = client.get(
        f"/staff/feeds/export.csv?ids={meter.pk}&from=2026-10-01&to=2026-10-31&interval=daily"
    )
    rows = _rows(response)
    assert rows[0] == ["time (Europe/London)", "unix", "library:Main meter (kWh used per day)"]
    days = rows[1:]
    assert len(days) == 31
    assert [r[0] for r in days[:2]] == ["2026-10-01", "2026-10-02"] and days[-1][0] == "2026-10-31"
    used = {r[0]: float(r[2]) for r in days}
    assert used["2026-10-24"] == 24 and used["2026-10-25"] == 25 and used["2026-10-26"] == 24
    assert int(days[0][1]) == int(datetime(2026, 10, 1, tzinfo=LONDON).timestamp())
    assert response["Content-Disposition"] == (
        'attachment; filename="library-main-meter_2026-10-01_to_2026-10-31.csv"'
    )


def test_hourly_rows_are_in_local_time_and_the_long_day_has_25(client, meter, temp):
    rows = _rows(
        client.get(
            f"/staff/feeds/export.csv?ids={temp.pk},{meter.pk}&from=2026-10-25&to=2026-10-25"
            "&interval=3600"
        )
    )
    # Not a calendar interval: the meter's readings, each column's unit once.
    assert rows[0] == ["time (Europe/London)", "unix", "hall:temp (°C)", "library:Main meter (kWh)"]
    hours = rows[1:]
    assert len(hours) == 25
    assert [r[0] for r in hours[:3]] == [
        "2026-10-25 00:00:00",
        "2026-10-25 01:00:00",
        "2026-10-25 01:00:00",  # the hour that repeats; the unix column tells them apart
    ]
    assert hours[-1][0] == "2026-10-25 23:00:00"


def test_a_temperature_exported_daily_is_its_mean(client, temp):
    rows = _rows(
        client.get(
            f"/staff/feeds/export.csv?ids={temp.pk}&from=2026-10-01&to=2026-10-07&interval=daily"
        )
    )
    assert [float(r[2]) for r in rows[1:]] == [20.0] * 7


def test_a_name_that_already_says_its_unit_does_not_get_it_twice(client, redis_client):
    feed = Feed.objects.create(name="PV energy kWh", tag="roof", unit="kWh", interval=3600)
    service.log_points([(feed.pk, START, 1.0)])
    rows = _rows(
        client.get(
            f"/staff/feeds/export.csv?ids={feed.pk}&from=2026-09-30&to=2026-09-30&interval=3600"
        )
    )
    assert rows[0][2] == "roof:PV energy kWh"


def test_a_single_day_file_is_named_for_that_day(client, temp):
    response = client.get(f"/staff/feeds/export.csv?ids={temp.pk}&from=2026-10-05&to=2026-10-05")
    assert response["Content-Disposition"] == 'attachment; filename="hall-temp_2026-10-05.csv"'


def test_unix_start_and_end_are_end_exclusive_too(client, meter):
    start = int(datetime(2026, 10, 1, tzinfo=LONDON).timestamp())
    end = int(datetime(2026, 11, 1, tzinfo=LONDON).timestamp())
    rows = _rows(
        client.get(f"/staff/feeds/export.csv?ids={meter.pk}&start={start}&end={end}&interval=daily")
    )
    assert len(rows) == 1 + 31


@pytest.mark.parametrize(
    "query, field",
    [
        ("from=2026-13-01&to=2026-10-31", "from"),
        ("from=2026-10-01&to=31/10/2026", "to"),
        ("from=2026-10-01", "to"),
        ("to=2026-10-01", "from"),
        ("from=2026-10-31&to=2026-10-01", "to"),
        ("from=1900-01-01&to=1900-01-02", "from"),
        ("from=2026-01-01&to=9999-12-31", "to"),
        ("from=" + "9" * 5000 + "&to=2026-10-31", "from"),
    ],
)
def test_bad_dates_are_400s_naming_the_field(client, meter, query, field):
    response = client.get(f"/staff/feeds/export.csv?ids={meter.pk}&{query}")
    assert response.status_code == 400, response.content
    assert response.json()["field"] == field


def test_the_longest_range_is_accepted_at_a_coarse_interval_and_one_day_more_refused(client, meter):
    from datetime import date, timedelta

    from staff.export import MAX_EXPORT_DAYS

    first = date(2000, 1, 1)
    last = first + timedelta(days=MAX_EXPORT_DAYS - 1)
    ok = client.get(
        f"/staff/feeds/export.csv?ids={meter.pk}&from={first}&to={last}&interval=monthly"
    )
    assert ok.status_code == 200
    over = client.get(
        f"/staff/feeds/export.csv?ids={meter.pk}&from={first}&to={last + timedelta(days=1)}"
        "&interval=monthly"
    )
    assert over.status_code == 400 and over.json()["field"] == "to"


def test_the_same_month_as_an_excel_workbook(client, meter):
    from openpyxl import load_workbook

    meter.tag = '=HYPERLINK("http://evil.example")'
    meter.save()
    response = client.get(
        f"/staff/feeds/export.xlsx?ids={meter.pk}&from=2026-10-01&to=2026-10-31&interval=daily"
    )
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/vnd.openxmlformats")
    assert response["Content-Disposition"].endswith('_2026-10-01_to_2026-10-31.xlsx"')
    sheet = load_workbook(io.BytesIO(response.content)).active
    rows = list(sheet.iter_rows(values_only=True))
    assert rows[0][:2] == ("time (Europe/London)", "unix")
    assert rows[0][2] == '=HYPERLINK("http://evil.example"):Main meter (kWh used per day)'
    assert sheet["C1"].data_type == "s"  # text, not a formula
    assert len(rows) == 1 + 31
    assert rows[1][0] == datetime(2026, 10, 1) and rows[25][0] == datetime(2026, 10, 25)
    assert rows[25][2] == 25


def test_the_workbook_refuses_bad_dates_as_the_csv_does(client, meter):
    response = client.get(f"/staff/feeds/export.xlsx?ids={meter.pk}&from=2026-10-31&to=2026-10-01")
    assert response.status_code == 400 and response.json()["field"] == "to"


def test_a_user_without_a_staff_role_may_not_export_a_workbook(db, meter):
    from django.contrib.auth.models import User

    c = Client()
    c.force_login(User.objects.create_user("norole", is_staff=True))
    url = f"/staff/feeds/export.xlsx?ids={meter.pk}&from=2026-10-01&to=2026-10-31"
    assert c.get(url).status_code == 403
    assert Client().get(url).status_code == 302  # anonymous: to the login page
