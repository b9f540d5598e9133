"""Node names and radio ids are unique per site, not across the installation (issue #26 item
5): two buildings each with an emonTx on radio id 10 both post here, emonhub with
`sendnames = 0` reaching each site's own node 10 through that site's gateway key."""

from __future__ import annotations

import json
import time
import zlib

import pytest
from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor

from sensors.ingest import node_auth
from sensors.models import GatewayKey, Node, Site
from tests.sensors.conftest import queued_batches
from tests.wsgi_client import WsgiClient as Client

pytestmark = pytest.mark.django_db


def site_with_gateway(slug: str) -> tuple[Site, str]:
    site = Site.objects.create(name=slug.title(), slug=slug)
    gateway = GatewayKey(site=site, name="emonpi")
    key = gateway.set_new_key()
    gateway.save()
    return site, key


def node_in(site: Site | None, name: str, node_id: int | None = None) -> Node:
    node = Node(name=name, node_id=node_id, site=site)
    node.set_new_key()
    node.full_clean()
    node.save()
    return node


def bulk(rows: list, key: str, now: int) -> bytes:
    """What emonhub's HTTP interfacer sends with `sendnames = 0`: radio ids, not names."""
    return Client().generic(
        "POST", f"/input/bulk.json?sentat={now}&cb=1", zlib.compress(json.dumps(rows).encode()),
        HTTP_AUTHORIZATION=f"Bearer {key}",
    ).content  # fmt: skip


def test_two_sites_may_each_have_a_node_10_of_the_same_name():
    home, _ = site_with_gateway("home")
    barn, _ = site_with_gateway("barn")
    node_in(home, "emontx", 10)
    node_in(barn, "emontx", 10)
    assert Node.objects.filter(name="emontx", node_id=10).count() == 2


def test_one_site_still_may_not_have_two_of_a_name_or_a_radio_id():
    home, _ = site_with_gateway("home")
    node_in(home, "emontx", 10)
    with pytest.raises(ValidationError, match="already has a node of this name"):
        node_in(home, "emontx", 11)
    with pytest.raises(ValidationError, match="radio id"):
        node_in(home, "emontx2", 10)
    with transaction.atomic(), pytest.raises(IntegrityError):
        Node.objects.create(name="other", node_id=10, site=home, key_prefix="x", key_hash="y")


def test_nodes_of_no_site_stay_unique_among_themselves():
    node_in(None, "loose", 3)
    with pytest.raises(ValidationError):
        node_in(None, "loose", 4)
    with pytest.raises(ValidationError):
        node_in(None, "loose2", 3)


def test_sendnames_0_radio_id_10_reaches_each_sites_own_node(redis_client):
    home, home_key = site_with_gateway("home")
    barn, barn_key = site_with_gateway("barn")
    home_10 = node_in(home, "house emontx", 10)
    barn_10 = node_in(barn, "barn emontx", 10)
    now = int(time.time())
    assert bulk([[now, 10, 350, 20]], home_key, now) == b"ok"
    assert bulk([[now, 10, 1200, 5]], barn_key, now) == b"ok"
    batches = dict(queued_batches(redis_client))
    assert set(batches) == {home_10.pk, barn_10.pk}
    assert [v for _, v in batches[home_10.pk]] == [{"1": 350.0, "2": 20.0}]
    assert [v for _, v in batches[barn_10.pk]] == [{"1": 1200.0, "2": 5.0}]


def test_a_gateway_registers_its_own_node_10_when_another_site_has_one(redis_client):
    home, home_key = site_with_gateway("home")
    barn, _ = site_with_gateway("barn")
    theirs = node_in(barn, "10", 10)
    now = int(time.time())
    assert bulk([[now, 10, 7]], home_key, now) == b"ok"
    ours = Node.objects.get(site=home, node_id=10)
    assert (ours.name, ours.auto_created) == ("10", True)
    assert [pk for pk, _ in queued_batches(redis_client)] == [ours.pk]
    theirs.refresh_from_db()
    assert theirs.site == barn  # untouched


