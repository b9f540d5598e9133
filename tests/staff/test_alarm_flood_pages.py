"""The staff pages stay small with 10,000 open alarms (issue #25: /staff/ grew from 14 KB to
3.6 MB and buried a real relay alarm): a bounded number of rows, most urgent first, with the
counts of all of them. Viewers may read them; anonymous visitors are sent to log in."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group, User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from django.utils.html import escape

from alarms.models import Alarm
from core.roles import ENGINEERS, VIEWERS
from staff.overview import OVERVIEW_ALARMS
from staff.views import ALARMS_PER_PAGE

pytestmark = pytest.mark.django_db

FLOOD = 10_000
RELAY = "Relay 'Boiler' did not confirm ON"
RELAY_HTML = escape(RELAY)


def _client(role: str) -> Client:
    user = User.objects.create_user(role, password="pw", is_staff=True)
    user.groups.add(Group.objects.get(name=role))
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def flood() -> Alarm:
    """The relay alarm first, then 10,000 warnings raised after it (newer)."""
    now = timezone.now()
    relay = Alarm.objects.create(
        key="relay:1", message=RELAY, source="relay", severity="critical",
        raised_at=now - timedelta(hours=1),
    )  # fmt: skip
    Alarm.objects.bulk_create(
        Alarm(key=f"node-silent:{i}", message=f"Node flood{i} silent", source="node",
              raised_at=now - timedelta(seconds=i))
        for i in range(FLOOD)
    )  # fmt: skip
    return relay


def test_the_overview_shows_the_relay_alarm_first_and_counts_the_rest(flood, redis_client):
    with CaptureQueriesContext(connection) as queries:
        response = _client(VIEWERS).get("/staff/")
    assert response.status_code == 200
    html = response.content.decode()
    table = html[html.index('<table id="alarms">') : html.index("</table>")]
    assert table.count("<tr>") == OVERVIEW_ALARMS + 1  # the heading row and 20 alarms
    assert table.index(RELAY_HTML) < table.index("Node flood0 silent")  # critical on top
    assert f"Open alarms ({FLOOD + 1})" in html
    assert "1 critical" in html and f"{FLOOD} warning" in html
    assert len(response.content) < 100_000  # was 3.6 MB with the flood
    assert len(queries.captured_queries) < 40


def test_the_alarm_list_pages_through_them_most_urgent_first(flood, redis_client):
    client = _client(VIEWERS)
    response = client.get("/staff/alarms/")
    assert response.status_code == 200
    html = response.content.decode()
    open_table = html[html.index('<table id="open-alarms">') :]
    open_table = open_table[: open_table.index("</table>")]
    assert open_table.count('<tr id="alarm-') == ALARMS_PER_PAGE
    assert f'<tr id="alarm-{flood.pk}"' in open_table.split("</tr>")[1]  # the first row
    assert (
        f"Open ({FLOOD + 1})" in html and f"page 1 of {-(-(FLOOD + 1) // ALARMS_PER_PAGE)}" in html
    )
    assert len(response.content) < 200_000
    last = client.get(f"/staff/alarms/?page={-(-(FLOOD + 1) // ALARMS_PER_PAGE)}")
    assert last.status_code == 200 and "Node flood9999 silent" in last.content.decode()
    bad = client.get("/staff/alarms/?page=abc")
    assert bad.status_code == 400 and bad.json()["field"] == "page"


def test_acknowledge_all_covers_every_page_but_nothing_newer(flood, redis_client):
    client = _client(ENGINEERS)
    html = client.get("/staff/alarms/").content.decode()
    assert f"Acknowledge all ({FLOOD + 1})" in html
    up_to = re.search(r'name="up_to" value="(\d+)"', html).group(1)
    Alarm.objects.create(key="relay:2", message="raised after", source="relay")
    client.post("/staff/alarms/acknowledge-all", {"up_to": up_to})
    assert Alarm.objects.filter(acknowledged_at__isnull=True).count() == 1


def test_anonymous_visitors_are_sent_to_log_in(flood):
    for path in ("/staff/", "/staff/alarms/", "/staff/alarms/?page=2"):
        response = Client().get(path)
        assert response.status_code == 302 and "/login" in response["Location"]
