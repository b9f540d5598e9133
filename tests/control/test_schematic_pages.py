"""Plant schematic pages (control/schematic_views.py): who may see them, the live JSON, 404s."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from control.models import HeatingPlant

from . import factories as f

pytestmark = pytest.mark.django_db


@pytest.fixture
def plant(redis_client) -> HeatingPlant:
    boiler = f.Actuator.objects.create(name="Boiler", kind="boiler", host="127.0.0.1", coil=1)
    valve = f.Actuator.objects.create(name="Hall valve", kind="valve", host="127.0.0.1", coil=2)
    plant = HeatingPlant.objects.create(name="Boiler house", boiler=boiler)
    plant.zones.add(f.zone("Hall", valve, temp=18.2))
    return plant


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_viewer_sees_the_schematic_and_its_live_part(viewer, plant):
    page = _client(viewer).get(f"/staff/control/plant/{plant.pk}/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "Boiler house" in html and "Hall valve" in html and "18.2 °C" in html
    assert "Not driven by any zone, plant or override yet" in html  # before any tick
    live = _client(viewer).get(f"/staff/control/plant/{plant.pk}/?live=1")
    assert live.status_code == 200 and "<svg" in live.json()["regions"]["live"]


def test_refused_without_a_staff_role_and_when_anonymous(db, plant):
    user = User.objects.create_user("norole", is_staff=True)
    assert _client(user).get(f"/staff/control/plant/{plant.pk}/").status_code == 403
    anonymous = Client().get(f"/staff/control/plant/{plant.pk}/")
    assert anonymous.status_code == 302 and "/login/" in anonymous["Location"]


def test_unknown_plant_and_circuit_are_404(viewer):
    assert _client(viewer).get("/staff/control/plant/999/").status_code == 404
    assert _client(viewer).get("/staff/control/solar/999/").status_code == 404
