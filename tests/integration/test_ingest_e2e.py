"""End to end with a real Celery worker, real Redis and the real feed store: a post through
each endpoint appears in the feed; bad input is refused and loses nothing already stored."""

from __future__ import annotations

import json
import shutil
import time
import zlib
from urllib.parse import urlencode

import pytest
from django.conf import settings

from feeds.models import Feed
from feeds.store import service
from sensors import cache
from sensors.models import Sensor
from tests.sensors.conftest import make_node
from tests.wait import wait_for
from tests.wsgi_client import WsgiClient as Client

pytestmark = [pytest.mark.integration]

FORM = "application/x-www-form-urlencoded"


@pytest.fixture
def site(transactional_db, celery_worker, redis_client, engineer):
    """A node with its key; clean caches and feed files (ids restart in each test)."""
    cache.clear_all()
    shutil.rmtree(settings.BMS_FEED_DIR, ignore_errors=True)
    settings.BMS_FEED_DIR.mkdir(parents=True, exist_ok=True)
    node, key = make_node("emontx1", node_id=10, interval=10)
    yield node, key
    cache.clear_all()


def wait_for_feed(node, key: str, count: int, timeout_s: float = 20.0) -> Feed:
    """The feed of node:key once it holds `count` values (the worker is asynchronous)."""

    def filled() -> Feed | None:
        sensor = Sensor.objects.filter(node=node, key=key).select_related("feed").first()
        if sensor and sensor.feed and len(stored(sensor.feed)) >= count:
            return sensor.feed
        return None

    return wait_for(filled, timeout_s, f"{node.name}:{key} to hold {count} values")


def stored(feed: Feed, start: int | None = None, end: int | None = None) -> dict[int, float]:
    now = int(time.time())
    start = start if start is not None else now - 3600
    end = end if end is not None else now + 60
    return {
        t // 1000: v for t, v in service.read(feed.pk, start, end, feed.interval) if v is not None
    }