def test_a_lookup_without_a_site_never_guesses_between_two_sites():
    """MQTT topics carry no key and no site: a ref two sites answer to names no node."""
    home, _ = site_with_gateway("home")
    barn, _ = site_with_gateway("barn")
    node_in(home, "emonth", 19)
    node_in(barn, "emonth", 19)
    only = node_in(barn, "shed", 20)
    assert node_auth.lookup_ref(19) is None
    assert node_auth.lookup_ref("emonth") is None
    assert node_auth.lookup_ref(20).id == only.pk
    assert node_auth.lookup_ref(19, home.pk).site_id == home.pk
    assert node_auth.lookup_ref(19, barn.pk).site_id == barn.pk


BEFORE = [("sensors", "0010_node_auto_created_registered_by")]
AFTER = [("sensors", "0011_node_names_unique_per_site")]


@pytest.mark.django_db(transaction=True)
def test_the_migration_keeps_every_existing_node_as_it_was():
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    old = executor.loader.project_state(BEFORE).apps
    OldSite, OldNode = old.get_model("sensors", "Site"), old.get_model("sensors", "Node")
    home = OldSite.objects.create(name="Home", slug="home")
    rows = [
        ("emontx", 10, home),
        ("emonth", 19, home),
        ("loose", 3, None),
        ("nameless", None, home),
    ]
    for name, radio, site in rows:
        OldNode.objects.create(name=name, node_id=radio, site=site, key_prefix="x", key_hash="y")
    try:
        executor = MigrationExecutor(connection)
        executor.migrate(AFTER)
        new = executor.loader.project_state(AFTER).apps
        NewNode, NewSite = new.get_model("sensors", "Node"), new.get_model("sensors", "Site")
        kept = set(NewNode.objects.values_list("name", "node_id", "site__slug"))
        assert kept == {("emontx", 10, "home"), ("emonth", 19, "home"), ("loose", 3, None),
                        ("nameless", None, "home")}  # fmt: skip
        barn = NewSite.objects.create(name="Barn", slug="barn")
        NewNode.objects.create(name="emontx", node_id=10, site=barn, key_prefix="x", key_hash="y")
    finally:
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(executor.loader.graph.leaf_nodes())


def test_the_api_answers_a_clash_within_a_site_with_400_and_allows_it_across_sites(
    engineer_api, viewer_api
):
    home, _ = site_with_gateway("home")
    barn, _ = site_with_gateway("barn")
    node_in(home, "emontx", 10)
    same_site = engineer_api.post(
        "/api/v1/nodes/", {"name": "emontx", "node_id": 11, "site": home.pk}, format="json"
    )
    assert same_site.status_code == 400, same_site.content
    assert "name" in same_site.content.decode()
    radio = engineer_api.post(
        "/api/v1/nodes/", {"name": "other", "node_id": 10, "site": home.pk}, format="json"
    )
    assert radio.status_code == 400 and "radio id" in radio.content.decode(), radio.content
    other_site = engineer_api.post(
        "/api/v1/nodes/", {"name": "emontx", "node_id": 10, "site": barn.pk}, format="json"
    )
    assert other_site.status_code == 201, other_site.content
    refused = viewer_api.post(
        "/api/v1/nodes/", {"name": "viewer's", "node_id": 12, "site": barn.pk}, format="json"
    )
    assert refused.status_code == 403
    assert Node.objects.filter(name="emontx").count() == 2


def test_the_api_answers_a_clash_among_nodes_of_no_site_with_400_not_500(engineer_api):
    # The schema fuzz test found it: the constraint for nodes of no site is conditional, which
    # DRF's validators do not see, so the second node reached the database's IntegrityError.
    first = engineer_api.post("/api/v1/nodes/", {"name": "0", "interval": 1}, format="multipart")
    assert first.status_code == 201, first.content
    again = engineer_api.post("/api/v1/nodes/", {"name": "0", "interval": 1}, format="multipart")
    assert again.status_code == 400, again.content
    assert "already has this name" in again.json()["error"]
    radio = engineer_api.post("/api/v1/nodes/", {"name": "a", "node_id": 7}, format="json")
    assert radio.status_code == 201, radio.content
    radio_again = engineer_api.post("/api/v1/nodes/", {"name": "b", "node_id": 7}, format="json")
    assert radio_again.status_code == 400 and "radio id" in radio_again.json()["error"]
    assert Node.objects.filter(site=None).count() == 2
