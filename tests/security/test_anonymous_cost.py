"""Anonymous requests that cost the server 0.5-1 s each (second red-team round), counted, not
timed: the schema is generated once per process, /healthz pings the workers at most once per
cache period for anonymous callers, and an ingest request's key is identified (and, for a
compressed body, charged) before its body is inflated or parsed, so a refused key costs a
lookup, never an inflate.

The counters wrap the real functions (each call still runs them); the clock of /healthz is
moved with time_machine.
"""

from __future__ import annotations

import json
import secrets
import time
import zlib
from collections import Counter
from collections.abc import Callable
from urllib.parse import urlencode

import pytest
import time_machine
from django.http.request import HttpRequest
from drf_spectacular.generators import SchemaGenerator

from bms import health
from bms.celery import app as celery_app
from core.openapi import CachedSchemaView
from sensors import cache
from sensors.ingest import emoncms_input
from sensors.models import GatewayKey, Site
from tests.sensors.conftest import make_node
from tests.wsgi_client import WsgiClient as Client

OUTSIDE = "192.0.2.10"  # an internet address, through no proxy


def _count(monkeypatch, calls: Counter, owner, name: str) -> None:
    """Replace owner.name by a wrapper that counts each call and runs the real function."""
    real: Callable = getattr(owner, name)

    def counted(*args, **kwargs):
        calls[name] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, counted)


# --- /api/schema/ -----------------------------------------------------------------------------


@pytest.fixture
def schema_calls(monkeypatch) -> Counter:
    CachedSchemaView.forget()
    calls: Counter = Counter()
    _count(monkeypatch, calls, SchemaGenerator, "get_schema")
    yield calls
    CachedSchemaView.forget()


@pytest.mark.django_db
def test_the_schema_is_generated_once_per_process(schema_calls):
    client = Client()
    first = client.get("/api/schema/", REMOTE_ADDR=OUTSIDE)
    assert first.status_code == 200 and b"openapi:" in first.content
    for query in ("", "?version=2", "?lang=fr", "?format=json"):
        again = client.get(f"/api/schema/{query}", REMOTE_ADDR=OUTSIDE)
        assert again.status_code == 200, query
    as_json = client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert json.loads(as_json.content)["info"]["title"] == "Open BMS API"
    assert as_json.content.count(b"/api/v1/") > 10
    assert schema_calls["get_schema"] == 1
    # the same bytes each time: rendered once per format too
    assert client.get("/api/schema/").content == first.content


# --- /healthz ---------------------------------------------------------------------------------


@pytest.fixture
def pings(monkeypatch, settings) -> Counter:
    """Broadcasts to the workers counted (one a check: which queues each consumes, under the
    key "ping"); the cache period 60 s, so the real time a test takes (each broadcast waits its
    timeout: no worker runs) never ends a period: only the test's clock does."""
    health.forget()
    settings.BMS_HEALTHZ_CACHE_S = 60
    monkeypatch.setattr(health, "WORKER_INSPECT_TIMEOUT_S", 0.1)
    calls: Counter = Counter()
    real = celery_app.control.broadcast

    def counted(*args, **kwargs):
        calls["ping"] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(celery_app.control, "broadcast", counted)
    yield calls
    health.forget()


@pytest.mark.django_db
def test_anonymous_healthz_pings_the_workers_at_most_once_per_cache_period(pings, redis_client):
    client = Client()
    with time_machine.travel(1_900_000_000, tick=True) as clock:
        answers = [client.get("/healthz", REMOTE_ADDR=OUTSIDE) for _ in range(20)]
        assert pings["ping"] == 1
        assert {a.json()["checks"]["worker"]["ok"] for a in answers} == {False}
        clock.shift(59)
        client.get("/healthz", REMOTE_ADDR=OUTSIDE)
        assert pings["ping"] == 1  # still inside the period
        clock.shift(2)
        for _ in range(5):
            client.get("/healthz", REMOTE_ADDR=OUTSIDE)
        assert pings["ping"] == 2
        clock.shift(-3600)  # a clock set back does not keep a result past its period
        client.get("/healthz", REMOTE_ADDR=OUTSIDE)
        assert pings["ping"] == 3


@pytest.mark.django_db
def test_a_request_through_the_proxy_from_the_loopback_is_anonymous_too(pings, redis_client):
    """nginx on the same host connects from 127.0.0.1 and adds X-Forwarded-For: not the
    local monitor, so not a fresh check."""
    client = Client()
    for _ in range(5):
        client.get("/healthz", REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR=OUTSIDE)
    assert pings["ping"] == 1


@pytest.mark.django_db
def test_staff_and_the_local_monitor_get_a_fresh_check_each_time(pings, redis_client, engineer):
    staff = Client()
    staff.force_login(engineer)
    for _ in range(3):
        body = staff.get("/healthz", REMOTE_ADDR=OUTSIDE).json()
        assert "workers" in body["checks"]["worker"]  # the details, for staff
    assert pings["ping"] == 3
    for _ in range(2):  # the compose health check: gunicorn's own loopback, no proxy
        Client().get("/healthz", REMOTE_ADDR="127.0.0.1")
    assert pings["ping"] == 5
    # the fresh result answers anonymous callers for the period after it
    Client().get("/healthz", REMOTE_ADDR=OUTSIDE)
    assert pings["ping"] == 5


