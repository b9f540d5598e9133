"""Auto-created inputs are bounded per node and per site: one node key
posting thousands of made-up keys must not make a feed for each."""

from __future__ import annotations

import json
import time

import pytest

from alarms.models import Alarm
from feeds.models import Feed
from sensors.ingest import input_budget
from sensors.ingest.processing import ingest_rows
from sensors.models import Sensor, Site
from tests.sensors.conftest import make_node, queued_batches
from tests.wsgi_client import WsgiClient as Client

pytestmark = pytest.mark.django_db

T0 = 1_700_000_000


def _open_capped_alarm(node) -> Alarm | None:
    """The site's one capped alarm (it counts the skipped readings of all its nodes)."""
    node.refresh_from_db()
    key = input_budget.site_alarm_key(node.site_id)
    return Alarm.objects.filter(key=key, cleared_at=None).first()


def test_defaults_are_documented_values(settings):
    assert settings.BMS_INGEST_MAX_AUTO_INPUTS_PER_NODE == 64
    assert settings.BMS_INGEST_MAX_AUTO_INPUTS_PER_SITE == 1000


def test_five_thousand_new_keys_make_only_the_per_node_bound(redis_client):
    """The red-team request: 5,000 unknown keys in one post made 5,000 feeds."""
    node, _ = make_node()
    values = {f"k{i:04d}": float(i) for i in range(5000)}
    report = ingest_rows(node.pk, [[T0, values]])
    assert len(report.created_sensors) == 64
    assert Sensor.objects.filter(node=node).count() == 64
    assert Feed.objects.filter(tag=node.name).count() == 64
    assert len(report.skipped_keys) == 5000 - 64
    # The keys that got an input are the first in sorted order, as the REST check predicts.
    assert sorted(report.created_sensors) == sorted(values)[:64]
    alarm = _open_capped_alarm(node)
    assert alarm is not None and "emontx1" in alarm.message and "64 per node" in alarm.message
    # The inputs that were created are logged as usual.
    assert report.items == 64


def test_at_the_bound_exactly(redis_client, settings):
    settings.BMS_INGEST_MAX_AUTO_INPUTS_PER_NODE = 3
    node, _ = make_node()
    report = ingest_rows(node.pk, [[T0, {"a": 1, "b": 2, "c": 3}]])
    assert sorted(report.created_sensors) == ["a", "b", "c"] and report.skipped_keys == []
    assert _open_capped_alarm(node) is None
    report = ingest_rows(node.pk, [[T0 + 10, {"a": 1, "d": 4}]])
    assert report.created_sensors == [] and report.skipped_keys == ["d"]
    assert report.items == 1  # a's reading is kept
    assert not Sensor.objects.filter(node=node, key="d").exists()
    assert _open_capped_alarm(node) is not None


def test_hand_made_inputs_do_not_count_and_deleting_makes_room(redis_client, settings):
    settings.BMS_INGEST_MAX_AUTO_INPUTS_PER_NODE = 1
    node, _ = make_node()
    Sensor.objects.create(node=node, key="configured", name="configured")
    assert ingest_rows(node.pk, [[T0, {"x": 1}]]).created_sensors == ["x"]
    assert ingest_rows(node.pk, [[T0 + 10, {"y": 1}]]).skipped_keys == ["y"]
    Sensor.objects.filter(node=node, key="x").delete()
    from sensors import cache

    cache.clear_all()  # on_commit never fires inside a test transaction
    assert ingest_rows(node.pk, [[T0 + 20, {"y": 1}]]).created_sensors == ["y"]


