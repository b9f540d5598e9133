"""A post at the API's value bound goes through the real drain (issue #26, outside tester):
no Redis script may unpack a list as long as the post (Lua's stack holds about 8,000), and a
request that fails the same way again and again is moved aside rather than holding its node
and its shard's other nodes forever."""

from __future__ import annotations

import json

import pytest
import redis

from alarms.models import Alarm
from feeds.models import Feed
from feeds.store import service
from sensors.ingest import input_errors, set_aside
from sensors.ingest import stream as stream
from sensors.ingest.drain import LEASE_PER_VALUE_S, Drain, _values, drain_shard, lease_s
from sensors.models import Sensor
from tests.sensors.conftest import make_node
from tests.wsgi_client import WsgiClient as Client

T0 = 1_700_000_000


@pytest.fixture
def client() -> Client:
    return Client()


def post_csv(client: Client, key: str, count: int) -> None:
    r = client.post("/input/post", {"csv": ",".join(["1"] * count), "apikey": key})
    assert r.status_code == 200 and r.content == b"ok", r.content


def test_one_post_at_the_value_bound_is_drained_and_so_is_another_nodes(
    db, redis_client, client, settings
):
    big, big_key = make_node("pz9", 21)
    # Another node of the same shard, posting after it.
    other, other_key = make_node("neighbour", 21 + stream.shards())
    post_csv(client, big_key, settings.BMS_INGEST_MAX_VALUES)
    post_csv(client, other_key, 3)

    report = drain_shard(stream.shard_of(big.pk))

    assert not report.stopped, report.stopped
    assert report.requests == 2 and report.dropped == 0
    assert redis_client.xlen(stream.stream_key(big.pk)) == 0
    assert redis_client.xlen(stream.stream_key(other.pk)) == 0


def test_a_request_failing_the_same_way_is_set_aside_and_recorded_and_the_node_goes_on(
    db, redis_client
):
    node, _ = make_node("stuck", 41)
    kwh = Feed.objects.create(name="kwh", tag="stuck", interval=10)
    Sensor.objects.create(
        node=node, key="p", kind="power", processes=[{"process": "power_to_kwh", "feed": kwh.pk}]
    )
    other, _ = make_node("neighbour", 41 + stream.shards())  # same shard
    # A real answer from Redis that no retry changes: the input's process state is not a hash.
    state = service.get_buffer().prefix + f"proc:{node.pk}:p"
    redis_client.set(state, "not a hash")
    stream.append(node.pk, [[T0, {"p": 100.0}]])
    stream.append(other.pk, [[T0, {"a": 1.0}]])
    shard = stream.shard_of(node.pk)

    for _attempt in range(set_aside.ATTEMPTS - 1):  # kept, as for an outage
        report = drain_shard(shard)
        assert report.stopped.startswith("transient: ResponseError") and report.requests == 0
        assert redis_client.xlen(stream.stream_key(node.pk)) == 1
    report = drain_shard(shard)

    assert not report.stopped and report.set_aside == 1 and report.requests == 2
    assert redis_client.xlen(stream.stream_key(node.pk)) == 0
    assert redis_client.xlen(stream.stream_key(other.pk)) == 0  # the other node went on
    ((_id, kept),) = redis_client.xrange(set_aside.ASIDE_PREFIX + str(node.pk))
    assert json.loads(kept[b"r"]) == [[T0, {"p": 100.0}]]  # nothing lost: there to re-post
    shown = input_errors.summary(input_errors.node_subject(node.pk))
    assert "set aside" in shown["last"] and "WRONGTYPE" in shown["last"]
    alarm = input_errors.alarm_key(input_errors.node_subject(node.pk))
    assert Alarm.objects.open().filter(key=alarm).exists()
    # Mended, the node's next request is processed.
    redis_client.delete(state)
    stream.append(node.pk, [[T0 + 10, {"p": 100.0}]])
    report = drain_shard(shard)
    assert not report.stopped and report.requests == 1 and report.set_aside == 0


def test_an_outage_is_never_counted_towards_setting_a_request_aside():
    from django.db import OperationalError

    assert not set_aside.repeatable(redis.ConnectionError("gone"))
    assert not set_aside.repeatable(redis.exceptions.OutOfMemoryError("OOM"))
    assert not set_aside.repeatable(OperationalError("server closed the connection"))
    assert set_aside.repeatable(redis.ResponseError("user_script:19: too many results"))


def test_a_chunk_of_many_values_is_leased_for_them_and_a_small_one_for_the_lease(
    db, redis_client, settings
):
    settings.BMS_INGEST_LEASE_S = 5.0
    node, _ = make_node("leased", 22)
    shard = stream.shard_of(node.pk)
    drain = Drain(shard)
    assert drain.acquire()
    big = [[T0, {f"v{i}": 1.0 for i in range(settings.BMS_INGEST_MAX_VALUES)}]]
    assert _values(big) == settings.BMS_INGEST_MAX_VALUES and _values([[T0, [1, 2, 3]]]) == 3
    drain.renew(lease_s() + _values(big) * LEASE_PER_VALUE_S)
    assert redis_client.pttl(stream.lease_key(shard)) > 50_000  # 5 s + 50,000 x 1 ms
    drain.renew(1.0)  # never shorter than the lease
    assert 4_000 < redis_client.pttl(stream.lease_key(shard)) <= 5_000
    drain.release()
