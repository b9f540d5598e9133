"""Throttling (core/throttle.py) and request size limits, on the real Redis.

Each limit from both sides: under it requests pass, over it a 429 with a JSON message and
Retry-After, decided before the view runs (the request has no effect). Counters are shared
through Redis, so every gunicorn worker sees the same count.
"""

from __future__ import annotations

import json
from urllib.parse import urlencode

import pytest
from knox.models import AuthToken

from core import throttle
from displays.models import Display
from feeds.models import Feed
from tests.wsgi_client import WsgiClient as Client


def _assert_429(response) -> None:
    assert response.status_code == 429, response.content
    assert int(response["Retry-After"]) >= 1
    # JSON everywhere, except the schema view, which renders its error in its own format.
    text = response.content.decode().lower()
    assert "too many requests" in text or "throttled" in text, text
    if response["Content-Type"].startswith("application/json"):
        assert response.json()["success"] is False


# --- the rate format -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("60000/minute", throttle.Rate(60000, 60)),
        ("100/s", throttle.Rate(100, 1)),
        ("500/10s", throttle.Rate(500, 10)),
        ("5/hour", throttle.Rate(5, 3600)),
        ("off", None),
        ("", None),
        (None, None),
    ],
)
def test_parse_rate(text, expected):
    assert throttle.parse_rate(text) == expected


@pytest.mark.parametrize("text", ["fast", "10/fortnight", "-1/minute", "ten/minute"])
def test_parse_rate_refuses_nonsense(text):
    with pytest.raises(ValueError, match="throttle rate"):
        throttle.parse_rate(text)


def test_a_bad_rate_in_the_environment_stops_the_program_naming_it():
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "manage.py", "check"],
        env={**__import__("os").environ, "BMS_THROTTLE_INGEST": "fast"},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode != 0
    assert "BMS_THROTTLE_INGEST" in result.stderr


def test_defaults_are_realistic_per_node_and_leave_room_for_kiosk_polling(settings):
    """An emonTx posts every 10 s (6/min); one node must not flood the shared ingest queue
    (168 req/s from one key left every other node ~2 min late under 60,000/min)."""
    ingest = throttle.parse_rate(settings.BMS_THROTTLE_INGEST)
    failed = throttle.parse_rate(settings.BMS_THROTTLE_INGEST_FAILED)
    public = throttle.parse_rate(settings.BMS_THROTTLE_PUBLIC)
    assert ingest == throttle.Rate(600, 60)
    assert 50 * 6 / 60 <= ingest.count / ingest.window_s <= 20  # 50x an emonTx, at most 20/s
    assert failed == throttle.Rate(120, 60)
    assert public.count / public.window_s >= 20


# --- ingest ----------------------------------------------------------------------------------


def test_ingest_throttled_per_node_key(nodes, redis_client, settings):
    settings.BMS_THROTTLE_INGEST = "3/day"  # a day: no window boundary mid-test
    alpha, beta = nodes
    client = Client()
    body = json.dumps({"values": {"power": 1}})

    def post(key, content=body):
        return client.post(
            "/api/v1/readings", content, content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {key}",
        )  # fmt: skip

    assert [post(alpha).status_code for _ in range(3)] == [202, 202, 202]
    _assert_429(post(alpha))
    # Refused once the key matched, before the body is parsed: a bad body is still a 429.
    _assert_429(post(alpha, b"not json"))
    assert post(beta).status_code == 202  # another node has its own count


def test_a_refused_post_of_a_node_is_counted_and_a_throttled_one_stores_nothing(
    nodes, redis_client, settings
):
    """An accepted post is counted in the script that stores it, a refused one alone: either
    way once, and over the limit nothing is stored (sensors/ingest/stream.py)."""
    from tests.sensors.conftest import queued_batches

    settings.BMS_THROTTLE_INGEST = "3/day"
    alpha, _ = nodes
    client = Client()

    def post(content, path="/api/v1/readings"):
        return client.post(
            path, content, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {alpha}"
        )

    assert post(b"not json").status_code == 400  # counted: 1
    assert post(json.dumps({"node": "beta", "values": {"a": 1}})).status_code == 403  # 2
    assert post(json.dumps({"values": {"a": 1}})).status_code == 202  # 3
    _assert_429(post(json.dumps({"values": {"a": 2}})))
    _assert_429(post(b"not json"))
    assert [rows[0][1] for _, rows in queued_batches(redis_client)] == [{"a": 1}]


