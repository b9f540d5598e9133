"""A deleted node's ingest stream and live state go with it (issue #25, item 8: 4,061 streams
were left behind for 13 nodes), and beat's silent-node check sweeps those left before."""

from __future__ import annotations

import pytest

from sensors.ingest import node_cleanup, node_state
from sensors.ingest import stream as ingest_stream
from sensors.ingest.drain import drain_shard
from sensors.models import Node
from sensors.tasks import check_silent_nodes
from tests.sensors.conftest import make_node

pytestmark = pytest.mark.django_db

T0 = 1_700_000_000


def test_deleting_a_node_removes_its_stream_and_state(
    redis_client, django_capture_on_commit_callbacks
):
    node, _ = make_node("gone", node_id=11)
    keep, _ = make_node("kept", node_id=12)
    for n in (node, keep):
        ingest_stream.append(n.pk, [[T0, {"p": 1.0}]])
        drain_shard(ingest_stream.shard_of(n.pk), budget_s=2)
        ingest_stream.append(n.pk, [[T0 + 10, {"p": 2.0}]])  # one still waiting
    assert redis_client.exists(ingest_stream.stream_key(node.pk))
    assert redis_client.hexists(node_state.SEEN_KEY, node.pk)
    node_pk = node.pk
    with django_capture_on_commit_callbacks(execute=True):
        node.delete()
    assert not redis_client.exists(ingest_stream.stream_key(node_pk))
    assert not redis_client.exists(node_state.last_key(node_pk))
    assert not redis_client.hexists(node_state.SEEN_KEY, node_pk)
    shard = ingest_stream.ready_key(ingest_stream.shard_of(node_pk))
    assert not redis_client.sismember(shard, node_pk)
    # The other node's waiting request is untouched.
    assert redis_client.xlen(ingest_stream.stream_key(keep.pk)) == 1


def test_the_sweep_removes_streams_of_nodes_that_no_longer_exist(redis_client):
    node, _ = make_node("kept", node_id=12)
    ingest_stream.append(node.pk, [[T0, {"p": 1.0}]])
    orphans = [node.pk + 100 + i for i in range(50)]
    for pk in orphans:  # what the red team found: empty streams with their group, per node
        redis_client.xgroup_create(
            ingest_stream.stream_key(pk), ingest_stream.GROUP, id="0", mkstream=True
        )
    assert check_silent_nodes()["streams_removed"] == orphans
    left = {
        ingest_stream.node_of(k) for k in redis_client.scan_iter(ingest_stream.STREAM_PREFIX + "*")
    }
    assert left == {node.pk}
    assert redis_client.xlen(ingest_stream.stream_key(node.pk)) == 1
    # Beat runs the check every minute; the sweep at most every SWEEP_EVERY_S.
    redis_client.xgroup_create(ingest_stream.stream_key(999_999), "drain", id="0", mkstream=True)
    assert check_silent_nodes()["streams_removed"] == []
    assert node_cleanup.sweep_orphans(force=True) == [999_999]
    assert Node.objects.count() == 1
