"""HTTP nodes pick up queued commands and acknowledge them (node key auth)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from alarms.models import Alarm
from control import runtime
from control.models import ActuatorCommand, NodeCommand, Override
from control.runner import run_tick
from sensors.models import Actuator

from . import factories as f

pytestmark = pytest.mark.django_db


@pytest.fixture
def heater(redis_client):
    node, key = f.node("esp-heater")
    act = Actuator.objects.create(
        name="Shed heater",
        kind="relay",
        driver="node_queue",
        node=node,
        coil=2,
        min_on_s=0,
        min_off_s=0,
    )
    return node, key, act


def auth(key: str) -> dict:
    return {"HTTP_AUTHORIZATION": f"Bearer {key}"}


def override(act, state=True):
    return Override.objects.create(
        actuator=act, state=state, expires=timezone.now() + timedelta(hours=1), reason="test"
    )


def test_a_command_is_queued_fetched_and_acknowledged(heater):
    node, key, act = heater
    override(act)
    run_tick()
    c = Client()
    body = c.get(f"/api/v1/nodes/{node.pk}/commands", **auth(key)).json()
    [cmd] = body["commands"]
    assert (cmd["actuator"], cmd["state"], cmd["value"], cmd["coil"]) == ("Shed heater", True, 1, 2)
    assert not runtime.load_actuators([act.pk])[act.pk].confirmed
    response = c.post(f"/api/v1/nodes/{node.pk}/commands/{cmd['id']}/ack", **auth(key))
    assert response.status_code == 200 and response.json()["success"] is True
    assert ActuatorCommand.objects.get(actuator=act).confirmed_at is not None
    assert runtime.load_actuators([act.pk])[act.pk].confirmed
    assert c.get(f"/api/v1/nodes/{node.pk}/commands", **auth(key)).json()["commands"] == []
    # Acknowledging twice is harmless.
    assert c.post(f"/api/v1/nodes/{node.pk}/commands/{cmd['id']}/ack", **auth(key)).json()[
        "already_acknowledged"
    ]


def test_only_the_latest_state_waits(heater):
    node, key, act = heater
    o = override(act, True)
    run_tick()
    o.cancelled = True
    o.save()
    override(act, False)
    run_tick()
    [cmd] = Client().get(f"/api/v1/nodes/{node.pk}/commands", **auth(key)).json()["commands"]
    assert cmd["state"] is False
    assert NodeCommand.objects.filter(superseded=True).count() == 1


def test_the_node_reports_a_failure(heater):
    node, key, act = heater
    override(act)
    run_tick()
    cmd = NodeCommand.objects.get()
    response = Client().post(
        f"/api/v1/nodes/{node.pk}/commands/{cmd.pk}/ack",
        {"ok": False, "error": "relay stuck"},
        content_type="application/json",
        **auth(key),
    )
    assert response.status_code == 200
    assert "relay stuck" in Alarm.objects.get(key=f"relay:{act.pk}").message
    assert runtime.load_actuators([act.pk])[act.pk].fault == "relay stuck"


def test_a_node_that_never_picks_up_raises_an_alarm(heater, settings):
    settings.BMS_CONTROL_NODE_ACK_TIMEOUT = 60
    node, key, act = heater
    override(act)
    now = timezone.now()
    run_tick(now)
    report = run_tick(now + timedelta(minutes=2))
    assert report["faults"] == 1
    assert (
        "has not picked up its command for 2 min"
        in Alarm.objects.get(key=f"relay:{act.pk}").message
    )


@pytest.mark.parametrize(
    "headers, status, message",
    [
        ({}, 401, "missing node key"),
        ({"HTTP_AUTHORIZATION": "Bearer " + "0" * 32}, 401, "node key not recognised"),
    ],
)
def test_bad_keys(heater, headers, status, message):
    node, _, _ = heater
    response = Client().get(f"/api/v1/nodes/{node.pk}/commands", **headers)
    assert response.status_code == status and message in response.json()["error"]


def test_another_nodes_key_and_unknown_ids(heater):
    node, key, act = heater
    other, other_key = f.node("other")
    c = Client()
    wrong_key = c.get(f"/api/v1/nodes/{node.pk}/commands", **auth(other_key))
    no_node = c.get("/api/v1/nodes/9999/commands", **auth(key))
    # One answer for both: a caller cannot tell which node ids exist.
    assert wrong_key.status_code == no_node.status_code == 401
    assert wrong_key.json() == no_node.json()
    override(act)
    run_tick()
    cmd = NodeCommand.objects.get()
    # Another node cannot acknowledge this node's command.
    assert (
        c.post(f"/api/v1/nodes/{other.pk}/commands/{cmd.pk}/ack", **auth(other_key)).status_code
        == 404
    )
    bad = c.post(
        f"/api/v1/nodes/{node.pk}/commands/{cmd.pk}/ack",
        "{nope",
        content_type="application/json",
        **auth(key),
    )
    assert bad.status_code == 400 and "not valid JSON" in bad.json()["error"]
    bad = c.post(
        f"/api/v1/nodes/{node.pk}/commands/{cmd.pk}/ack",
        {"ok": "yes"},
        content_type="application/json",
        **auth(key),
    )
    assert bad.status_code == 400 and bad.json()["error"].startswith("ok:")
    assert c.post(f"/api/v1/nodes/{node.pk}/commands", **auth(key)).status_code == 405


def test_deeply_nested_ack_body_is_a_400(heater):
    """`[` x 100,000 made json.loads raise RecursionError: a 500."""
    node, key, act = heater
    override(act)
    run_tick()
    cmd = NodeCommand.objects.get()
    response = Client().post(
        f"/api/v1/nodes/{node.pk}/commands/{cmd.pk}/ack", "[" * 100_000,
        content_type="application/json", **auth(key),
    )  # fmt: skip
    assert response.status_code == 400
    assert response.json() == {"success": False, "error": "body: not valid JSON", "field": "body"}
    cmd.refresh_from_db()
    assert cmd.acknowledged_at is None  # nothing recorded from a refused body
