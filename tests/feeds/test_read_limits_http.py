"""Over HTTP: the huge-interval read on /feed/data.json, /api/v1/feeds/<id>/data and
the staff CSV export stays within a memory cap and answers right; the export parses its
parameters as /feed/data.json does (feeds/web/query.py), so bad ones are 400s naming the field;
who may export (every staff role) and who may not (no role, anonymous)."""

from __future__ import annotations

import csv
import io

import pytest
from django.contrib.auth.models import User
from django.test import Client

from feeds.models import Feed
from feeds.store import service
from tests.feeds.test_read_bounds import address_space_cap

pytestmark = pytest.mark.django_db
HUGE = 4294967295


@pytest.fixture
def now():
    # The window the attack asked for ends now: reads clip nothing to the wall clock, so a
    # fixed time keeps the test deterministic.
    return 1_700_000_000


@pytest.fixture
def public_feed(feed_dir, redis_client, now):
    feed = Feed.objects.create(name="roof-pv-export", interval=10, public=True)
    service.log_points([(feed.id, now - 100 + 10 * i, float(i)) for i in range(5)])
    service.commit_all(now=now)
    service.log_points([(feed.id, now - 40, 10.0), (feed.id, now - 20, 20.0)])  # buffered
    return feed


def login(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


# The file holds 0..4 at now-100..now-60; the buffer 10 and 20: the mean of the seven.
MEAN = (0 + 1 + 2 + 3 + 4 + 10 + 20) / 7


@pytest.mark.parametrize(
    ("url", "first"),
    [
        # emoncms's windows start at `start` (now - 60, slot 4): the mean of 4, 10 and 20
        ("/feed/data.json?id={id}&start={start}&end={end}&interval={iv}&average=1",
         [(1_700_000_000 - 60) * 1000, (4 + 10 + 20) / 3]),
        # ours are aligned to multiples of the interval: the one window starts at 0
        ("/api/v1/feeds/{id}/data?start={start}&end={end}&interval={iv}&average=1", [0, MEAN]),
    ],
)  # fmt: skip
def test_the_huge_interval_read_is_answered_within_a_memory_cap(client, public_feed, now, url,
                                                                first):  # fmt: skip
    with address_space_cap():
        response = client.get(url.format(id=public_feed.id, start=now - 60, end=now, iv=HUGE))
    assert response.status_code == 200
    body = response.json()
    points = body["data"] if isinstance(body, dict) else body
    assert points == [[first[0], pytest.approx(first[1])]]


def test_the_huge_interval_export_is_answered_within_a_memory_cap(viewer, public_feed, now):
    url = f"/staff/feeds/export.csv?ids={public_feed.id}&start={now - 60}&end={now}&interval={HUGE}"
    with address_space_cap():
        response = login(viewer).get(url)
        body = b"".join(response.streaming_content).decode()
    assert response.status_code == 200
    rows = list(csv.reader(io.StringIO(body)))
    assert rows[1][1] == "0" and float(rows[1][2]) == pytest.approx(MEAN, rel=1e-5)


def test_the_export_that_skipped_the_parser_is_refused(viewer, public_feed):
    # The red team's request: start 0, end 9999999999999 (ms: beyond 2106), interval 1e10.
    url = f"/staff/feeds/export.csv?ids={public_feed.id}&start=0&end=9999999999999"
    with address_space_cap():  # before the fix this took a worker to 20.9 GB
        response = login(viewer).get(url + "&interval=9999999999")
    assert response.status_code == 400
    assert response.json()["field"] == "end"


@pytest.mark.parametrize(
    "params, field",
    [
        ("ids={id}&start=1000&end=inf", "end"),
        ("ids={id}&start=1000&end=1e30", "end"),
        ("ids={id}&start=-1199&end=1000", "start"),
        ("ids={id}&start=1000&end=nan", "end"),
        ("ids=12345678901234567890&start=1000&end=2000", "ids"),
        ("ids={id}&start=1000&end=2000&interval=inf", "interval"),
        ("ids={id}&start=1000&end=2000&interval=-5", "interval"),
        ("ids={id}&start=1000&end=2000&interval=1e30", "interval"),
        ("ids={id}&start=0&end=4294967295&interval=10", "interval"),  # too many rows
        ("ids={id}&start=1000&end=2000&timezone=Mars/Base", "timezone"),
        ("ids={id}&start=2000&end=1000", "end"),
        ("ids=" + ",".join(str(i) for i in range(1, 23)) + "&start=1000&end=2000", "ids"),
        ("ids=a,b", "ids"),
        ("", "ids"),
    ],
)
def test_bad_export_parameters_are_400s_naming_the_field(viewer, public_feed, params, field):
    response = login(viewer).get("/staff/feeds/export.csv?" + params.format(id=public_feed.id))
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["field"] == field and f"'{field}'" in body["error"]


def test_an_export_of_a_missing_feed_is_a_404_naming_it(viewer, public_feed):
    response = login(viewer).get("/staff/feeds/export.csv?ids=999999&start=1000&end=2000")
    assert response.status_code == 404
    assert "999999" in response.json()["error"]


@pytest.mark.parametrize("role", ["viewer", "booker", "engineer", "superuser"])
def test_every_staff_role_may_export(request, role, public_feed, now):
    user = request.getfixturevalue(role)
    url = f"/staff/feeds/export.csv?ids={public_feed.id}&start={now - 100}&end={now}&interval=10"
    response = login(user).get(url)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    # now - 100 up to now, not included (the export's end is exclusive): ten rows
    assert [r[2] for r in rows[1:]] == ["0", "1", "2", "3", "4", "", "10", "", "20", ""]


def test_no_role_and_anonymous_may_not_export(client, public_feed, now):
    url = f"/staff/feeds/export.csv?ids={public_feed.id}&start={now - 100}&end={now}"
    anonymous = client.get(url)
    assert anonymous.status_code == 302 and "/login/" in anonymous["Location"]
    roleless = login(User.objects.create_user("norole", is_staff=True)).get(url)
    assert roleless.status_code == 403
    # The feed's name, not "pv": two random letters of the page's CSRF token matched "pv" in
    # about one run in sixty.
    assert b"roof-pv-export" not in roleless.content
    assert not roleless["Content-Type"].startswith("text/csv")