def test_a_throttled_gateway_key_registers_no_node(nodes, redis_client, settings):
    """A gateway key is counted before its rows are split: a new node would be registered."""
    from sensors.models import GatewayKey, Node, Site

    settings.BMS_THROTTLE_INGEST = "1/day"
    site = Site.objects.create(name="Plant")
    gateway = GatewayKey(site=site, name="emonhub")
    key = gateway.set_new_key()
    gateway.save()
    client = Client()

    def bulk(node):
        form = urlencode({"data": json.dumps([[0, node, 1]]), "apikey": key})
        return client.post("/input/bulk", form, content_type="application/x-www-form-urlencoded")

    assert bulk("first").status_code == 200
    refused = bulk("second")
    _assert_429(refused)
    # It names the gateway key, not "this node" (an outside check found the node wording).
    assert refused.json()["error"].startswith("too many requests for this gateway key")
    assert Node.objects.filter(name="first").exists()
    assert not Node.objects.filter(name="second").exists()


def test_emoncms_form_key_is_counted_per_key(nodes, redis_client, settings):
    """emonhub and the demo put `apikey` in the form body: still counted per node."""
    settings.BMS_THROTTLE_INGEST = "2/day"
    alpha, beta = nodes
    client = Client()

    def bulk(key, node):
        form = urlencode({"data": json.dumps([[0, node, 1]]), "apikey": key})
        return client.post("/input/bulk", form, content_type="application/x-www-form-urlencoded")

    assert [bulk(alpha, "alpha").status_code for _ in range(2)] == [200, 200]
    _assert_429(bulk(alpha, "alpha"))
    _assert_429(client.get("/input/post", {"node": "alpha", "json": "a:1", "apikey": alpha}))
    assert bulk(beta, "beta").status_code == 200


def test_requests_without_a_key_are_counted_per_ip(nodes, settings):
    settings.BMS_THROTTLE_INGEST_FAILED = "2/day"
    client = Client()
    for _ in range(2):
        assert client.post("/input/post", {"json": "a:1"}).status_code == 401
    _assert_429(client.post("/input/post", {"json": "a:1"}))
    other_ip = client.post("/input/post", {"json": "a:1"}, REMOTE_ADDR="10.0.0.9")
    assert other_ip.status_code == 401


def test_trusted_proxy_header_names_the_client(nodes, settings):
    settings.BMS_THROTTLE_INGEST_FAILED = "1/day"
    settings.BMS_TRUSTED_PROXIES = 1
    client = Client()
    first = client.post("/input/post", {}, HTTP_X_FORWARDED_FOR="203.0.113.5")
    assert first.status_code == 401
    _assert_429(client.post("/input/post", {}, HTTP_X_FORWARDED_FOR="203.0.113.5"))
    # A client's own entries left of what the proxy appended change nothing.
    spoofed = client.post("/input/post", {}, HTTP_X_FORWARDED_FOR="10.9.9.9, 203.0.113.5")
    _assert_429(spoofed)
    assert client.post("/input/post", {}, HTTP_X_FORWARDED_FOR="203.0.113.6").status_code == 401


def test_throttle_off_means_unlimited(nodes, settings):
    settings.BMS_THROTTLE_INGEST = "off"
    settings.BMS_THROTTLE_INGEST_FAILED = "off"
    client = Client()
    assert {client.post("/input/post", {}).status_code for _ in range(20)} == {401}


def test_redis_down_lets_requests_through(redis_client, settings):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    assert throttle.hit("ingest", "ip:1.2.3.4", throttle.Rate(0, 60)) is None


def test_window_resets(redis_client):
    rate = throttle.Rate(2, 10)
    assert throttle.hit("t", "x", rate, now=1000.0) is None
    assert throttle.hit("t", "x", rate, now=1001.0) is None
    assert throttle.hit("t", "x", rate, now=1002.5) == pytest.approx(7.5)
    assert throttle.hit("t", "x", rate, now=1010.0) is None  # next window
    ttl = redis_client.ttl(f"{throttle.KEY_PREFIX}:t:x:101")
    assert 0 < ttl <= 11  # counters expire by themselves


