"""Gateway keys: one site-level key posts for every node of its site (emonhub sends all the
radio nodes it hears in one request), registers unknown nodes within the site's bound, and
is created and rotated by engineers only, shown once, stored hashed."""

from __future__ import annotations

import json
import time
import zlib

import pytest

from sensors import keys
from sensors.ingest import input_errors
from sensors.models import GatewayKey, Node, Sensor, Site
from tests.sensors.conftest import queued_batches
from tests.wsgi_client import WsgiClient as Client

pytestmark = pytest.mark.django_db


@pytest.fixture
def site_gateway(db):
    site = Site.objects.create(name="Home", slug="home")
    gateway = GatewayKey(site=site, name="emonpi")
    key = gateway.set_new_key()
    gateway.save()
    return site, gateway, key


def node_in(site, name, node_id=None):
    node = Node(name=name, node_id=node_id, site=site)
    node.set_new_key()
    node.save()
    return node


def post_cb(rows, key, t_ref):
    return Client().generic(
        "POST", f"/input/bulk.json?sentat={t_ref}&cb=1",
        zlib.compress(json.dumps(rows).encode()), HTTP_AUTHORIZATION=f"Bearer {key}",
    )  # fmt: skip


def test_gateway_key_posts_every_node_of_its_site_one_batch_per_node(site_gateway, redis_client):
    site, _, key = site_gateway
    emonpi = node_in(site, "emonpi", 5)
    emonth = node_in(site, "emonth", 19)
    now = int(time.time())
    rows = [[now, "emonpi", {"power1": 350}], [now, 19, 20.5, 18.7], [now + 1, 5, 1, 2]]
    r = post_cb(rows, key, now + 1)
    assert r.content == b"ok"
    batches = {node_pk: rows for node_pk, rows in queued_batches(redis_client)}
    assert set(batches) == {emonpi.pk, emonth.pk}
    assert [v for _, v in batches[emonpi.pk]] == [{"power1": 350.0}, {"1": 1.0, "2": 2.0}]
    assert [v for _, v in batches[emonth.pk]] == [{"1": 20.5, "2": 18.7}]


def test_unknown_node_is_registered_in_the_gateways_site(site_gateway, redis_client):
    site, _, key = site_gateway
    now = int(time.time())
    r = post_cb([[now, 7, 1000, -32536], [now, "boiler room.1", {"température": 61.5}]], key, now)
    assert r.content == b"ok"
    seven = Node.objects.get(name="7")
    named = Node.objects.get(name="boiler room.1")
    assert seven.site == site and seven.node_id == 7 and named.site == site
    assert not seven.key_hash  # no key of its own: only the gateway writes it
    assert {pk for pk, _ in queued_batches(redis_client)} == {seven.pk, named.pk}


def test_another_sites_node_of_the_same_radio_id_is_never_written(site_gateway, redis_client):
    """Radio ids are per site (issue #26 item 5): radio id 8 from this gateway is this site's
    node 8 (registered now), never the other site's node 8."""
    site, gateway, key = site_gateway
    other = Site.objects.create(name="Other", slug="other")
    theirs = node_in(other, "neighbour", 8)
    ours = node_in(site, "emonpi", 5)
    now = int(time.time())
    r = post_cb([[now, 8, 1], [now, 5, 2]], key, now)
    assert r.content == b"ok"
    eight = Node.objects.get(site=site, node_id=8)
    assert sorted(pk for pk, _ in queued_batches(redis_client)) == sorted([ours.pk, eight.pk])
    assert theirs.pk not in {pk for pk, _ in queued_batches(redis_client)}


