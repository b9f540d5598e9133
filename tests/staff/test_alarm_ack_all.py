"""Acknowledge-all on the staff alarm page: engineers may, viewers and bookers may not (the
API's rule for acknowledging); only the alarms the page showed; a bad form value is a 400."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client

from alarms.lifecycle import raise_alarm
from alarms.models import Alarm
from core.roles import BOOKERS, ENGINEERS, VIEWERS

pytestmark = pytest.mark.django_db


def _client(role: str) -> Client:
    user = User.objects.create_user(role, password="pw", is_staff=True)
    user.groups.add(Group.objects.get(name=role))
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def open_alarms() -> list[Alarm]:
    return [
        raise_alarm(f"relay:{i}", f"Relay {i} did not confirm", source="relay")[0] for i in range(3)
    ]


def test_engineer_acknowledges_all_shown(open_alarms):
    newest_shown = open_alarms[1].pk  # the third was raised after the page was drawn
    response = _client(ENGINEERS).post("/staff/alarms/acknowledge-all", {"up_to": newest_shown})
    assert response.status_code == 302
    acked = Alarm.objects.filter(acknowledged_at__isnull=False)
    assert sorted(acked.values_list("pk", flat=True)) == [a.pk for a in open_alarms[:2]]
    assert {a.acknowledged_by.username for a in acked} == {ENGINEERS}


@pytest.mark.parametrize("role", [VIEWERS, BOOKERS])
def test_other_roles_may_not(open_alarms, role):
    client = _client(role)
    response = client.post("/staff/alarms/acknowledge-all", {"up_to": open_alarms[-1].pk})
    assert response.status_code == 403
    assert not Alarm.objects.filter(acknowledged_at__isnull=False).exists()
    assert b"Acknowledge all" not in client.get("/staff/alarms/").content


@pytest.mark.parametrize("up_to", ["", "-1", "abc", "9" * 19])
def test_bad_up_to_is_a_400_naming_it(open_alarms, up_to):
    response = _client(ENGINEERS).post("/staff/alarms/acknowledge-all", {"up_to": up_to})
    assert response.status_code == 400
    assert "up_to" in response.json()["error"]
    assert not Alarm.objects.filter(acknowledged_at__isnull=False).exists()


def test_get_is_refused(open_alarms):
    assert _client(ENGINEERS).get("/staff/alarms/acknowledge-all").status_code == 405


def test_single_acknowledge_never_redirects_off_site(open_alarms):
    response = _client(ENGINEERS).post(
        f"/staff/alarms/{open_alarms[0].pk}/acknowledge", {"next": "https://evil.example/"}
    )
    assert response.status_code == 302 and response["Location"] == "/staff/alarms/"
