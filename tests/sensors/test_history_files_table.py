"""The history check's view of every node's feed files is one table per process (issue #29;
sensors/ingest/history_budget.py `_files_table`): a node's post costs no query once the table
is read, and a change of a node's inputs or feeds is still charged as it is now: at once after
the config generation moves (a saved Node or Sensor), within the table's 60 s TTL for a
feed's interval (which moves nothing), and a node made after the table was read is read alone.
Real Redis and database, the real endpoints through bms.wsgi."""

from __future__ import annotations

import json
import time
import types

import pytest
import time_machine

from core.redis import get_redis
from feeds.models import Feed
from sensors import cache
from sensors.ingest import history_budget, node_auth
from sensors.models import Node, Sensor, Site
from tests.wsgi_client import WsgiClient as Client

pytestmark = pytest.mark.django_db

NOW = 1_780_000_000  # a fixed clock: costs are exact


@pytest.fixture
def site(feed_dir, redis_client):
    return Site.objects.create(name="Home", slug="home")


def node_logging(site: Site, name: str, node_id: int, interval: int = 10) -> tuple[Node, str, Feed]:
    """A node of the site whose input "1" is logged to a feed of `interval` seconds."""
    node = Node(name=name, node_id=node_id, site=site)
    key = node.set_new_key()
    node.save()
    feed = Feed.objects.create(name=f"{name}:1", tag=name, interval=interval)
    Sensor.objects.create(
        node=node, key="1", name="1", processes=[{"process": "log_to_feed", "feed": feed.pk}]
    )
    return node, key, feed


def bulk(key: str, node: Node, t: int) -> None:
    r = Client().post(
        "/input/bulk", {"data": json.dumps([[t, node.node_id, 1.0]]), "time": "0", "apikey": key}
    )
    assert r.status_code == 200 and r.content == b"ok", r.content


def another_process_saved_the_config() -> None:
    """What this process sees when another one saved a Node or Sensor: the generation moved
    (in a test's transaction on_commit never fires, so nothing bumped it), read at once."""
    get_redis().set(cache.GENERATION_KEY, "another process's change")
    cache.check_generation()


def test_a_nodes_post_costs_no_query_once_the_table_is_read(site, django_assert_num_queries):
    first, first_key, _ = node_logging(site, "a", 1)
    second, second_key, _ = node_logging(site, "b", 2)
    with time_machine.travel(NOW, tick=False):
        bulk(first_key, first, NOW)  # reads the keys' table and the files' table
        with django_assert_num_queries(0):
            bulk(second_key, second, NOW)  # its first post: its files are in the table
            # ...and a reading of its history too: charged from the table, the site's budget
            # read only then (one query)
        with django_assert_num_queries(1):
            bulk(second_key, second, NOW - 100)
    assert history_budget.used_bytes(site.pk) == 100 * 4 // 10


def test_a_feed_added_to_an_input_is_charged_once_the_config_changed(site):
    # Input "1" logs to a 10 s feed; another process adds a 1 s feed to it. Until this process
    # sees the change (within a second: the config generation) the table is the old one;
    # once it has, a reading of history is charged for both files.
    node, key, _ten = node_logging(site, "a", 1)
    with time_machine.travel(NOW, tick=False):
        bulk(key, node, NOW - 1000)
        assert history_budget.used_bytes(site.pk) == 1000 * 4 // 10
        one = Feed.objects.create(name="a:1 fine", tag="a", interval=1)
        sensor = Sensor.objects.get(node=node, key="1")
        sensor.processes = [*sensor.processes, {"process": "log_to_feed", "feed": one.pk}]
        sensor.save()
        another_process_saved_the_config()
        bulk(key, node, NOW - 2000)
    # the 10 s file from NOW - 1000 back to NOW - 2000; the new 1 s file from now back
    assert history_budget.used_bytes(site.pk) == 400 + 1000 * 4 // 10 + 2000 * 4


def test_a_feeds_interval_changed_is_seen_within_the_tables_ttl(site, monkeypatch):
    # A feed's interval is not config the generation follows (a Feed save bumps nothing): the
    # table's 60 s TTL bounds it, as each node's own entry did before.
    node, key, feed = node_logging(site, "a", 1)
    with time_machine.travel(NOW, tick=False):
        bulk(key, node, NOW - 1000)
        Feed.objects.filter(pk=feed.pk).update(interval=1)
        bulk(key, node, NOW - 2000)  # still the 10 s file as far as this process knows
        assert history_budget.used_bytes(site.pk) == 2000 * 4 // 10
        real = time.monotonic
        monkeypatch.setattr(
            cache,
            "time",
            types.SimpleNamespace(monotonic=lambda: real() + cache.ENTRY_TTL_S + 1),
        )
        bulk(key, node, NOW - 3000)
    assert history_budget.used_bytes(site.pk) == 800 + 1000 * 4


def test_a_node_made_after_the_table_was_read_is_read_alone(site, django_assert_num_queries):
    # Made by another process while Redis missed its generation bump: this process's keys'
    # table ran out its TTL first and knows the node's key, its files' table does not know the
    # node yet. Its files are read on their own, once, not taken for a node without any.
    first, first_key, _ = node_logging(site, "a", 1)
    with time_machine.travel(NOW, tick=False):
        bulk(first_key, first, NOW)
        new, new_key, _feed = node_logging(site, "b", 2, interval=1)
        node_auth._keys.clear()  # its TTL ran out
        bulk(new_key, new, NOW - 100)
        assert history_budget.used_bytes(site.pk) == 100 * 4  # its 1 s file
        assert history_budget.holdable_s(new.pk) == history_budget.phpfina.max_prepend_slots(1)
        with django_assert_num_queries(0):
            assert history_budget.holdable_s(new.pk) == history_budget.holdable_s(new.pk)
