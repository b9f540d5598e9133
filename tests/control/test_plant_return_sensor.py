"""A heating plant's optional return sensor (for the findings' flow-return ΔT) is set the way
its flow sensor is: through the API, the admin and the staff plant page, and the change is
recorded in the plant's words."""

from __future__ import annotations

import pytest
from django.test import Client

import control.admin_plant  # noqa: F401  (registers the ModelAdmins)
from control.models import HeatingPlant, ProgrammeChange
from sensors.models import Actuator

from . import factories as f

pytestmark = pytest.mark.django_db


@pytest.fixture
def plant() -> HeatingPlant:
    boiler = Actuator.objects.create(name="Boiler", kind="boiler", host="10.0.0.2", coil=0)
    return HeatingPlant.objects.create(
        name="Boiler house", boiler=boiler, flow_sensor=f.temperature_sensor("flow")
    )


def test_the_api_sets_and_clears_the_return_sensor(engineer_api, plant):
    back = f.temperature_sensor("return")
    url = f"/api/v1/heating-plants/{plant.pk}"
    response = engineer_api.patch(url, {"return_sensor": back.pk}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["return_sensor"] == back.pk
    plant.refresh_from_db()
    assert plant.return_sensor == back
    assert "Return temperature sensor" in ProgrammeChange.objects.get().change
    assert engineer_api.patch(url, {"return_sensor": None}, format="json").status_code == 200
    assert HeatingPlant.objects.get().return_sensor is None


def test_the_api_refuses_an_unknown_return_sensor_naming_the_field(engineer_api, plant):
    response = engineer_api.patch(
        f"/api/v1/heating-plants/{plant.pk}", {"return_sensor": 999_999}, format="json"
    )
    assert response.status_code == 400
    assert "return_sensor" in response.json()["fields"]


def test_the_admin_and_the_staff_page_show_the_return_sensor(superuser, engineer, plant):
    admin, staff = Client(), Client()
    admin.force_login(superuser)
    staff.force_login(engineer)
    page = admin.get(f"/admin/control/heatingplant/{plant.pk}/change/").content.decode()
    assert 'name="return_sensor"' in page
    page = staff.get(f"/staff/plants/{plant.pk}/").content.decode()
    assert 'name="return_sensor"' in page and "Return temperature sensor" in page
