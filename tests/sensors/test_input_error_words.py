"""A node's input errors in three words wherever staff see the counts (#26): "processed late"
(a late reading a step moved its clock back to: processed after all), "skipped (duplicate)"
(a resent reading a step had counted: passed by), "skipped" (not stored or not counted). Through
the real endpoints, drain and processes; seen in the alarm, the inputs page and the API."""

from __future__ import annotations

import time

import pytest
from django.test import Client as PageClient

from alarms.models import Alarm
from sensors.ingest import input_errors
from tests.sensors.test_emoncms_posts import bulk, drain, energy_node, feed, sensor
from tests.wsgi_client import WsgiClient as Client

WATTS = {"power1": 3600}


@pytest.fixture
def client() -> Client:
    return Client()


def _staff_sees(user, node) -> tuple[str, dict]:
    """(the inputs page's text about the node, the API's answer)."""
    page = PageClient()
    page.force_login(user)
    html = page.get("/staff/inputs/").content.decode()
    api = page.get(f"/api/v1/nodes/{node.pk}/input-errors")
    assert api.status_code == 200, api.content
    return html, api.json()


def _alarm(node) -> Alarm | None:
    key = input_errors.node_subject(node.pk)
    return Alarm.objects.filter(key=key, cleared_at__isnull=True).first()


def test_a_reading_processed_late_is_called_processed_late_everywhere(
    db, redis_client, client, viewer
):
    node, key, _ = energy_node()
    t = int(time.time()) - 600
    bulk(client, key, [[t, node.node_id, WATTS], [t + 380, node.node_id, WATTS]])
    drain(node)
    bulk(client, key, [[t + 20, node.node_id, WATTS]])  # power_to_kwh moves its clock back
    drain(node)
    alarm = _alarm(node)
    assert alarm is not None and "1 processed late so far" in alarm.message, alarm
    assert "1 skipped" not in alarm.message
    html, api = _staff_sees(viewer, node)
    assert "Input errors: <strong>1 processed late</strong>" in html
    assert (api["skipped"], api["processed_late"], api["duplicates"]) == (0, 1, 0)
    assert api["text"] == "1 processed late" and "processed late" in api["last"]


def test_a_resent_reading_is_skipped_as_a_duplicate_and_opens_no_alarm(
    db, redis_client, client, viewer
):
    node, key, _ = energy_node()
    power1 = node.sensors.get(key="power1")
    # A counter step too: it keeps only its last time, so it finds the resent rows late; they
    # are duplicates all the same (power_to_kwh knew them), not "skipped" late readings.
    power1.processes = [*power1.processes, {"process": "wh_accumulator", "feed": feed("wh").pk}]
    power1.save()
    t = int(time.time()) - 600
    first = [[t + 10 * i, node.node_id, WATTS] for i in range(3)]
    bulk(client, key, first)
    drain(node)
    bulk(client, key, first)  # the hub got no `ok` and sends the same rows again
    drain(node)
    assert _alarm(node) is None  # the hub's retry working, not a fault
    html, api = _staff_sees(viewer, node)
    assert "Input errors: <strong>3 skipped (duplicate)</strong>" in html
    assert (api["skipped"], api["processed_late"], api["duplicates"]) == (0, 0, 3)
    assert api["text"] == "3 skipped (duplicate)"


def test_a_late_reading_a_counter_step_did_not_count_is_skipped(db, redis_client, client, viewer):
    node, key, _ = energy_node()
    sensor(node, "energy", [{"process": "wh_accumulator", "feed": feed("wh").pk}])
    t = int(time.time()) - 600
    bulk(client, key, [[t + 100, node.node_id, {"energy": 500}]])
    drain(node)
    bulk(client, key, [[t, node.node_id, {"energy": 400}]])  # older: its clock stays
    drain(node)
    alarm = _alarm(node)
    assert alarm is not None and "1 skipped so far" in alarm.message
    assert "processed late so far" not in alarm.message
    html, api = _staff_sees(viewer, node)
    assert "Input errors: <strong>1 skipped</strong>" in html
    assert (api["skipped"], api["processed_late"], api["duplicates"]) == (1, 0, 0)
    assert "not counted by it" in api["last"]


def test_the_three_are_told_apart_in_one_record(db, redis_client):
    record = {"count": "5", "late": "2", "duplicates": "4"}
    assert input_errors.counted(record) == "3 skipped, 2 processed late, 4 skipped (duplicate)"
    assert input_errors.counted({}) == "0 skipped"
    message = input_errors.alarm_message("Node 'n'", record, "x" * 5000)
    assert message.startswith("Node 'n' sent values")
    assert len(message) == input_errors.MAX_ALARM_TEXT  # the bound: newest text cut, not the counts


def test_a_node_without_input_errors_says_none(db, redis_client, viewer):
    node, _, _ = energy_node()
    html, api = _staff_sees(viewer, node)
    assert "Input errors:" not in html
    assert api == {"skipped": 0, "processed_late": 0, "duplicates": 0, "text": "none",
                   "last": "", "at": None}  # fmt: skip
