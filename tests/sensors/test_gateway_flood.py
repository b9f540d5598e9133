"""A gateway key flooding made-up node names (issue #25, item 1).

The red team's two bulk requests of 2,500 new names registered 4,052 nodes and opened 7,106
alarms: the room was counted per name before any node of the request existed, and each
unknown name cost a query. Now a request naming more new nodes than
BMS_INGEST_MAX_NEW_NODES_PER_REQUEST registers none of them, the site keeps at most
BMS_INGEST_MAX_AUTO_NODES_PER_SITE, counted under the site's lock (so concurrent requests
cannot pass it), and a refused name is answered from Redis with no query.
"""

from __future__ import annotations

import json
import threading
import time
import zlib

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from alarms.models import Alarm
from sensors import cache
from sensors.ingest import input_errors, registration
from sensors.ingest.processing import ingest_rows
from sensors.models import GatewayKey, Node, Sensor, Site
from sensors.tasks import check_silent_nodes
from tests.sensors.conftest import queued_batches
from tests.wsgi_client import WsgiClient as Client

FLOOD = 2500  # rows of one request: the row bound, each naming a new node


def make_site_gateway() -> tuple[Site, GatewayKey, str]:
    site = Site.objects.create(name="Home", slug="home")
    gateway = GatewayKey(site=site, name="emonpi")
    key = gateway.set_new_key()
    gateway.save()
    return site, gateway, key


@pytest.fixture
def site_gateway(db):
    return make_site_gateway()


def post_cb(rows: list, key: str, t_ref: int):
    return Client().generic(
        "POST", f"/input/bulk.json?sentat={t_ref}&cb=1",
        zlib.compress(json.dumps(rows).encode()), HTTP_AUTHORIZATION=f"Bearer {key}",
    )  # fmt: skip


def flood_rows(prefix: str, n: int = FLOOD) -> list:
    now = int(time.time())
    return [[now, f"{prefix}{i:04d}", 1] for i in range(n)]


def registered(site: Site) -> int:
    return Node.objects.filter(site=site, auto_created=True).count()


@pytest.mark.django_db
def test_the_red_team_flood_registers_no_node_and_opens_one_alarm(
    site_gateway, redis_client, settings
):
    site, gateway, key = site_gateway
    settings.BMS_ALARM_STARTUP_GRACE = 0
    known = Node.objects.create(name="emonth", node_id=19, site=site)
    now = int(time.time())
    for prefix in ("flood-a-", "flood-b-"):
        rows = flood_rows(prefix)[: FLOOD - 1] + [[now, 19, 20.5]]
        r = post_cb(rows, key, now)
        assert r.status_code == 200 and r.content == b"ok"  # emonhub must not resend forever
    assert registered(site) == 0
    assert Node.objects.count() == 1
    # The known node's reading of each request is queued: the flood did not cost it anything.
    assert [pk for pk, _ in queued_batches(redis_client)] == [known.pk, known.pk]
    record = input_errors.summary(input_errors.gateway_subject(gateway.pk))
    assert record["count"] == str(2 * (FLOOD - 1))
    assert "more than 32 new nodes in one request" in record["last"]
    check_silent_nodes()
    open_alarms = list(Alarm.objects.open().values_list("key", flat=True))
    assert open_alarms == [f"gateway-input-errors:{gateway.pk}"]


@pytest.mark.django_db
def test_new_nodes_stop_at_the_site_bound_and_a_big_request_registers_none(
    site_gateway, redis_client, settings
):
    site, gateway, key = site_gateway
    settings.BMS_INGEST_MAX_AUTO_NODES_PER_SITE = 5
    settings.BMS_INGEST_MAX_NEW_NODES_PER_REQUEST = 4
    now = int(time.time())
    assert post_cb([[now, f"n{i}", 1] for i in range(5)], key, now).content == b"ok"
    assert registered(site) == 0  # five new names in one request: more than 4, none made
    assert post_cb([[now, f"a{i}", 1] for i in range(4)], key, now).content == b"ok"
    assert registered(site) == 4
    assert post_cb([[now, f"b{i}", 1] for i in range(3)], key, now).content == b"ok"
    assert registered(site) == 5  # exactly the bound: b0 fitted, b1 and b2 did not
    assert Node.objects.get(name="b0").registered_by == gateway
    record = input_errors.summary(input_errors.gateway_subject(gateway.pk))
    assert "BMS_INGEST_MAX_AUTO_NODES_PER_SITE, 5" in record["last"]
    # The nodes that were registered keep posting; engineers' own nodes do not count.
    Node.objects.create(name="by-hand", site=site)
    assert registered(site) == 5
    queued_before = len(queued_batches(redis_client))
    assert post_cb([[now, "a0", 2], [now, "b0", 3]], key, now).content == b"ok"
    assert len(queued_batches(redis_client)) == queued_before + 2


