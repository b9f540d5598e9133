"""Staff pages: login required, roles respected, alarms acknowledged by engineers only."""

import pytest
from django.contrib.auth.models import User
from django.test import Client

from sensors.alarms import raise_alarm
from sensors.models import Alarm

PAGES = ["/staff/", "/staff/feeds/", "/staff/alarms/"]


def _login(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.parametrize("page", PAGES)
def test_anonymous_goes_to_login(client, db, page):
    response = client.get(page)
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


@pytest.mark.parametrize("page", PAGES)
def test_viewer_sees_every_page(viewer, page):
    assert _login(viewer).get(page).status_code == 200


def test_staff_without_a_role_is_refused(db):
    user = User.objects.create_user("norole", is_staff=True)
    response = _login(user).get("/staff/")
    assert response.status_code == 403
    assert b"not in a staff role" in response.content


def test_root_redirects_to_the_overview(client, db):
    assert client.get("/")["Location"] == "/staff/"


def test_overview_lists_open_alarms(viewer):
    raise_alarm("relay:1", "Relay 'Boiler' did not confirm", source="relay")
    assert b"Relay &#x27;Boiler&#x27; did not confirm" in _login(viewer).get("/staff/").content


def test_engineer_acknowledges_an_alarm(engineer):
    alarm, _ = raise_alarm("meter:1", "Meter silent", source="meter")
    response = _login(engineer).post(f"/staff/alarms/{alarm.pk}/acknowledge", {"next": "/staff/"})
    assert response.status_code == 302 and response["Location"] == "/staff/"
    alarm.refresh_from_db()
    assert alarm.acknowledged_by == engineer


def test_viewer_cannot_acknowledge(viewer):
    alarm, _ = raise_alarm("meter:2", "Meter silent", source="meter")
    assert _login(viewer).post(f"/staff/alarms/{alarm.pk}/acknowledge").status_code == 403
    assert Alarm.objects.get(pk=alarm.pk).acknowledged_at is None


def test_acknowledge_needs_post(engineer):
    alarm, _ = raise_alarm("meter:3", "Meter silent", source="meter")
    assert _login(engineer).get(f"/staff/alarms/{alarm.pk}/acknowledge").status_code == 405


@pytest.mark.parametrize(
    "query, message",
    [
        ("", "'ids' is required"),
        ("ids=a,b", "comma-separated"),
        ("ids=999999", "no feed with id 999999"),
    ],
)
def test_csv_export_refuses_bad_parameters_with_json(viewer, query, message):
    response = _login(viewer).get(f"/staff/feeds/export.csv?{query}")
    assert response.status_code in (400, 404)
    assert message in response.json()["error"]


def test_csv_export_refuses_a_backwards_range(viewer):
    from feeds.models import Feed

    feed = Feed.objects.create(name="t", interval=10)
    response = _login(viewer).get(f"/staff/feeds/export.csv?ids={feed.pk}&start=2000&end=1000")
    assert response.status_code == 400
    assert "'end' must be after 'start'" in response.json()["error"]
