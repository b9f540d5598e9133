"""A post at the API's value bound goes through the real drain (issue #26, outside tester):
no Redis script may unpack a list as long as the post (Lua's stack holds about 8,000), and a
request that fails the same way again and again is moved aside rather than holding its node
and its shard's other nodes forever."""

from __future__ import annotations

import pytest

from sensors.ingest import stream as stream
from sensors.ingest.drain import drain_shard
from tests.sensors.conftest import make_node
from tests.wsgi_client import WsgiClient as Client


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
