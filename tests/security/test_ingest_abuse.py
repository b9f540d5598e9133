"""Ingest holes from the red-team findings, on the real Redis and database:
who a throttle charges, what a wrong key or node name tells a caller, bounded key caches,
and deeply nested JSON."""

from __future__ import annotations

import json
import secrets
from types import SimpleNamespace
from urllib.parse import urlencode

import pytest

from core import throttle
from feeds.models import Feed
from sensors import cache
from sensors.ingest import node_auth
from tests.wsgi_client import WsgiClient as Client

FIXED_NOW = 1_800_000_000.0  # a window start: no minute boundary can fall inside a test
DEEP = "[" * 100_000


@pytest.fixture
def fixed_clock(monkeypatch):
    """The throttle's clock held still, so a per-minute limit is tested at its bound without a
    window ending mid-test (the counters are still real Redis keys)."""
    monkeypatch.setattr(throttle, "time", SimpleNamespace(time=lambda: FIXED_NOW))


def random_key() -> str:
    return secrets.token_hex(16)


def reading(client: Client, key: str, ip: str = "127.0.0.1", body=None):
    return client.post(
        "/api/v1/readings",
        json.dumps(body or {"values": {"power": 1}}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {key}",
        REMOTE_ADDR=ip,
    )


def assert_429(response) -> None:
    assert response.status_code == 429, response.content
    assert int(response["Retry-After"]) >= 1
    assert response.json()["success"] is False
    assert "too many" in response.json()["error"]


# --- who is charged ---------------------------------------------------------------------------


def test_random_keys_from_one_address_are_throttled_at_the_default(nodes, fixed_clock, settings):
    """Old: counted per unverified key prefix, so a new random key per request was never
    throttled. Now every failed key counts against the address: 120 a minute by default."""
    rate = throttle.parse_rate(settings.BMS_THROTTLE_INGEST_FAILED)
    client = Client()
    statuses = [reading(client, random_key()).status_code for _ in range(rate.count)]
    assert statuses == [401] * rate.count
    assert_429(reading(client, random_key()))
    assert reading(client, random_key(), ip="10.0.0.2").status_code == 401  # its own count


def test_one_node_is_held_to_the_default_per_node_rate(nodes, fixed_clock, settings):
    """Old default 60,000/min never applied. Now 600/min per node: the 601st post is a 429."""
    alpha, beta = nodes
    rate = throttle.parse_rate(settings.BMS_THROTTLE_INGEST)
    assert rate == throttle.Rate(600, 60)
    client = Client()
    assert {reading(client, alpha).status_code for _ in range(rate.count)} == {202}
    assert_429(reading(client, alpha))
    assert_429(client.post("/input/post", {"json": "a:1", "apikey": alpha}))
    assert reading(client, beta).status_code == 202  # another node keeps its allowance


def test_knowing_a_nodes_key_prefix_does_not_spend_its_allowance(nodes, settings):
    """Old: the count was keyed by the 8-character prefix (visible in the admin), so anyone
    could make the real node get 429. Now a node is charged only once its whole key matched."""
    settings.BMS_THROTTLE_INGEST = "3/day"
    alpha, _ = nodes
    client = Client()
    forged = [alpha[:8] + random_key()[8:] for _ in range(10)]
    assert {reading(client, k, ip="198.51.100.66").status_code for k in forged} == {401}
    assert [reading(client, alpha).status_code for _ in range(3)] == [202, 202, 202]
    assert_429(reading(client, alpha))


def test_an_address_over_its_failed_keys_still_gets_its_good_keys_through(nodes, settings):
    """Both sides: over its allowance an address gets 429 for wrong keys, yet a real node behind
    the same NAT as a misconfigured device keeps posting, its key cached or not."""
    settings.BMS_THROTTLE_INGEST_FAILED = "2/day"
    alpha, beta = nodes
    client = Client()
    assert reading(client, alpha).status_code == 202  # now cached by this process
    assert [reading(client, random_key()).status_code for _ in range(2)] == [401, 401]
    assert_429(reading(client, random_key()))
    assert_429(reading(client, alpha[:8] + random_key()[8:]))  # a forged prefix is wrong too
    assert_429(client.post("/input/post", {"json": "a:1"}))  # and no key at all
    assert reading(client, alpha).status_code == 202
    assert reading(client, beta).status_code == 202  # not yet seen by this process


def test_random_keys_cost_no_database_query(nodes, settings, django_assert_num_queries):
    """A key whose prefix no node has is refused from memory (the prefixes are cached)."""
    settings.BMS_THROTTLE_INGEST_FAILED = "3/day"
    client = Client()
    assert reading(client, random_key()).status_code == 401  # loads the prefixes once
    with django_assert_num_queries(0):
        assert [reading(client, random_key()).status_code for _ in range(2)] == [401, 401]
        for _ in range(5):
            assert_429(reading(client, random_key()))


def test_bad_requests_before_the_key_count_against_the_address(nodes, settings):
    """A body refused before its key is read (bad zlib with cb=1) is counted too."""
    settings.BMS_THROTTLE_INGEST_FAILED = "2/day"
    client = Client()

    def junk():
        return client.post("/input/bulk?cb=1", b"not zlib", content_type="text/plain")

    assert [junk().status_code for _ in range(2)] == [400, 400]
    assert_429(junk())


def test_drf_anonymous_throttle_ignores_a_clients_own_forwarded_for(
    db, redis_client, monkeypatch, settings
):
    """BMS_TRUSTED_PROXIES=0: DRF's NUM_PROXIES=None counted by the client's X-Forwarded-For,
    so a random value per request was never throttled. Now the socket address counts."""
    monkeypatch.setattr(throttle.AnonRateThrottle, "THROTTLE_RATES", {"anon": "2/minute"})
    settings.BMS_TRUSTED_PROXIES = 0
    client = Client()

    def get():
        return client.get(
            "/api/schema/", HTTP_X_FORWARDED_FOR=f"203.0.113.{secrets.randbelow(250)}"
        )

    assert [get().status_code for _ in range(2)] == [200, 200]
    assert get().status_code == 429


def test_drf_anonymous_throttle_behind_one_proxy_uses_the_entry_it_appended(
    db, redis_client, monkeypatch, settings
):
    monkeypatch.setattr(throttle.AnonRateThrottle, "THROTTLE_RATES", {"anon": "2/minute"})
    settings.BMS_TRUSTED_PROXIES = 1
    client = Client()

    def get(client_ip: str):
        spoof = f"10.{secrets.randbelow(250)}.0.1"  # whatever the client put in front
        return client.get("/api/schema/", HTTP_X_FORWARDED_FOR=f"{spoof}, {client_ip}")

    assert [get("198.51.100.7").status_code for _ in range(2)] == [200, 200]
    assert get("198.51.100.7").status_code == 429
    assert get("198.51.100.8").status_code == 200  # a different client behind the proxy


def test_client_ip_takes_the_nth_entry_from_the_right(rf, settings):
    request = rf.get("/", HTTP_X_FORWARDED_FOR="1.1.1.1, 2.2.2.2, 3.3.3.3", REMOTE_ADDR="9.9.9.9")
    settings.BMS_TRUSTED_PROXIES = 0
    assert throttle.client_ip(request) == "9.9.9.9"
    settings.BMS_TRUSTED_PROXIES = 1
    assert throttle.client_ip(request) == "3.3.3.3"
    settings.BMS_TRUSTED_PROXIES = 2
    assert throttle.client_ip(request) == "2.2.2.2"
    settings.BMS_TRUSTED_PROXIES = 5  # more proxies than entries: the leftmost one
    assert throttle.client_ip(request) == "1.1.1.1"


# --- what a refusal tells ---------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/api/v1/readings", "/input/post"])
def test_another_node_and_no_node_get_the_same_answer(nodes, path):
    """Old: 404 "unknown node" for a name that does not exist, 403 naming the owner for one
    that does: a key told its holder which node names exist."""
    alpha, _ = nodes
    client = Client()

    def post(node: str):
        if path == "/input/post":
            return client.post(path, {"node": node, "json": "a:1", "apikey": alpha})
        return reading(client, alpha, body={"node": node, "values": {"a": 1}})

    exists, missing = post("beta"), post("gammaa")
    assert exists.status_code == missing.status_code == 403
    assert exists.json() == json.loads(missing.content.decode().replace("gammaa", "beta"))


# --- bounded key caches -----------------------------------------------------------------------


@pytest.fixture
def steady_generation(redis_client, monkeypatch):
    """Read the config generation now and not again during the test: a change made by an
    earlier test would otherwise empty every cache at the next check (sensors/cache.py)."""
    cache.check_generation()
    monkeypatch.setattr(cache, "GENERATION_CHECK_S", 3600.0)


def test_process_cache_drops_the_least_recently_used_at_its_bound(steady_generation):
    bounded = cache.ProcessCache(max_entries=3)
    for k in "abc":
        bounded.set(k, k.upper())
    assert bounded.get("a") == "A"  # a is now the most recently used
    bounded.set("d", "D")
    assert len(bounded) == 3
    assert bounded.get("b") is None and [bounded.get(k) for k in "acd"] == ["A", "C", "D"]


def test_process_cache_drops_expired_entries_when_read(steady_generation):
    short = cache.ProcessCache(ttl_s=-1.0)  # every entry is already expired
    short.set("x", 1)
    assert short.get("x", "gone") == "gone" and len(short) == 0


def test_random_keys_do_not_grow_the_key_cache_or_push_out_good_keys(
    nodes, steady_generation, django_assert_num_queries
):
    """Old: every wrong key stayed in the process's dict until the next config change. Now a
    process keeps one table of the enabled keys: a flood of made-up keys adds nothing to it
    and costs no database query."""
    alpha, beta = nodes
    assert node_auth.authenticate(alpha) is not None
    with django_assert_num_queries(0):
        for _ in range(1500):
            assert node_auth.authenticate(random_key()) is None
    table = node_auth._key_table()
    assert len(table.by_hash) == 2  # alpha's and beta's, nothing of the flood
    assert node_auth.known(alpha) is not None and node_auth.known(beta) is not None


# --- deeply nested JSON -----------------------------------------------------------------------


def test_deeply_nested_readings_body_is_a_400(nodes):
    alpha, _ = nodes
    response = Client().post(
        "/api/v1/readings", DEEP, content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {alpha}",
    )  # fmt: skip
    assert response.status_code == 400 and response.json()["field"] == "body"
    assert "nested too deeply" in response.json()["error"]
    assert "recursion" not in response.content.decode()  # not the parser's own words


@pytest.mark.parametrize(("path", "field"), [("/input/post", "fulljson"), ("/input/bulk", "data")])
def test_deeply_nested_emoncms_parameters_are_a_400(nodes, path, field):
    alpha, _ = nodes
    form = urlencode({field: DEEP, "apikey": alpha})
    response = Client().post(path, form, content_type="application/x-www-form-urlencoded")
    assert response.status_code == 400 and response.json()["field"] == field
    assert "recursion" not in response.content.decode()


def test_public_feed_is_untouched_by_ingest_throttles(db, redis_client, settings):
    """The ingest counters are their own: a blocked ingest address still reads public feeds."""
    settings.BMS_THROTTLE_INGEST_FAILED = "1/day"
    Feed.objects.create(name="pv", tag="demo", interval=10, public=True)
    client = Client()
    reading(client, random_key())
    assert_429(reading(client, random_key()))
    assert client.get("/feed/list.json").status_code == 200
