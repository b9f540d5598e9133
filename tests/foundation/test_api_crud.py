"""CRUD round trip through /api/v1/ for each object, and bad payloads get 400 naming the field."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from control.models import Schedule, Zone
from displays.models import Display
from feeds.models import Feed
from sensors.models import Actuator, Node, Site


def _now_iso(hours: float = 0) -> str:
    return (timezone.now() + timedelta(hours=hours)).isoformat()


@pytest.fixture
def site(db) -> Site:
    return Site.objects.create(name="CAT", slug="cat")


@pytest.fixture
def node(db) -> Node:
    node = Node(name="emontx1", node_id=10)
    node.set_new_key()
    node.save()
    return node


@pytest.fixture
def zone(db) -> Zone:
    return Zone.objects.create(name="Room 1", slug="room-1")


@pytest.fixture
def actuator(db) -> Actuator:
    return Actuator.objects.create(name="Boiler", kind="boiler", host="127.0.0.1", coil=0)


@pytest.fixture
def schedule(db) -> Schedule:
    return Schedule.objects.create(name="Office hours")


@pytest.fixture
def display(db) -> Display:
    return Display.objects.create(slug="pv", title="Solar PV")


@pytest.fixture
def feed(db) -> Feed:
    return Feed.objects.create(name="power", tag="pv", interval=10)


# (endpoint, create payload factory, field to update, new value)
CASES = {
    "sites": (lambda f: {"name": "Other", "slug": "other"}, "name", "Renamed"),
    "nodes": (lambda f: {"name": "emontx2", "interval": 10}, "location", "Boiler house"),
    "sensors": (lambda f: {"node": f["node"].pk, "key": "power1", "kind": "power"}, "name", "PV"),
    "modbus-registers": (lambda f: {"node": f["node"].pk, "key": "kwh", "address": 342}, "scale", 0.5),
    "actuators": (lambda f: {"name": "Pump", "host": "10.0.0.5", "coil": 3}, "coil", 4),
    "feeds": (lambda f: {"name": "temp", "tag": "room1", "interval": 30}, "public", True),
    "zones": (lambda f: {"name": "Hall", "slug": "hall"}, "comfort_setpoint", 19.5),
    "schedules": (lambda f: {"name": "Weekdays"}, "description", "Mon–Fri"),
    "schedule-periods": (
        lambda f: {"schedule": f["schedule"].pk, "weekday": 0, "start": "08:00", "end": "17:00"},
        "setpoint", 21.0,
    ),
    "schedule-exceptions": (
        lambda f: {"schedule": f["schedule"].pk, "date": "2026-12-25", "description": "Christmas"},
        "description", "Christmas Day",
    ),
    "bookings": (
        lambda f: {"zone": f["zone"].pk, "title": "Yoga", "start": _now_iso(1), "end": _now_iso(2)},
        "title", "Pilates",
    ),
    "overrides": (
        lambda f: {"actuator": f["actuator"].pk, "state": True, "expires": _now_iso(1), "reason": "commissioning"},
        "reason", "testing",
    ),
    "displays": (lambda f: {"slug": "hydro", "title": "Hydro"}, "refresh_s", 60),
    "panels": (
        lambda f: {"display": f["display"].pk, "kind": "live_value", "label": "Power now", "feeds": [f["feed"].pk]},
        "label", "PV now",
    ),
}  # fmt: skip


@pytest.fixture
def fixtures(node, zone, actuator, schedule, display, feed) -> dict:
    return {"node": node, "zone": zone, "actuator": actuator, "schedule": schedule,
            "display": display, "feed": feed}  # fmt: skip


@pytest.mark.parametrize("endpoint", list(CASES))
def test_crud_round_trip(engineer_api, fixtures, endpoint):
    make, field, new_value = CASES[endpoint]
    base = f"/api/v1/{endpoint}"
    created = engineer_api.post(base, make(fixtures), format="json")
    assert created.status_code == 201, created.json()
    pk = created.json()["id"]
    listed = engineer_api.get(base).json()["results"]
    assert pk in [row["id"] for row in listed]
    patched = engineer_api.patch(f"{base}/{pk}", {field: new_value}, format="json")
    assert patched.status_code == 200, patched.json()
    assert engineer_api.get(f"{base}/{pk}").json()[field] == new_value
    assert engineer_api.delete(f"{base}/{pk}").status_code == 204
    if endpoint in ("bookings", "overrides"):  # cancelled, kept for the audit trail
        assert engineer_api.get(f"{base}/{pk}").json()["cancelled"] is True
    else:
        assert engineer_api.get(f"{base}/{pk}").status_code == 404


def test_paths_work_with_a_trailing_slash(engineer_api, zone):
    assert engineer_api.get("/api/v1/zones/").status_code == 200
    assert engineer_api.get(f"/api/v1/zones/{zone.pk}/").status_code == 200


def test_node_create_returns_the_key_once_and_stores_a_hash(engineer_api):
    created = engineer_api.post("/api/v1/nodes", {"name": "emonpi"}, format="json").json()
    key = created["write_key"]
    assert len(key) == 32
    node = Node.objects.get(pk=created["id"])
    assert node.check_key(key) and key not in node.key_hash
    assert engineer_api.get(f"/api/v1/nodes/{node.pk}").json()["write_key"] is None


def test_rotating_a_node_key_invalidates_the_old_one(engineer_api, node):
    old = node.key_hash
    response = engineer_api.post(f"/api/v1/nodes/{node.pk}/rotate-key")
    new_key = response.json()["write_key"]
    node.refresh_from_db()
    assert node.key_hash != old and node.check_key(new_key)


@pytest.mark.parametrize(
    "endpoint, payload_factory, field",
    [
        ("bookings", lambda f: {"zone": f["zone"].pk, "title": "Backwards", "start": _now_iso(2), "end": _now_iso(1)}, "end"),
        ("bookings", lambda f: {"zone": f["zone"].pk, "start": _now_iso(1), "end": _now_iso(2)}, "title"),
        ("bookings", lambda f: {"zone": f["zone"].pk, "title": "x", "start": "not a date", "end": _now_iso(2)}, "start"),
        ("actuators", lambda f: {"name": "Bad coil", "host": "10.0.0.1", "coil": 70000}, "coil"),
        ("actuators", lambda f: {"name": "No host", "driver": "modbus_coil", "coil": 1}, "host"),
        ("schedule-periods", lambda f: {"schedule": f["schedule"].pk, "weekday": 9, "start": "08:00", "end": "09:00"}, "weekday"),
        ("schedule-periods", lambda f: {"schedule": f["schedule"].pk, "weekday": 1, "start": "10:00", "end": "10:00"}, "end"),
        ("zones", lambda f: {"name": "Cold", "slug": "cold", "frost_on": 8, "frost_off": 6}, "frost_off"),
        ("nodes", lambda f: {"name": "has spaces!"}, "name"),
        ("nodes", lambda f: {"name": "radio", "node_id": 300}, "node_id"),
        ("panels", lambda f: {"display": f["display"].pk, "kind": "live_value", "label": "x", "colour": "yellow"}, "colour"),
        ("sites", lambda f: {"name": "X", "slug": "x", "time_zone": "Mars/Olympus"}, "time_zone"),
        ("overrides", lambda f: {"state": True, "expires": _now_iso(1), "reason": "no target"}, "non_field_errors"),
    ],
)  # fmt: skip
def test_bad_payloads_get_400_naming_the_field(
    engineer_api, fixtures, endpoint, payload_factory, field
):
    response = engineer_api.post(f"/api/v1/{endpoint}", payload_factory(fixtures), format="json")
    assert response.status_code == 400
    body = response.json()
    assert field in body["fields"], body
    assert body["error"]


def test_overlapping_schedule_periods_are_refused(engineer_api, schedule):
    first = {"schedule": schedule.pk, "weekday": 2, "start": "08:00", "end": "12:00"}
    assert engineer_api.post("/api/v1/schedule-periods", first, format="json").status_code == 201
    overlap = {"schedule": schedule.pk, "weekday": 2, "start": "11:00", "end": "13:00"}
    response = engineer_api.post("/api/v1/schedule-periods", overlap, format="json")
    assert response.status_code == 400
    assert "overlaps" in response.json()["error"]
    # the same hours on another day are fine
    other_day = dict(overlap, weekday=3)
    assert (
        engineer_api.post("/api/v1/schedule-periods", other_day, format="json").status_code == 201
    )


def test_malformed_json_is_400_not_500(engineer_api):
    response = engineer_api.generic(
        "POST", "/api/v1/zones", "{not json", content_type="application/json"
    )
    assert response.status_code == 400
    assert "JSON" in response.json()["error"]


def test_feed_interval_cannot_change_once_created(engineer_api, feed):
    response = engineer_api.patch(f"/api/v1/feeds/{feed.pk}", {"interval": 60}, format="json")
    assert response.status_code == 400
    assert "interval" in response.json()["fields"]


def test_audit_log_is_read_only_over_the_api(engineer_api, actuator):
    from control.models import ActuatorCommand

    cmd = ActuatorCommand.objects.create(actuator=actuator, state=True, reason="Booking 'Yoga'")
    assert (
        engineer_api.get(f"/api/v1/actuator-commands/{cmd.pk}").json()["reason"] == "Booking 'Yoga'"
    )
    assert engineer_api.delete(f"/api/v1/actuator-commands/{cmd.pk}").status_code == 405
    assert (
        engineer_api.post(
            "/api/v1/actuator-commands", {"actuator": actuator.pk}, format="json"
        ).status_code
        == 405
    )


def test_override_records_who_created_it(engineer_api, engineer, actuator):
    payload = {
        "actuator": actuator.pk,
        "state": False,
        "expires": _now_iso(2),
        "reason": "maintenance",
    }
    created = engineer_api.post("/api/v1/overrides", payload, format="json").json()
    assert created["created_by"] == engineer.pk
