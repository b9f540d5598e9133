"""A coil beyond its relay board's range is refused (issue 27, item 9): the board's coil count
(default 16, coils 0–15) bounds the actuators on it, whatever the host is spelt, in the model,
the admin and the API; and a board cannot shrink below a coil in use."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.test import Client

from control.models import RelayBoard
from sensors.models import Actuator

pytestmark = pytest.mark.django_db


@pytest.fixture
def plant_room():
    return RelayBoard.objects.create(name="Plant room relays", host="127.0.0.1", port=502)


def valve(coil: int, host: str = "127.0.0.1", **kw) -> Actuator:
    return Actuator(name=f"Valve {coil}", kind="valve", host=host, port=502, coil=coil, **kw)


def test_the_last_coil_is_accepted_and_the_next_is_refused(plant_room):
    assert plant_room.coil_count == 16
    valve(15).full_clean()
    with pytest.raises(ValidationError) as err:
        valve(16, host="localhost").full_clean()  # the same board, spelt another way
    assert err.value.message_dict["coil"] == [
        "Coil 16 is beyond relay board 'Plant room relays', which has 16 coils (0–15)."
    ]


def test_other_boards_and_boards_without_a_row_are_not_bounded(plant_room):
    valve(16, host="127.0.0.2").full_clean()  # no RelayBoard row: only the Modbus range
    valve(40, device_id=2).full_clean()  # another unit behind the same gateway
    plant_room.coil_count = 48
    plant_room.save()
    valve(47).full_clean()


def test_the_api_refuses_a_coil_beyond_the_board_naming_the_field(plant_room, engineer_api):
    body = {"name": "Hall valve", "kind": "valve", "host": "127.0.0.1", "port": 502, "coil": 16}
    response = engineer_api.post("/api/v1/actuators", body, format="json")
    assert response.status_code == 400, response.content
    assert "beyond relay board 'Plant room relays'" in response.json()["fields"]["coil"][0]
    assert not Actuator.objects.exists()
    response = engineer_api.post("/api/v1/actuators", {**body, "coil": 15}, format="json")
    assert response.status_code == 201, response.content


def test_the_admin_refuses_it_on_the_form(plant_room, superuser):
    c = Client()
    c.force_login(superuser)
    form = {"name": "Hall valve", "kind": "valve", "driver": "modbus_coil", "host": "127.0.0.1",
            "port": 502, "device_id": 1, "coil": 16, "min_on_s": 0, "min_off_s": 0,
            "enabled": "on"}  # fmt: skip
    response = c.post("/admin/sensors/actuator/add/", form)
    assert response.status_code == 200
    assert "Coil 16 is beyond relay board" in response.content.decode()
    assert not Actuator.objects.exists()


def test_a_board_cannot_shrink_below_a_coil_in_use(plant_room, engineer_api):
    valve(12).save()
    url = f"/api/v1/relay-boards/{plant_room.pk}"
    response = engineer_api.patch(url, {"coil_count": 12}, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["fields"]["coil_count"] == [
        "Actuator 'Valve 12' uses coil 12 of this board: the board needs at least 13 coils."
    ]
    assert engineer_api.patch(url, {"coil_count": 13}, format="json").status_code == 200
    for bad in (0, 65537):
        response = engineer_api.patch(url, {"coil_count": bad}, format="json")
        assert response.status_code == 400 and "coil_count" in response.json()["fields"]
    plant_room.refresh_from_db()
    assert plant_room.coil_count == 13


def test_a_viewer_cannot_change_a_board(plant_room, viewer_api, booker_api):
    url = f"/api/v1/relay-boards/{plant_room.pk}"
    for client in (viewer_api, booker_api):
        assert client.patch(url, {"coil_count": 64}, format="json").status_code == 403
    plant_room.refresh_from_db()
    assert plant_room.coil_count == 16