def via_http(engineer, feed: Feed, start: int, end: int) -> dict[int, float]:
    """The same data through emoncms /feed/data.json (start/end in ms, as emoncms)."""
    client = Client()
    client.force_login(engineer)
    r = client.get(
        "/feed/data.json",
        {"id": feed.pk, "start": start * 1000, "end": end * 1000, "interval": feed.interval},
    )
    assert r.status_code == 200, r.content
    return {t // 1000: v for t, v in r.json() if v is not None}


def test_rest_reading_reaches_its_feed(site, engineer):
    node, key = site
    t = (int(time.time()) // 10) * 10 - 60
    r = Client().post(
        "/api/v1/readings",
        json.dumps(
            [{"time": t, "values": {"power1": 101.5}}, {"time": t + 10, "values": {"power1": 99}}]
        ),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {key}",
    )
    assert r.status_code == 202
    feed = wait_for_feed(node, "power1", 2)
    assert str(feed) == "emontx1:power1"
    assert stored(feed) == {t: 101.5, t + 10: 99.0}
    assert via_http(engineer, feed, t, t + 10) == {t: 101.5, t + 10: 99.0}


def test_input_post_reaches_its_feed(site, engineer):
    node, key = site
    t = (int(time.time()) // 10) * 10 - 30
    r = Client().get("/input/post", {"node": "emontx1", "csv": "10,20", "time": t, "apikey": key})
    assert r.content == b"ok"
    r = Client().post(
        "/input/post.json",
        {"node": 10, "fulljson": json.dumps({"vrms": 243.1, "time": t + 10}), "apikey": key},
    )
    assert r.json() == {"success": True}
    feed = wait_for_feed(node, "2", 1)
    assert stored(feed) == {t: 20.0}
    assert via_http(engineer, feed, t - 60, t + 60) == {t: 20.0}
    assert stored(wait_for_feed(node, "vrms", 1)) == {t + 10: pytest.approx(243.1, abs=1e-4)}


def test_input_bulk_from_emonhub_with_sentat_and_cb_zlib(site, engineer):
    node, key = site
    hub_clock = 1_600_000_000  # the hub's clock is years behind
    data = [[hub_clock - 40 + 10 * i, 10, 100 + i, 200 + i] for i in range(4)]
    body = f"data={json.dumps(data, separators=(',', ':'))}&sentat={hub_clock}&apikey={key}"
    now = int(time.time())
    r = Client().post("/input/bulk.json", body, content_type=FORM)
    assert r.content == b"ok"
    feed = wait_for_feed(node, "1", 4)
    values = stored(feed)
    assert sorted(values.values()) == [100.0, 101.0, 102.0, 103.0]
    # Corrected to the server clock: the rows were 40…10 s old when sent.
    assert all(now - 50 <= t <= now for t in values)

    t = (now // 10) * 10 - 200
    form = urlencode(
        {"data": json.dumps([[t, "emontx1", {"flow": 1.5}]]), "time": 0, "apikey": key}
    )
    r = Client().post("/input/bulk?cb=1", zlib.compress(form.encode()), content_type=FORM)
    assert r.content == b"ok"
    flow = wait_for_feed(node, "flow", 1)
    assert stored(flow) == {t: 1.5}
    assert via_http(engineer, flow, t - 60, t + 60) == {t: 1.5}


def test_bad_input_catalogue_loses_nothing_already_stored(site, engineer):
    node, key = site
    other, other_key = make_node("emontx2", node_id=11)
    t = (int(time.time()) // 10) * 10 - 100
    auth = {"HTTP_AUTHORIZATION": f"Bearer {key}"}
    good = Client().post(
        "/api/v1/readings",
        json.dumps([{"time": t + 10 * i, "values": {"p": float(i)}} for i in range(5)]),
        content_type="application/json",
        **auth,
    )
    assert good.status_code == 202
    feed = wait_for_feed(node, "p", 5)
    before = stored(feed)

    c = Client()
    bad = [
        c.post("/api/v1/readings", "{oops", content_type="application/json", **auth),
        c.post("/api/v1/readings", json.dumps({"time": t, "values": {"p": "x"}}), content_type="application/json", **auth),
        c.post("/api/v1/readings", f'{{"time": {t}, "values": {{"p": NaN}}}}', content_type="application/json", **auth),
        c.post("/api/v1/readings", json.dumps({"node": "nobody", "values": {"p": 1}}), content_type="application/json", **auth),
        c.post("/api/v1/readings", json.dumps({"values": {"p": 1}}), content_type="application/json", HTTP_AUTHORIZATION="Bearer " + "0" * 32),
        c.post("/api/v1/readings", json.dumps({"values": {"p": 1}}), content_type="application/json"),
        c.post("/api/v1/readings", json.dumps({"node": "emontx1", "values": {"p": 1}}), content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {other_key}"),
        c.post("/api/v1/readings", json.dumps({"time": 4_000_000_000, "values": {"p": 1}}), content_type="application/json", **auth),
        c.post("/api/v1/readings", json.dumps({"time": 900_000_000, "values": {"p": 1}}), content_type="application/json", **auth),
        c.post("/input/bulk", {"data": f"{{\"t\": {t}}}", "time": 0, "apikey": key}),
        c.post("/input/bulk", {"data": "[[0,10,1]" * 1, "apikey": key}),
        c.post("/input/bulk?cb=1", b"\x00not zlib", content_type=FORM),
        c.post("/api/v1/readings", json.dumps({"values": {f"k{i}": 1 for i in range(100_000)}}), content_type="application/json", **auth),
    ]  # fmt: skip
    for index, response in enumerate(bad):
        assert 400 <= response.status_code < 500, (index, response.content)
        body = response.json()
        assert body["success"] is False and body["error"], index
    # A real pause, proving a negative: anything wrongly queued would have been processed by now.
    time.sleep(1.0)
    assert stored(feed) == before
    assert list(Sensor.objects.filter(node=node).values_list("key", flat=True)) == ["p"]