@pytest.mark.django_db
def test_anonymous_callers_see_a_change_once_the_period_ends(pings, settings, tmp_path):
    client = Client()
    with time_machine.travel(1_900_000_000, tick=True) as clock:
        assert client.get("/healthz", REMOTE_ADDR=OUTSIDE).json()["checks"]["data_dir"]["ok"]
        settings.BMS_FEED_DIR = tmp_path / "gone"
        cached = client.get("/healthz", REMOTE_ADDR=OUTSIDE).json()
        assert cached["checks"]["data_dir"] == {"ok": True}
        clock.shift(61)
        fresh = client.get("/healthz", REMOTE_ADDR=OUTSIDE)
        assert fresh.status_code == 503 and fresh.json()["checks"]["data_dir"] == {"ok": False}


# --- ingest: the key before the body -----------------------------------------------------------


@pytest.fixture
def body_work(monkeypatch, db, redis_client) -> Counter:
    """Every inflate, bulk/post parse and form parse of the ingest views, counted. The key
    caches start empty (a node made by an earlier test is not remembered)."""
    cache.clear_all()
    calls: Counter = Counter()
    _count(monkeypatch, calls, emoncms_input, "decompress_body")
    _count(monkeypatch, calls, emoncms_input, "parse_bulk")
    _count(monkeypatch, calls, emoncms_input, "parse_post")
    _count(monkeypatch, calls, HttpRequest, "_load_post_and_files")
    yield calls
    cache.clear_all()


def _bomb() -> bytes:
    """What the red team sent: a few KB of cb=1 body that inflates to a 4 MB form."""
    form = b"data=" + b"1" * (4 * 1_048_576 - 100)
    body = zlib.compress(form, 9)
    assert len(body) < 8_000
    return body


def _rows() -> bytes:
    return zlib.compress(json.dumps([[int(time.time()) - 5, "emontx1", 1, 2]]).encode())


def _post_cb(body: bytes, query: str = "", **headers):
    return Client().generic(
        "POST", f"/input/bulk.json?cb=1{query}", body, REMOTE_ADDR=OUTSIDE, **headers
    )


@pytest.mark.django_db
def test_an_unknown_key_inflates_and_parses_nothing(body_work, redis_client):
    make_node()
    bomb = _bomb()
    for key in (secrets.token_hex(16), "x" * 40):
        assert _post_cb(bomb, HTTP_AUTHORIZATION=f"Bearer {key}").status_code == 401
        assert _post_cb(bomb, f"&apikey={key}").status_code == 401
    hex_form = urlencode({"c": "1", "data": bomb.hex()})
    response = Client().get(f"/input/bulk.json?{hex_form}&apikey=nope", REMOTE_ADDR=OUTSIDE)
    assert response.status_code == 401
    form = Client().post(
        "/input/post?apikey=nope", {"node": "emontx1", "json": "a:1" * 1000}, REMOTE_ADDR=OUTSIDE
    )
    assert form.status_code == 401
    assert sum(body_work.values()) == 0, body_work


@pytest.mark.django_db
def test_a_throttled_node_key_inflates_and_parses_nothing(body_work, settings, redis_client):
    settings.BMS_THROTTLE_INGEST = "2/day"  # a day: no window ends mid-test
    _node, key = make_node()
    bearer = {"HTTP_AUTHORIZATION": f"Bearer {key}"}
    assert [_post_cb(_rows(), **bearer).content for _ in range(2)] == [b"ok", b"ok"]
    assert body_work["decompress_body"] == 2 and body_work["parse_bulk"] == 2
    body_work.clear()
    for _ in range(3):
        assert _post_cb(_bomb(), **bearer).status_code == 429
    assert sum(body_work.values()) == 0, body_work


@pytest.mark.django_db
def test_a_throttled_gateway_key_inflates_and_parses_nothing(body_work, settings, redis_client):
    settings.BMS_THROTTLE_INGEST = "1/day"
    site = Site.objects.create(name="Home", slug="home")
    gateway = GatewayKey(site=site, name="emonpi")
    key = gateway.set_new_key()
    gateway.save()
    assert _post_cb(_rows(), HTTP_AUTHORIZATION=f"Bearer {key}").content == b"ok"
    body_work.clear()
    assert _post_cb(_bomb(), HTTP_AUTHORIZATION=f"Bearer {key}").status_code == 429
    assert sum(body_work.values()) == 0, body_work


@pytest.mark.django_db
def test_a_keyless_compressed_form_is_charged_before_it_is_inflated(
    body_work, settings, redis_client
):
    """Our earlier clients put the key inside the compressed form, so a cb body with no key
    outside must be inflated to find one: it is counted against the address first, and over
    that allowance nothing is inflated."""
    settings.BMS_THROTTLE_INGEST_FAILED = "2/day"
    _node, key = make_node()
    legacy = urlencode({"data": json.dumps([[int(time.time()) - 5, "emontx1", 1]]), "apikey": key})
    assert _post_cb(zlib.compress(legacy.encode())).content == b"ok"  # still read
    assert _post_cb(_bomb()).status_code == 401  # inflated: no key inside
    assert body_work["decompress_body"] == 2
    body_work.clear()
    for _ in range(3):
        assert _post_cb(_bomb()).status_code == 429
    assert sum(body_work.values()) == 0, body_work
    # a good key outside the body from the same address is still served
    assert _post_cb(_rows(), HTTP_AUTHORIZATION=f"Bearer {key}").content == b"ok"
