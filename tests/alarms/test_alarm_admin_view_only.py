"""An alarm's admin page is a view: no Save buttons, a POST refused; the list still lets
engineers acknowledge (alarms/admin.py)."""

import pytest

from alarms.models import Alarm


@pytest.fixture
def alarm(db) -> Alarm:
    return Alarm.objects.create(key="node-silent:1", message="Node 1 is silent", source="node")


def test_an_engineer_sees_the_alarm_page_without_save_buttons(client, engineer, alarm):
    client.force_login(engineer)
    page = client.get(f"/admin/alarms/alarm/{alarm.pk}/change/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "Node 1 is silent" in html
    assert 'name="_save"' not in html and 'name="_continue"' not in html


def test_a_post_to_the_alarm_page_changes_nothing(client, engineer, alarm):
    client.force_login(engineer)
    response = client.post(
        f"/admin/alarms/alarm/{alarm.pk}/change/", {"message": "edited", "_save": "Save"}
    )
    assert response.status_code == 403
    alarm.refresh_from_db()
    assert alarm.message == "Node 1 is silent"


def test_engineers_still_acknowledge_from_the_list_and_viewers_cannot(
    client, engineer, viewer, alarm
):
    data = {"action": "acknowledge_selected", "_selected_action": [alarm.pk]}
    client.force_login(viewer)
    client.post("/admin/alarms/alarm/", data)
    alarm.refresh_from_db()
    assert alarm.acknowledged_at is None
    client.force_login(engineer)
    client.post("/admin/alarms/alarm/", data)
    alarm.refresh_from_db()
    assert alarm.acknowledged_by == engineer