@pytest.mark.django_db
def test_a_refused_name_costs_no_query_the_second_time(site_gateway, redis_client):
    _, _, key = site_gateway
    rows = flood_rows("flood-")
    now = int(time.time())
    with CaptureQueriesContext(connection) as first:
        assert post_cb(rows, key, now).content == b"ok"
    # The key, the site's own node names (sensors/ingest/name_screen.py) and the alarm: never
    # the 2,500 names (the old code: a COUNT per name, 2,500+; then one lookup of them all).
    assert not any("flood-2001" in q["sql"] for q in first.captured_queries)
    assert len(first.captured_queries) <= 10
    with CaptureQueriesContext(connection) as again:
        assert post_cb(rows, key, now).content == b"ok"
    assert again.captured_queries == []
    # Another web process (its caches empty) reads its key and the site's names, never the
    # flood's.
    cache.clear_all()
    with CaptureQueriesContext(connection) as other_process:
        assert post_cb(rows, key, now).content == b"ok"
    assert not any("flood-2001" in q["sql"] for q in other_process.captured_queries)
    assert len(other_process.captured_queries) <= 5  # key prefixes and key 2 + 2, site names 1


@pytest.mark.django_db
def test_a_flood_is_refused_before_its_rows_are_read_and_leaves_nothing_per_name(
    site_gateway, redis_client
):
    site, gateway, key = site_gateway
    known = Node.objects.create(name="emonth", node_id=19, site=site)
    now = int(time.time())
    # Every flood value is text that is not a number: read, each would be a skip of its own.
    rows = [[now, f"flood-{i:04d}", "x"] for i in range(FLOOD - 2)]
    rows += [[now, 19, 20.5], [now, "emonth", 21.0]]  # a known node, by radio id and by name
    keys_before = set(redis_client.keys("*"))
    assert post_cb(rows, key, now).content == b"ok"
    assert [pk for pk, _ in queued_batches(redis_client)] == [known.pk]
    record = input_errors.summary(input_errors.gateway_subject(gateway.pk))
    assert record["count"] == str(FLOOD - 2)  # one per row left out
    assert f"{FLOOD - 2} row(s) name {FLOOD - 2} new nodes" in record["last"]
    assert "not a number" not in record["last"]  # no row of the flood was parsed
    # Nothing per name in Redis: the refused-names set is not written, no key grew per name.
    assert redis_client.exists(registration.refused_key(site.pk)) == 0
    assert len(set(redis_client.keys("*")) - keys_before) < 20


@pytest.mark.django_db
def test_the_refused_names_are_bounded_and_forgotten_when_a_node_is_saved(
    site_gateway, redis_client, settings, django_capture_on_commit_callbacks
):
    site, gateway, key = site_gateway
    settings.BMS_INGEST_REFUSED_NAMES = 1000
    # Registration's own per-name refusals (the site bound): a request within the per-request
    # bound reaches them; a bigger one is screened before (the test above).
    settings.BMS_INGEST_MAX_NEW_NODES_PER_REQUEST = FLOOD
    now = int(time.time())
    assert post_cb(flood_rows("x-"), key, now).content == b"ok"
    assert redis_client.zcard(registration.refused_key(site.pk)) == 1000  # its cap
    assert redis_client.ttl(registration.refused_key(site.pk)) > 0
    # An engineer adds a node by a name that was refused: found at once, not after the TTL.
    with django_capture_on_commit_callbacks(execute=True):
        Node.objects.create(name="x-2499", site=site)
    assert redis_client.exists(registration.refused_key(site.pk)) == 0
    cache.clear_all()
    before = len(queued_batches(redis_client))  # the 64 the site bound let register
    assert post_cb([[now, "x-2499", 7]], key, now).content == b"ok"
    assert len(queued_batches(redis_client)) == before + 1