def test_new_nodes_stop_at_the_sites_auto_input_bound(site_gateway, redis_client, settings):
    site, gateway, key = site_gateway
    settings.BMS_INGEST_MAX_AUTO_INPUTS_PER_SITE = 2
    holder = node_in(site, "full")
    for k in ("a", "b"):
        Sensor.objects.create(node=holder, key=k, auto_created=True)
    now = int(time.time())
    r = post_cb([[now, 30, 1], [now, 31, 2]], key, now)
    assert r.content == b"ok"  # emonhub must not resend it forever
    assert not Node.objects.filter(name__in=["30", "31"]).exists()
    assert queued_batches(redis_client) == []
    record = input_errors.summary(input_errors.gateway_subject(gateway.pk))
    assert record["count"] == "2" and "automatically created inputs" in record["last"]


def test_node_key_still_writes_only_its_own_node(site_gateway, redis_client):
    site, _, _ = site_gateway
    mine = Node(name="emonpi", node_id=5, site=site)
    key = mine.set_new_key()
    mine.save()
    node_in(site, "emonth", 19)
    now = int(time.time())
    r = post_cb([[now, 5, 1], [now, 19, 2]], key, now)
    assert r.status_code == 403 and r.json()["field"] == "node"
    assert queued_batches(redis_client) == []


def test_gateway_key_refused_on_our_rest_api_and_when_disabled(site_gateway, redis_client):
    _, gateway, key = site_gateway
    r = Client().post(
        "/api/v1/readings", json.dumps({"node": "x", "values": {"a": 1}}),
        content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {key}",
    )  # fmt: skip
    assert r.status_code == 403 and r.json()["field"] == "apikey"
    gateway.enabled = False
    gateway.save()
    from sensors import cache

    cache.clear_all()
    r = post_cb([[int(time.time()), 5, 1]], key, int(time.time()))
    assert r.status_code == 401
    assert queued_batches(redis_client) == []


def _admin(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_engineer_creates_a_gateway_key_shown_once_stored_hashed(engineer, site_gateway):
    site, _, _ = site_gateway
    r = _admin(engineer).post(
        "/admin/sensors/gatewaykey/add/", {"site": site.pk, "name": "hub2", "enabled": "on"},
        follow=True,
    )  # fmt: skip
    shown = [str(m) for m in r.context["messages"]]
    key = next(m.split(": ")[1].split(" ")[0] for m in shown if "hub2" in m)
    gateway = GatewayKey.objects.get(name="hub2")
    assert len(key) == keys.KEY_LENGTH and gateway.key_hash == keys.hash_key(key)
    assert key not in json.dumps(list(GatewayKey.objects.values()), default=str)


def test_rotate_gateway_key_engineer_allowed_viewer_refused(engineer, viewer, site_gateway):
    _, gateway, old = site_gateway
    action = {"action": "rotate_gateway_key", "_selected_action": [gateway.pk]}
    _admin(viewer).post("/admin/sensors/gatewaykey/", action, follow=True)
    gateway.refresh_from_db()
    assert gateway.check_key(old), "a viewer rotated a gateway key"
    _admin(engineer).post("/admin/sensors/gatewaykey/", action, follow=True)
    gateway.refresh_from_db()
    assert not gateway.check_key(old)


@pytest.mark.django_db
def test_a_key_issued_by_another_process_is_accepted_at_once(redis_client, site_gateway):
    """An outside run: for up to 0.6 s after a rotation in one gunicorn worker, the others
    refused the new key (their set of key prefixes was read before it)."""
    from core.redis import get_redis
    from sensors import cache
    from sensors.ingest import node_auth

    site, _gateway, _key = site_gateway
    node = Node(name="emontx9", node_id=29, site=site)
    node.set_new_key()
    node.save()
    assert not node_auth.plausible("x" * keys.KEY_LENGTH)  # this process's prefix set is warm
    # Another process rotates the key: the row changes and the generation moves, but nothing
    # clears this process's caches (update() sends no signal).
    new_key = keys.generate_key()
    Node.objects.filter(pk=node.pk).update(
        key_prefix=keys.key_prefix(new_key), key_hash=keys.hash_key(new_key)
    )
    get_redis().set(cache.GENERATION_KEY, "changed by another process")
    identity = node_auth.authenticate(new_key) if node_auth.plausible(new_key) else None
    assert identity is not None and identity.id == node.pk