def test_per_site_bound_counts_every_node_of_the_site(redis_client, settings):
    settings.BMS_INGEST_MAX_AUTO_INPUTS_PER_SITE = 4
    site = Site.objects.create(name="School", slug="school")
    other_site = Site.objects.create(name="Hall", slug="hall")
    a, _ = make_node("a", node_id=1)
    b, _ = make_node("b", node_id=2)
    c, _ = make_node("c", node_id=3)
    for node, s in ((a, site), (b, site), (c, other_site)):
        node.site = s
        node.save()
    assert len(ingest_rows(a.pk, [[T0, {"k1": 1, "k2": 2, "k3": 3}]]).created_sensors) == 3
    report = ingest_rows(b.pk, [[T0, {"k1": 1, "k2": 2}]])
    assert report.created_sensors == ["k1"] and report.skipped_keys == ["k2"]
    assert "4 per site" in _open_capped_alarm(b).message
    # Another site has its own count.
    assert len(ingest_rows(c.pk, [[T0, {"k1": 1, "k2": 2}]]).created_sensors) == 2


def test_alarm_clears_when_the_node_stops_sending_new_keys(redis_client, settings):
    settings.BMS_INGEST_MAX_AUTO_INPUTS_PER_NODE = 1
    node, _ = make_node()
    ingest_rows(node.pk, [[T0, {"a": 1, "junk": 2}]])
    assert _open_capped_alarm(node) is not None
    ingest_rows(node.pk, [[T0 + 10, {"a": 1, "junk": 2}]])  # still sending it: stays open
    assert Alarm.objects.filter(key=input_budget.site_alarm_key(None)).count() == 1
    assert _open_capped_alarm(node).occurrences == 2  # one reading skipped per batch
    ingest_rows(node.pk, [[T0 + 20, {"a": 1}]])
    assert _open_capped_alarm(node) is None


# --- the endpoints --------------------------------------------------------------------------


def test_emoncms_bulk_beyond_the_bound_still_answers_ok(redis_client, settings):
    """emonhub resends forever anything but `ok`: it gets `ok`, the worker skips and alarms."""
    settings.BMS_INGEST_MAX_AUTO_INPUTS_PER_NODE = 2
    node, key = make_node()
    data = json.dumps([[0, node.name, {f"k{i}": i for i in range(10)}]])
    response = Client().post("/input/bulk", {"data": data, "apikey": key})
    assert response.status_code == 200 and response.content == b"ok"
    (batch,) = queued_batches(redis_client)
    report = ingest_rows(*batch)
    assert len(report.created_sensors) == 2 and len(report.skipped_keys) == 8
    assert _open_capped_alarm(node) is not None


def test_rest_readings_beyond_the_bound_are_a_409_naming_the_key(redis_client, settings):
    settings.BMS_INGEST_MAX_AUTO_INPUTS_PER_NODE = 2
    node, key = make_node()
    Sensor.objects.create(node=node, key="old", name="old", auto_created=True)
    auth = {"HTTP_AUTHORIZATION": f"Bearer {key}"}
    client = Client()

    def post(body):
        return client.post("/api/v1/readings", json.dumps(body), "application/json", **auth)

    # One more fits (2 - 1 existing): accepted.
    assert post({"values": {"old": 1, "new1": 2}}).status_code == 202
    Sensor.objects.create(node=node, key="new1", name="new1", auto_created=True)
    from sensors import cache

    cache.clear_all()
    response = post([{"values": {"old": 1}}, {"values": {"new2": 1, "new3": 2}}])
    assert response.status_code == 409, response.content
    body = response.json()
    assert body["success"] is False and body["field"] == "values.new2" and body["row"] == 1
    assert "'new2', 'new3'" in body["error"] and "2 per node" in body["error"]
    assert len(queued_batches(redis_client)) == 1  # only the accepted post
    # Known inputs alone are fine.
    assert post({"values": {"old": 3, "new1": 4}}).status_code == 202


def test_rest_check_costs_no_query_for_known_inputs(redis_client, django_assert_num_queries):
    node, key = make_node()
    Sensor.objects.create(node=node, key="p", name="p")
    client = Client()
    auth = {"HTTP_AUTHORIZATION": f"Bearer {key}"}
    body = json.dumps({"time": int(time.time()), "values": {"p": 1}})
    assert client.post("/api/v1/readings", body, "application/json", **auth).status_code == 202
    with django_assert_num_queries(0):
        assert client.post("/api/v1/readings", body, "application/json", **auth).status_code == 202