@pytest.mark.django_db(transaction=True)
def test_concurrent_requests_cannot_pass_the_site_bound(redis_client, settings):
    """Eight requests at once, four new names each, against a bound of 10: exactly 10."""
    site, _, key = make_site_gateway()
    settings.BMS_INGEST_MAX_AUTO_NODES_PER_SITE = 10
    settings.BMS_INGEST_MAX_NEW_NODES_PER_REQUEST = 4
    threads_n = 8
    start = threading.Barrier(threads_n)
    answers: list[bytes] = []
    errors: list[BaseException] = []
    now = int(time.time())

    def request(t: int) -> None:
        try:
            start.wait()
            r = post_cb([[now, f"t{t}-{i}", 1] for i in range(4)], key, now)
            answers.append(r.content)
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=request, args=(t,)) for t in range(threads_n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
    assert errors == [] and answers == [b"ok"] * threads_n
    assert registered(site) == 10


@pytest.mark.django_db(transaction=True)
def test_concurrent_workers_create_exactly_the_site_input_bound(redis_client, settings):
    """Four nodes of one site creating inputs at once used to pass the site's bound (1,001 of
    1,000): each counted the site under its own node's lock."""
    settings.BMS_INGEST_MAX_AUTO_INPUTS_PER_SITE = 7
    site = Site.objects.create(name="Home", slug="home")
    nodes = [Node.objects.create(name=f"n{i}", site=site) for i in range(4)]
    start = threading.Barrier(len(nodes))
    errors: list[BaseException] = []

    def worker(node: Node) -> None:
        try:
            start.wait()
            ingest_rows(node.pk, [[1_700_000_000, {f"k{j}": 1.0 for j in range(3)}]])
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(n,)) for n in nodes]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
    assert errors == []
    assert Sensor.objects.filter(node__site=site, auto_created=True).count() == 7
    # The readings beyond it are counted on the site's one alarm, not one alarm per node.
    (alarm,) = Alarm.objects.open()
    assert alarm.key == f"inputs-capped:{site.pk}" and alarm.occurrences == 4 * 3 - 7


@pytest.mark.django_db
def test_silent_gateway_nodes_are_one_alarm_that_counts_them(site_gateway, redis_client, settings):
    site, gateway, _ = site_gateway
    settings.BMS_ALARM_STARTUP_GRACE = 0
    for i in range(40):
        Node.objects.create(
            name=f"radio{i}", site=site, interval=60, auto_created=True, registered_by=gateway
        )
    mine = Node.objects.create(name="boiler-tx", site=site, interval=60)
    later = time.time() + 3600
    check_silent_nodes(now=later)
    alarms = {a.key: a for a in Alarm.objects.open()}
    assert set(alarms) == {f"gateway-nodes-silent:{gateway.pk}", f"node-silent:{mine.pk}"}
    group = alarms[f"gateway-nodes-silent:{gateway.pk}"]
    assert (
        group.occurrences == 40 and "40 nodes registered by gateway key 'emonpi'" in group.message
    )
    # Some come back: the same alarm counts fewer; all back: cleared.
    redis_client.hset("sensors:seen", mapping={n.pk: int(later) for n in Node.objects.all()[:30]})
    check_silent_nodes(now=later + 1)
    group.refresh_from_db()
    assert group.is_open and 10 <= group.occurrences < 40
    redis_client.hset("sensors:seen", mapping={n.pk: int(later) for n in Node.objects.all()})
    check_silent_nodes(now=later + 2)
    assert not Alarm.objects.open().exists()
    assert Alarm.objects.filter(key__startswith="gateway-nodes-silent:").count() == 1
