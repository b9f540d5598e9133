"""manage.py reshard_feeds: the feed files move to another number of shards and not a point is
lost — points committed before, points still buffered, points that arrive during the move
and after it. Real Redis, real files."""

from __future__ import annotations

import time

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from feeds.management.commands import reshard_feeds
from feeds.models import Feed
from feeds.store import service, shards

pytestmark = pytest.mark.django_db
# Real times: the command drains the buffer at the real now, like a commit worker.
NOW = int(time.time())
T0 = NOW // 10 * 10 - 3600
FEEDS = 5


@pytest.fixture(autouse=True)
def _one_shard(settings, feed_dir):
    settings.BMS_FEED_SHARDS = 1
    settings.BMS_FEED_SHARD_DIRS = []
    settings.BMS_FEED_MAX_BACKFILL_DAYS = 100_000


def post(feeds, step: int) -> None:
    """One point per feed at slot `step`, value feed id * 1000 + step."""
    service.log_points([(f.id, T0 + 10 * step, f.id * 1000.0 + step) for f in feeds])


def assert_all_points(feeds, steps) -> None:
    for f in feeds:
        got = service.read(f.id, T0, T0 + 10 * (max(steps)), 10)
        values = {t // 1000: v for t, v in got if v is not None}
        assert values == {T0 + 10 * s: f.id * 1000.0 + s for s in steps}, f"feed {f.id}"


def test_resharding_one_to_three_and_back_loses_no_point(settings, feed_dir, redis_client):
    feeds = [Feed.objects.create(name=f"f{i}", interval=10) for i in range(FEEDS)]
    post(feeds, 0)
    service.commit_all(now=NOW)  # on disk in the one-shard layout
    post(feeds, 1)  # still in the buffer when the move starts: drained first
    call_command("reshard_feeds", "--to", "3")
    assert redis_client.smembers("feeds:dirty") == set()
    for f in feeds:
        assert (feed_dir / f"shard-{f.id % 3}" / f"{f.id}.dat").exists()
        assert not (feed_dir / f"{f.id}.dat").exists()
    assert_all_points(feeds, [0, 1])  # readers follow the record before any restart

    settings.BMS_FEED_SHARDS = 3  # the workers restarted with the new setting
    post(feeds, 2)
    assert service.commit_all(now=NOW)["points"] == FEEDS
    assert_all_points(feeds, [0, 1, 2])

    post(feeds, 3)
    call_command("reshard_feeds", "--to", "1")
    settings.BMS_FEED_SHARDS = 1
    post(feeds, 4)
    service.commit_all(now=NOW)
    assert_all_points(feeds, [0, 1, 2, 3, 4])
    assert sorted(p.name for p in feed_dir.glob("shard-*/*")) == []


def test_points_arriving_during_the_move_wait_and_commits_are_held(
    settings, feed_dir, redis_client, monkeypatch
):
    feeds = [Feed.objects.create(name=f"f{i}", interval=10) for i in range(FEEDS)]
    post(feeds, 0)
    service.commit_all(now=NOW)
    seen = []
    real_link = reshard_feeds._link_or_copy

    def during_the_move(src, dst):
        if not seen:
            post(feeds, 1)  # ingest goes on
            seen.append(service.commit_all(now=NOW))  # a beat commit meanwhile: held off
            assert_all_points(feeds, [0, 1])  # reads still find everything
        real_link(src, dst)

    monkeypatch.setattr(reshard_feeds, "_link_or_copy", during_the_move)
    call_command("reshard_feeds", "--to", "2")
    assert seen[0]["skipped"] is True and seen[0]["points"] == 0
    assert len(service.get_buffer().pending(feeds[0].id)) == 1  # waited in Redis
    settings.BMS_FEED_SHARDS = 2
    service.commit_all(now=NOW)
    assert_all_points(feeds, [0, 1])


def test_a_commit_worker_not_restarted_refuses_to_write(settings, feed_dir, redis_client):
    """Configured for one shard while the files are in two: writing would start a second copy
    of each moved feed in the old place. Its points wait in Redis for a restarted worker."""
    feeds = [Feed.objects.create(name=f"f{i}", interval=10) for i in range(2)]
    post(feeds, 0)
    call_command("reshard_feeds", "--to", "2")
    post(feeds, 1)
    with pytest.raises(shards.LayoutMismatch, match="restart it"):
        service.commit_all(now=NOW)  # still BMS_FEED_SHARDS=1
    assert not list(feed_dir.glob("*.dat"))
    assert redis_client.scard("feeds:dirty") == 2
    settings.BMS_FEED_SHARDS = 2
    service.commit_all(now=NOW)
    assert_all_points(feeds, [0, 1])


def test_shards_can_be_given_their_own_directories(settings, feed_dir, tmp_path, redis_client):
    feeds = [Feed.objects.create(name=f"f{i}", interval=10) for i in range(2)]
    post(feeds, 0)
    service.commit_all(now=NOW)
    dirs = f"{tmp_path}/disk-a,{tmp_path}/disk-b"
    call_command("reshard_feeds", "--to", "2", "--dirs", dirs)
    for f in feeds:
        assert (tmp_path / ("disk-a", "disk-b")[f.id % 2] / f"{f.id}.dat").exists()
    settings.BMS_FEED_SHARDS = 2
    settings.BMS_FEED_SHARD_DIRS = dirs.split(",")
    post(feeds, 1)
    service.commit_all(now=NOW)
    assert_all_points(feeds, [0, 1])


def test_a_rerun_after_an_interrupted_move_finishes_it(settings, feed_dir, redis_client):
    feeds = [Feed.objects.create(name=f"f{i}", interval=10) for i in range(2)]
    post(feeds, 0)
    service.commit_all(now=NOW)
    # Killed after linking one file into its new place, before the record switched.
    src = next(p for p in feed_dir.glob("*.dat"))
    (feed_dir / f"shard-{int(src.stem) % 2}").mkdir()
    target = feed_dir / f"shard-{int(src.stem) % 2}" / src.name
    target.hardlink_to(src)
    call_command("reshard_feeds", "--to", "2")
    settings.BMS_FEED_SHARDS = 2
    assert_all_points(feeds, [0])


def test_a_leftover_file_in_the_way_stops_the_move_before_anything_moves(feed_dir, redis_client):
    feed = Feed.objects.create(name="f", interval=10)
    post([feed], 0)
    service.commit_all(now=NOW)
    (feed_dir / f"shard-{feed.id % 2}").mkdir()
    (feed_dir / f"shard-{feed.id % 2}" / f"{feed.id}.dat").write_bytes(b"\0\0\0\0")
    with pytest.raises(CommandError, match="exists already"):
        call_command("reshard_feeds", "--to", "2")
    assert shards.read_record(feed_dir).shards == 1
    assert (feed_dir / f"{feed.id}.dat").exists()
    assert redis_client.get("feeds:commit:lock") is None  # the locks were released


@pytest.mark.parametrize("to", ["0", str(shards.MAX_SHARDS + 1)])
def test_the_shard_count_is_bounded(feed_dir, to):
    with pytest.raises(CommandError, match="shards must be"):
        call_command("reshard_feeds", "--to", to)


def test_a_feeds_summary_moves_with_it_and_is_rebuilt_by_its_next_write(
    settings, feed_dir, redis_client
):
    import numpy as np

    from feeds.store import phpfina, summaries

    feed = Feed.objects.create(name="long", interval=10)
    slots = 3 * summaries.SUPER_SLOTS
    start = T0 - 10 * slots
    (feed_dir / f"{feed.id}.meta").write_bytes(phpfina.pack_meta(10, start))
    (feed_dir / f"{feed.id}.dat").write_bytes(np.arange(slots, dtype="<f4").tobytes())
    summaries.build(feed_dir, feed.id)
    call_command("reshard_feeds", "--to", "2")
    moved = feed_dir / f"shard-{feed.id % 2}"
    assert {p.name for p in feed_dir.iterdir() if p.name.startswith(f"{feed.id}.")} == set()
    assert all(p.parent == moved and p.exists() for p in summaries.paths(moved, feed.id))
    # The move changed the .dat's ctime: a read does not trust the summary until a write
    # has rebuilt it, and reads are right all along.
    assert summaries.matches_dat(moved, feed.id) is None
    settings.BMS_FEED_SHARDS = 2
    service.log_points([(feed.id, T0, 1.0)])
    service.commit_all(now=NOW)
    assert summaries.matches_dat(moved, feed.id) is True
    view = phpfina.open_view(moved, feed.id)
    assert view.summary is not None
    assert phpfina.window_values(view, np.array([0, slots]), "average")[0] == (slots - 1) / 2
