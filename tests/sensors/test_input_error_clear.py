"""A node's input-error alarm clears when it posts a batch with nothing skipped an hour or more
after its last skip (docs/INGEST.md, docs/ALARMS.md), and a clean post asks whether it is due
inside its append's script: no round trip of its own (issue #29; sensors/ingest/stream.py,
input_errors.DUE_LUA). Real Redis, the real endpoints through bms.wsgi."""

from __future__ import annotations

import json
import time
import zlib

import pytest

from alarms.models import Alarm
from sensors.ingest import input_errors
from sensors.ingest.emoncms_input import Skipped
from sensors.models import GatewayKey, Site
from tests.sensors.conftest import make_node, queued_batches
from tests.wsgi_client import WsgiClient as Client

pytestmark = pytest.mark.django_db


def skipped_at(subject: str, label: str, at: float) -> None:
    """A skip recorded `at` (the alarm opens), as a post or the worker records one."""
    input_errors.record(subject, label, [Skipped(0, "csv[1]", "text 'x' is not a number")], now=at)


def open_alarm(subject: str) -> Alarm | None:
    return Alarm.objects.filter(key=subject, cleared_at=None).first()


def post(key: str, csv: str = "1.5,2") -> bytes:
    r = Client().get("/input/post", {"node": "emontx1", "csv": csv, "apikey": key})
    assert r.status_code == 200, r.content
    return r.content


@pytest.fixture
def node(redis_client):
    node, key = make_node()
    return node, key, input_errors.node_subject(node.pk)


def test_a_clean_post_an_hour_after_the_last_skip_clears_the_alarm(node):
    node, key, subject = node
    skipped_at(subject, "Node 'emontx1'", time.time() - input_errors.CLEAR_AFTER_S - 5)
    assert open_alarm(subject) is not None
    assert post(key) == b"ok"
    assert open_alarm(subject) is None
    assert input_errors.summary(subject)["count"] == "1"  # the record stays for staff to read
    assert "unsynced" not in input_errors.summary(subject)
    # Closed once: a later clean post finds nothing to close, a later skip opens a new alarm.
    assert post(key) == b"ok"
    skipped_at(subject, "Node 'emontx1'", time.time())
    assert open_alarm(subject).occurrences == 1


def test_a_clean_post_within_the_hour_leaves_it_open(node, redis_client):
    node, key, subject = node
    skipped_at(subject, "Node 'emontx1'", time.time() - input_errors.CLEAR_AFTER_S + 60)
    assert post(key) == b"ok"
    assert open_alarm(subject) is not None
    assert queued_batches(redis_client) == [[node.pk, [[queued_batches(redis_client)[0][1][0][0],
                                                        {"1": 1.5, "2": 2.0}]]]]  # fmt: skip


def test_a_post_with_a_skip_keeps_it_open_however_old_the_last(node):
    node, key, subject = node
    skipped_at(subject, "Node 'emontx1'", time.time() - 2 * input_errors.CLEAR_AFTER_S)
    assert post(key, "1.5,abc") == b"ok"  # the good value stored, the text skipped
    alarm = open_alarm(subject)
    assert alarm is not None
    assert input_errors.summary(subject)["count"] == "2"


def test_a_clean_post_asks_in_its_append_one_round_trip(node, redis_trips):
    node, key, subject = node
    skipped_at(subject, "Node 'emontx1'", time.time())  # open, not yet due
    for _ in range(2):  # warm: the key table read, the file's reach charged and known
        post(key)
    redis_trips.clear()
    assert post(key) == b"ok"
    assert [[name for name, *_ in trip] for trip in redis_trips] == [["EVALSHA"]]
    assert open_alarm(subject) is not None


def test_a_due_alarm_costs_its_close_once(node, redis_trips):
    node, key, subject = node
    skipped_at(subject, "Node 'emontx1'", time.time() - input_errors.CLEAR_AFTER_S - 5)
    post(key)  # warm up, and the alarm closes
    skipped_at(subject, "Node 'emontx1'", time.time() - input_errors.CLEAR_AFTER_S - 5)
    redis_trips.clear()
    assert post(key) == b"ok"
    names = [[name for name, *_ in trip] for trip in redis_trips]
    assert names == [["EVALSHA"], ["ZREM"], ["HDEL"]]
    assert open_alarm(subject) is None


def test_a_clean_rest_post_clears_what_the_worker_recorded(node):
    # REST refuses a bad value (4xx), so its accepted posts are clean batches; a late reading
    # the worker skipped opened the alarm, and the node's good posts clear it as emoncms's do.
    node, key, subject = node
    skipped_at(subject, "Node 'emontx1'", time.time() - input_errors.CLEAR_AFTER_S - 5)
    r = Client().post(
        "/api/v1/readings",
        json.dumps({"values": {"power": 1.0}}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {key}",
    )
    assert r.status_code == 202, r.content
    assert open_alarm(subject) is None


def test_a_gateway_keys_clean_batch_clears_the_gateways_alarm(redis_client):
    site = Site.objects.create(name="Home", slug="home")
    gateway = GatewayKey(site=site, name="emonpi")
    key = gateway.set_new_key()
    gateway.save()
    subject = input_errors.gateway_subject(gateway.pk)
    skipped_at(subject, "Gateway key 'emonpi'", time.time() - input_errors.CLEAR_AFTER_S - 5)
    now = int(time.time())
    r = Client().generic(
        "POST", f"/input/bulk.json?sentat={now}&cb=1",
        zlib.compress(json.dumps([[now, "emonpi", {"power1": 350}]]).encode()),
        HTTP_AUTHORIZATION=f"Bearer {key}",
    )  # fmt: skip
    assert r.content == b"ok"
    assert open_alarm(subject) is None


def test_a_throttled_post_clears_nothing(node, settings):
    node, key, subject = node
    settings.BMS_THROTTLE_INGEST = "1/hour"
    skipped_at(subject, "Node 'emontx1'", time.time() - input_errors.CLEAR_AFTER_S - 5)
    post(key, "1,abc")  # counted, and a skip: recorded now, so not due
    skipped_at(subject, "Node 'emontx1'", time.time() - input_errors.CLEAR_AFTER_S - 5)
    r = Client().get("/input/post", {"node": "emontx1", "csv": "1", "apikey": key})
    assert r.status_code == 429
    assert open_alarm(subject) is not None  # nothing of a refused post ran
