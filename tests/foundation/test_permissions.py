"""API permissions by group, each rule from both sides:
engineers everything; bookers bookings only; viewers read only; anonymous nothing."""

from datetime import timedelta

import pytest
from django.utils import timezone
from knox.models import AuthToken
from rest_framework.test import APIClient

from control.models import Booking, Zone

READ_ENDPOINTS = ["sites", "nodes", "sensors", "actuators", "feeds", "zones", "schedules",
                  "bookings", "overrides", "actuator-commands", "alarms", "displays", "panels"]  # fmt: skip


@pytest.fixture
def zone(db) -> Zone:
    return Zone.objects.create(name="Room 2", slug="room-2")


def _booking(zone: Zone) -> dict:
    start = timezone.now() + timedelta(hours=3)
    return {"zone": zone.pk, "title": "Choir", "start": start.isoformat(),
            "end": (start + timedelta(hours=1)).isoformat()}  # fmt: skip


@pytest.mark.parametrize("endpoint", READ_ENDPOINTS)
def test_viewer_reads_every_list(viewer_api, endpoint):
    assert viewer_api.get(f"/api/v1/{endpoint}").status_code == 200


@pytest.mark.parametrize("endpoint", READ_ENDPOINTS)
def test_anonymous_reads_nothing(anon_api, endpoint):
    response = anon_api.get(f"/api/v1/{endpoint}")
    assert response.status_code in (401, 403)
    assert "error" in response.json()


def test_staff_without_a_role_reads_nothing(db):
    from django.contrib.auth.models import User

    client = APIClient()
    client.force_authenticate(User.objects.create_user("norole", is_staff=True))
    assert client.get("/api/v1/zones").status_code == 403


def test_viewer_cannot_write(viewer_api, zone):
    assert (
        viewer_api.post("/api/v1/zones", {"name": "X", "slug": "x"}, format="json").status_code
        == 403
    )
    assert viewer_api.post("/api/v1/bookings", _booking(zone), format="json").status_code == 403
    assert (
        viewer_api.patch(f"/api/v1/zones/{zone.pk}", {"name": "Y"}, format="json").status_code
        == 403
    )
    assert not Booking.objects.exists()


def test_booker_writes_bookings(booker_api, zone):
    created = booker_api.post("/api/v1/bookings", _booking(zone), format="json")
    assert created.status_code == 201
    pk = created.json()["id"]
    assert (
        booker_api.patch(
            f"/api/v1/bookings/{pk}", {"title": "Choir practice"}, format="json"
        ).status_code
        == 200
    )
    assert booker_api.delete(f"/api/v1/bookings/{pk}").status_code == 204


def test_booker_cannot_write_anything_else(booker_api, zone):
    assert (
        booker_api.patch(
            f"/api/v1/zones/{zone.pk}", {"comfort_setpoint": 25}, format="json"
        ).status_code
        == 403
    )
    assert booker_api.post("/api/v1/overrides", {}, format="json").status_code == 403
    assert (
        booker_api.post(
            "/api/v1/actuators", {"name": "Sneaky", "host": "x"}, format="json"
        ).status_code
        == 403
    )
    zone.refresh_from_db()
    assert zone.comfort_setpoint == 20.0


def test_engineer_writes_zones_and_overrides(engineer_api, zone):
    assert (
        engineer_api.patch(
            f"/api/v1/zones/{zone.pk}", {"comfort_setpoint": 21}, format="json"
        ).status_code
        == 200
    )


def test_token_auth_works_and_a_bad_token_does_not(engineer, zone):
    _, token = AuthToken.objects.create(user=engineer)
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    assert client.get("/api/v1/zones").status_code == 200
    client.credentials(HTTP_AUTHORIZATION="Token " + "0" * 40)
    assert client.get("/api/v1/zones").status_code == 401


def test_session_auth_works(client, viewer):
    client.force_login(viewer)
    assert client.get("/api/v1/zones").status_code == 200


def test_schema_and_swagger_ui_are_served_locally(client, engineer):
    schema = client.get("/api/schema/")
    assert schema.status_code == 200
    assert b"/api/v1/bookings" in schema.content
    docs = client.get("/api/docs/")
    assert docs.status_code == 200
    html = docs.content.decode()
    assert "cdn" not in html.lower() and "unpkg" not in html.lower()
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/" in html
    assert (
        client.get(
            "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js"
        ).status_code
        == 200
    )
