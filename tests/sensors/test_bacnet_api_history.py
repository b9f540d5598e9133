"""A BACnet controller's changes through the REST API are kept in its admin history, as the
staff page's are (#31, docs/BACNET.md section 8): who, when and what; a viewer's or a booker's
change is refused and leaves nothing there."""

from __future__ import annotations

import pytest
from django.contrib.admin.models import ADDITION, CHANGE, DELETION, LogEntry
from django.test import Client

from sensors.models import BacnetDevice

DEVICE = {"name": "boiler-house", "address": "192.0.2.40", "device_instance": 2601}
POINT = {"object_type": "analog-input", "instance": 1, "name": "Flow", "units": "degrees-celsius"}


def history(user, device_id: int) -> str:
    client = Client()
    client.force_login(user)
    page = client.get(f"/admin/sensors/bacnetdevice/{device_id}/history/")
    assert page.status_code == 200
    return page.content.decode()


def entries(device_id: int) -> list[tuple[str, int, str]]:
    return [
        (e.user.username, e.action_flag, e.change_message)
        for e in LogEntry.objects.filter(object_id=str(device_id)).order_by("pk")
    ]


@pytest.mark.django_db
def test_an_engineers_api_changes_are_in_the_controllers_admin_history(
    engineer, engineer_api, viewer
):
    device_id = engineer_api.post("/api/v1/bacnet-devices", DEVICE, format="json").json()["id"]
    url = f"/api/v1/bacnet-devices/{device_id}"
    changed = engineer_api.patch(url, {"address": "192.0.2.41", "interval": 5}, format="json")
    assert changed.status_code == 200
    # Changes that change nothing record nothing: the same value, or the read-only node.
    assert engineer_api.patch(url, {"interval": 5}, format="json").status_code == 200
    assert engineer_api.patch(url, {"node": 1}, format="json").status_code == 200
    point_id = engineer_api.post(
        "/api/v1/bacnet-points", {**POINT, "device": device_id}, format="json"
    ).json()["id"]
    point_url = f"/api/v1/bacnet-points/{point_id}"
    assert engineer_api.patch(point_url, {"name": "Boiler flow"}, format="json").status_code == 200
    assert engineer_api.patch(point_url, {"name": "Boiler flow"}, format="json").status_code == 200
    assert engineer_api.delete(point_url).status_code == 204

    who = engineer.username
    assert entries(device_id) == [
        (who, ADDITION, "Added device 2601 at 192.0.2.40, polled every 30 s, timeout 3.0 s (API)."),
        (who, CHANGE, "Changed address 192.0.2.40 → 192.0.2.41, interval 30 → 5 (API)."),
        (who, CHANGE, "Added point analog-input,1 'Flow' (API)."),
        (who, CHANGE, "Changed point analog-input,1: name Flow → Boiler flow (API)."),
        (who, CHANGE, "Deleted point analog-input,1; its input kept (API)."),
    ]  # fmt: skip
    # On the admin's History page, as the staff page's changes are, for every staff role.
    page = history(viewer, device_id)
    assert "Changed address 192.0.2.40 → 192.0.2.41, interval 30 → 5 (API)." in page
    assert who in page

    assert engineer_api.delete(url).status_code == 204
    assert entries(device_id)[-1] == (
        who, DELETION, "Deleted device 2601 at 192.0.2.41; its node 'boiler-house' and inputs "
        "kept (API).",
    )  # fmt: skip


@pytest.mark.django_db
def test_a_viewers_or_bookers_api_change_is_refused_and_not_in_the_history(
    engineer_api, viewer_api, booker_api
):
    device_id = engineer_api.post("/api/v1/bacnet-devices", DEVICE, format="json").json()["id"]
    point_id = engineer_api.post(
        "/api/v1/bacnet-points", {**POINT, "device": device_id}, format="json"
    ).json()["id"]
    before = entries(device_id)
    for api in (viewer_api, booker_api):
        url = f"/api/v1/bacnet-devices/{device_id}"
        assert api.patch(url, {"interval": 5}, format="json").status_code == 403
        assert api.delete(url).status_code == 403
        point_url = f"/api/v1/bacnet-points/{point_id}"
        assert api.patch(point_url, {"name": "x"}, format="json").status_code == 403
        assert api.delete(point_url).status_code == 403
    assert entries(device_id) == before and len(before) == 2
    device = BacnetDevice.objects.get(pk=device_id)
    assert (device.node.interval, device.points.get().name) == (30, "Flow")


@pytest.mark.django_db
def test_a_refused_api_change_leaves_no_history(engineer_api):
    device_id = engineer_api.post("/api/v1/bacnet-devices", DEVICE, format="json").json()["id"]
    bad = engineer_api.patch(f"/api/v1/bacnet-devices/{device_id}", {"interval": 4}, format="json")
    assert bad.status_code == 400 and "interval" in bad.json()["fields"]
    assert [flag for _, flag, _ in entries(device_id)] == [ADDITION]
