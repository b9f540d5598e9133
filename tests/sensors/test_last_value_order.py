"""An input's last value and time only move forward in time (#26 item 2 follow-up;
sensors/ingest/node_state.py store_last): history or a late post after a live one used to
become the input's "last value", so /input/list.json and the staff inputs page showed the
oldest reading ("10 min ago, stale") while the node was posting live. emoncms's set_timevalue
overwrites with whatever arrives last; ours keeps the newest by time (docs/FEEDS.md)."""

from __future__ import annotations

import json
import time

import pytest
from rest_framework.test import APIClient

from core import api_tokens
from sensors.ingest import node_state
from sensors.ingest import stream as stream
from sensors.ingest.drain import drain_shard
from sensors.models import Sensor, Site
from tests.sensors.conftest import make_node
from tests.wsgi_client import WsgiClient as Client

pytestmark = pytest.mark.django_db


@pytest.fixture
def emontx(feed_dir, redis_client):
    site = Site.objects.create(name="Home", slug="home")
    node, key = make_node()
    node.site = site
    node.save()
    Sensor.objects.create(node=node, key="power1", name="power1")
    return node, key


def post(node, key: str, t: int, values: dict) -> None:
    response = Client().post(
        "/input/post",
        {"node": node.name, "time": str(t), "fulljson": json.dumps(values), "apikey": key},
    )
    assert response.status_code == 200, response.content
    report = drain_shard(stream.shard_of(node.pk))  # each post its own drain: its own batch
    assert report.dropped == 0 and not report.stopped


def test_a_late_reading_after_a_live_one_leaves_the_live_one_as_last(emontx, viewer):
    node, key = emontx
    now = int(time.time())
    post(node, key, now, {"power1": 1520.5})
    post(node, key, now - 600, {"power1": 3.0})  # ten minutes late
    post(node, key, now - 365 * 86_400, {"power1": 7.0, "new": 9.0})  # a year of history
    last = node_state.last_values(node.pk)
    assert last["power1"] == (now, 1520.5)
    assert last["new"] == (now - 365 * 86_400, 9.0)  # its newest, though old: it had none
    client = APIClient()
    rows = client.get("/input/list.json", {"apikey": api_tokens.issue(viewer)[1]}).json()
    shown = {row["name"]: (row["time"], row["value"]) for row in rows}
    assert shown["power1"] == (now, 1520.5)


def test_a_newer_reading_still_replaces_it_and_of_equal_times_the_later_arrival_wins(emontx):
    node, key = emontx
    now = int(time.time())
    post(node, key, now - 20, {"power1": 1.0})
    post(node, key, now - 10, {"power1": 2.0})
    assert node_state.last_values(node.pk)["power1"] == (now - 10, 2.0)
    post(node, key, now - 10, {"power1": 4.0})  # a resend at the same second
    assert node_state.last_values(node.pk)["power1"] == (now - 10, 4.0)


def test_within_one_write_each_input_is_judged_on_its_own(redis_client):
    # The script compares per input: one input's late value is refused while another's newer
    # value in the same write is stored.
    redis_client.hset(
        node_state.last_key(1), mapping={"a": "100 1.0", "b": "100 1.0", "d": "garbled"}
    )
    node_state.store_last(
        redis_client, 1, {"a": (50, 5.0), "b": (150, 6.0), "c": (10, 7.0), "d": (5, 8.0)}
    )
    assert node_state.last_values(1) == {
        "a": (100, 1.0),
        "b": (150, 6.0),
        "c": (10, 7.0),
        "d": (5, 8.0),  # an unreadable entry is replaced, never an error that stops the drain
    }


def test_add_input_still_reads_what_arrived_last_as_emoncms_does(emontx):
    # Only what is shown moves forward in time. A process list that adds another input reads
    # that input's value as last posted, in arrival order, as emoncms's does (and as the
    # differential test against emoncms holds it): a late ref is the one added.
    from feeds.models import Feed
    from feeds.store import service

    node, key = emontx
    out = Feed.objects.create(name="sum", tag="test", interval=10)
    ref = Sensor.objects.create(node=node, key="ref", name="ref")
    Sensor.objects.filter(node=node, key="power1").update(
        processes=[
            {"process": "add_input", "input": ref.pk},
            {"process": "log_to_feed", "feed": out.pk},
        ]
    )
    now = int(time.time()) // 10 * 10
    post(node, key, now - 20, {"ref": 50})
    post(node, key, now - 600, {"ref": 5})  # late
    post(node, key, now - 10, {"power1": 100})
    assert node_state.last_values(node.pk)["ref"] == (now - 20, 50.0)  # shown: the newest
    records = service.get_buffer().pending(out.pk)
    assert list(zip(records["t"].tolist(), records["v"].tolist(), strict=True)) == [
        (now - 10, 105.0)
    ]