# --- public reads ----------------------------------------------------------------------------


@pytest.fixture
def public_things(db, redis_client):
    Display.objects.create(slug="pv", title="PV", public=True)
    Feed.objects.create(name="pv", tag="demo", interval=10, public=True)


def test_kiosk_and_feed_reads_share_one_count_per_ip(public_things, settings):
    settings.BMS_THROTTLE_PUBLIC = "4/day"
    client = Client()
    assert client.get("/kiosk/pv/data.json").status_code == 200
    assert client.get("/kiosk/pv/").status_code == 200
    assert client.get("/feed/list.json").status_code == 200
    assert client.get("/kiosk/").status_code == 200
    _assert_429(client.get("/kiosk/pv/data.json"))
    _assert_429(client.get("/feed/list.json"))
    assert client.get("/kiosk/pv/data.json", REMOTE_ADDR="10.1.1.1").status_code == 200


# --- DRF API ---------------------------------------------------------------------------------


@pytest.fixture
def low_api_rates(monkeypatch):
    # DRF binds the rates dict when the class is defined, so override it there.
    rates = {"anon": "2/minute", "user": "3/minute"}
    monkeypatch.setattr(throttle.AnonRateThrottle, "THROTTLE_RATES", rates)
    monkeypatch.setattr(throttle.UserRateThrottle, "THROTTLE_RATES", rates)


def test_api_user_throttle_counts_in_redis(engineer, redis_client, low_api_rates):
    token = AuthToken.objects.create(user=engineer)[1]
    client = Client(HTTP_AUTHORIZATION=f"Token {token}")
    assert [client.get("/api/v1/zones").status_code for _ in range(3)] == [200, 200, 200]
    _assert_429(client.get("/api/v1/zones"))
    # The count is in Redis (Django's cache), where every gunicorn worker reads it.
    assert any(b"throttle_user" in key for key in redis_client.keys("bms-cache*"))


def test_api_anonymous_throttle(db, redis_client, low_api_rates):
    """What anonymous may read through DRF (the schema; a public feed's data) is throttled."""
    feed = Feed.objects.create(name="pv", tag="demo", interval=10, public=True)
    client = Client()
    assert client.get("/api/schema/").status_code == 200
    assert client.get(f"/api/v1/feeds/{feed.pk}/timevalue").status_code == 200
    _assert_429(client.get("/api/schema/"))
    # Refused requests for something private are still a plain 401: no throttle needed there.
    assert client.get("/api/v1/zones").status_code == 401


def test_api_throttle_lets_requests_through_when_redis_is_down(
    engineer, redis_client, low_api_rates, monkeypatch
):
    from django.core.cache.backends.redis import RedisCache

    # Nothing listens on port 1: every cache call fails at once.
    dead = RedisCache("redis://127.0.0.1:1/0", {"OPTIONS": {"socket_connect_timeout": 1}})
    monkeypatch.setattr(throttle.UserRateThrottle, "cache", dead)
    token = AuthToken.objects.create(user=engineer)[1]
    client = Client(HTTP_AUTHORIZATION=f"Token {token}")
    assert {client.get("/api/v1/zones").status_code for _ in range(5)} == {200}


# --- request size limits ---------------------------------------------------------------------


def test_oversized_bodies_are_refused_before_parsing(nodes, engineer, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    alpha, _ = nodes
    big = json.dumps({"values": {f"k{i}": i for i in range(2000)}})
    client = Client()
    response = client.post(
        "/api/v1/readings", big, content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {alpha}",
    )  # fmt: skip
    assert response.status_code == 413 and response.json()["field"] == "body"
    response = client.post("/input/bulk", {"data": "[" + "1," * 6000 + "1]", "apikey": alpha})
    assert response.status_code == 413
    token = AuthToken.objects.create(user=engineer)[1]
    response = Client(HTTP_AUTHORIZATION=f"Token {token}", raise_request_exception=False).post(
        "/api/v1/zones", json.dumps({"name": "x" * 20_000, "slug": "x"}),
        content_type="application/json",
    )  # fmt: skip
    assert 400 <= response.status_code < 500
