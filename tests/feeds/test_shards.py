"""Sharded feed writers (feeds/store/shards.py): feed_id % N picks a feed's commit queue, its writer's
lock and its directory; reads find the feed from its id. Real Redis, real files."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from core import redis_lock
from feeds.models import Feed
from feeds.store import service, shards
from feeds.store.routing import route_commit
from tests.conftest import ROOT

pytestmark = pytest.mark.django_db
NOW = 2_000_000_000
T0 = NOW - 86_400


@pytest.fixture(autouse=True)
def _two_shards(settings, feed_dir):
    settings.BMS_FEED_SHARDS = 2
    settings.BMS_FEED_SHARD_DIRS = []


def two_feeds() -> tuple[Feed, Feed]:
    """One feed on each shard of two (even id: shard 0, odd id: shard 1)."""
    feeds = [Feed.objects.create(name=f"f{i}", interval=10) for i in range(2)]
    return tuple(sorted(feeds, key=lambda f: f.id % 2))  # type: ignore[return-value]


def file_values(path) -> list[float]:
    return np.fromfile(path, "<f4").tolist()


def test_each_feeds_files_are_written_in_its_shards_directory(feed_dir, redis_client):
    even, odd = two_feeds()
    service.log_points([(even.id, T0, 1.0), (odd.id, T0, 2.0)])
    result = service.commit_all(now=NOW)
    assert result["points"] == 2
    assert file_values(feed_dir / "shard-0" / f"{even.id}.dat") == [1.0]
    assert file_values(feed_dir / "shard-1" / f"{odd.id}.dat") == [2.0]
    assert not (feed_dir / f"{even.id}.dat").exists()
    assert json.loads((feed_dir / "shards.json").read_text())["shards"] == 2
    # Reads find each feed's shard from its id.
    assert service.read(odd.id, T0, T0, 10) == [[T0 * 1000, 2.0]]
    assert service.feed_dir(odd.id) == feed_dir / "shard-1"


def test_a_shard_commits_only_its_own_feeds_under_its_own_lock(feed_dir, redis_client):
    even, odd = two_feeds()
    service.log_points([(even.id, T0, 1.0), (odd.id, T0, 2.0)])
    held = redis_lock.acquire(redis_client, "feeds:commit:lock", 60)  # a shard-0 commit runs
    result = service.commit_all(now=NOW, shard=1)  # shard 0's lock does not hold shard 1 up
    assert (result["points"], result["skipped"]) == (1, False)
    assert service.get_buffer().pending(even.id).tolist() != []  # shard 0's points wait
    assert service.commit_all(now=NOW, shard=0)["skipped"] is True
    redis_lock.release(redis_client, "feeds:commit:lock", held)
    assert service.commit_all(now=NOW, shard=0)["points"] == 1


def test_each_shard_syncs_on_its_own_clock(settings, feed_dir, redis_client):
    """With one sync time for all, the first shard's sync would make the others wait a whole
    interval more with their points only in Redis."""
    settings.BMS_FEED_SYNC_INTERVAL = 60
    even, odd = two_feeds()
    service.log_points([(even.id, T0, 1.0), (odd.id, T0, 2.0)])
    assert service.commit_all(now=NOW, shard=0)["synced"] is True
    assert service.commit_all(now=NOW, shard=1)["synced"] is True
    assert redis_client.smembers("feeds:dirty") == set()


def test_the_router_sends_a_shards_commit_to_its_queue(settings):
    from bms.celery import app

    def queue(**kw) -> str:
        return app.amqp.router.route({}, "feeds.tasks.commit_buffer", **kw)["queue"].name

    assert queue(args=(1,), kwargs={}) == "commit-1"
    assert queue(args=(), kwargs={"shard": 0}) == "commit-0"
    assert queue(args=(), kwargs={}) == "commit"  # "all shards": fans out from there
    settings.BMS_FEED_SHARDS = 1
    assert queue(args=(0,), kwargs={}) == "commit"  # one shard: the queue as before
    assert route_commit("control.tasks.control_tick", (), {}, {}) is None


def run_settings(env: dict, code: str) -> subprocess.CompletedProcess:
    full = dict(os.environ, DJANGO_SETTINGS_MODULE="bms.settings", **env)
    return subprocess.run(
        [sys.executable, "-c", f"import django; django.setup(); {code}"],
        cwd=ROOT, env=full, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_beat_sends_one_commit_per_shard():
    code = (
        "from django.conf import settings as s; "
        "print(sorted((k, v.get('args')) for k, v in s.CELERY_BEAT_SCHEDULE.items() "
        "if v['task'] == 'feeds.tasks.commit_buffer'))"
    )
    three = run_settings({"BMS_FEED_SHARDS": "3"}, code)
    assert three.stdout.strip() == (
        "[('commit-feed-shard-0', [0]), ('commit-feed-shard-1', [1]), ('commit-feed-shard-2', [2])]"
    ), three.stderr
    one = run_settings({"BMS_FEED_SHARDS": "1"}, code)
    assert one.stdout.strip() == "[('commit-feed-buffer', None)]", one.stderr


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"BMS_FEED_SHARDS": "2", "BMS_FEED_SHARD_DIRS": "/a,/b,/c"}, "give one per shard"),
        ({"BMS_FEED_SHARDS": "65"}, "must be at most 64"),
        ({"BMS_FEED_SHARDS": "0"}, "must be at least 1"),
    ],
)
def test_settings_refuse_a_bad_shard_layout_at_start(env, message):
    result = run_settings(env, "pass")
    assert result.returncode != 0 and message in result.stderr


def test_a_layout_with_a_directory_per_shard_is_checked():
    assert shards.make_layout("/f", 1).dirs == (shards.Path("/f"),)
    assert shards.make_layout("/f", 2, ["a", "/b"]).dirs == (
        shards.Path("/f/a"),
        shards.Path("/b"),
    )
    with pytest.raises(shards.LayoutError):
        shards.make_layout("/f", 2, ["a", "a"])
    with pytest.raises(shards.LayoutError):
        shards.make_layout("/f", shards.MAX_SHARDS + 1)
    assert shards.make_layout("/f", shards.MAX_SHARDS).shards == shards.MAX_SHARDS
