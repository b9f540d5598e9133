"""One point could pad a feed with 63 MB of NaN (a new feed may start in
2000; 2 rows x 2 keys wrote 126 MB). Now each site's history budget bounds that at the door
(tests/sensors/test_history_budget.py); here, the store's own bounds: with the optional
BMS_FEED_MAX_BACKFILL_DAYS set, a point may not put a feed's first slot more than that before
now; one commit pads at most BMS_FEED_MAX_GAP_SLOTS; and
what is refused is counted in Redis and raised as an alarm staff see, never silently dropped.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from alarms import watchdog
from alarms.models import Alarm
from feeds.models import Feed
from feeds.store import phpfina, service

DAY = 86_400
NOW = 1_700_000_000
Y2000 = 946_684_800
WEEK = 7 * DAY


def dat_size(directory, feed_id) -> int:
    return phpfina.dat_path(directory, feed_id).stat().st_size


def test_a_new_feed_refuses_a_first_point_older_than_the_backfill_bound(tmp_path):
    report = phpfina.write_points(
        tmp_path, 1, 10, [Y2000, NOW], [1.0, 2.0], now=NOW, max_backfill_s=WEEK, fsync=False
    )
    assert report.refused == [(Y2000, phpfina.TOO_OLD)]
    assert report.written == 1 and dat_size(tmp_path, 1) == 4  # NOW alone: no padding


def test_the_backfill_bound_is_inclusive(tmp_path):
    report = phpfina.write_points(
        tmp_path, 1, 10, [NOW - WEEK, NOW], [1.0, 2.0], now=NOW, max_backfill_s=WEEK, fsync=False
    )
    assert report.refused == []
    assert phpfina.read_meta(tmp_path, 1).start_time == NOW - WEEK
    assert dat_size(tmp_path, 1) == (WEEK // 10 + 1) * 4


def test_a_prepend_before_the_backfill_bound_is_refused(tmp_path):
    phpfina.write_points(tmp_path, 1, 10, [NOW - DAY], [1.0], now=NOW, max_backfill_s=WEEK)
    report = phpfina.write_points(
        tmp_path, 1, 10, [NOW - WEEK - 10, NOW - WEEK], [5.0, 6.0], now=NOW, max_backfill_s=WEEK
    )
    assert report.refused == [(NOW - WEEK - 10, phpfina.TOO_OLD)]
    assert phpfina.read_meta(tmp_path, 1).start_time == NOW - WEEK


def test_one_commit_pads_at_most_the_gap_bound_in_all(tmp_path):
    phpfina.write_points(tmp_path, 1, 10, [NOW - DAY], [1.0], now=NOW)
    # Two gaps of 60 slots each: 120 in all, over a bound of 100. The first fits, the
    # second (and what follows it) is refused.
    t = [NOW - DAY + 610, NOW - DAY + 1220, NOW - DAY + 1230]
    report = phpfina.write_points(tmp_path, 1, 10, t, [2.0, 3.0, 4.0], now=NOW, max_gap_slots=100)
    assert [r[0] for r in report.refused] == t[1:]
    assert report.refused[0][1] == "gap of more than 100 slots"
    assert dat_size(tmp_path, 1) == 62 * 4
    # At the bound exactly: written.
    ok = phpfina.write_points(tmp_path, 1, 10, [NOW - DAY + 620 + 1000], [5.0], now=NOW,
                              max_gap_slots=100)  # fmt: skip
    assert ok.refused == [] and dat_size(tmp_path, 1) == (62 + 101) * 4


def test_the_gap_bound_never_exceeds_emoncms(tmp_path):
    phpfina.write_points(tmp_path, 1, 1, [0], [1.0], now=NOW)
    far = phpfina.MAX_PADDING_SLOTS + 2
    report = phpfina.write_points(tmp_path, 1, 1, [far], [2.0], now=NOW, max_gap_slots=10**9)
    assert report.refused == [(far, f"gap of more than {phpfina.MAX_PADDING_SLOTS} slots")]


@pytest.mark.django_db
def test_the_two_row_attack_pads_nothing_and_staff_get_an_alarm(feed_dir, redis_client, settings):
    # The red team's request: two keys, each a row in 2000 and one 15.7M slots later. The
    # optional age bound (off by default: the site's history budget stops this request at the
    # door, tests/sensors/test_history_budget.py) still holds in the store when it is set.
    assert settings.BMS_FEED_MAX_BACKFILL_DAYS == 0  # the documented default: off
    settings.BMS_FEED_MAX_BACKFILL_DAYS = 7
    now = time.time()
    feeds = [Feed.objects.create(name=f"k{i}", interval=1) for i in range(2)]
    later = Y2000 + 15_000_000
    service.log_points([(f.id, t, 1.0) for f in feeds for t in (Y2000, later)])
    result = service.commit_all(now=now)
    assert result["refused"] == {str(f.id): 2 for f in feeds}
    for feed in feeds:
        assert not phpfina.dat_path(feed_dir, feed.id).exists() or dat_size(feed_dir, feed.id) == 0
    # Recorded where staff see them: an alarm per feed, naming it and the count.
    watchdog.check_refused()
    alarms = {a.key: a for a in Alarm.objects.filter(key__startswith="feed-refused:")}
    assert set(alarms) == {f"feed-refused:{f.id}" for f in feeds}
    assert "2 points refused" in alarms[f"feed-refused:{feeds[0].id}"].message


@pytest.mark.django_db
def test_the_refused_alarm_counts_up_and_clears_once_acknowledged(
    feed_dir, redis_client, engineer, settings
):
    settings.BMS_FEED_MAX_BACKFILL_DAYS = 7  # the optional age bound refuses these points
    feed = Feed.objects.create(name="meter", interval=10)
    now = time.time()
    key = watchdog.refused_alarm(feed.id)
    service.log_points([(feed.id, Y2000, 1.0)])
    service.commit_all(now=now)
    watchdog.check_refused()
    service.log_points([(feed.id, Y2000 + 10, 1.0), (feed.id, Y2000 + 20, 1.0)])
    service.commit_all(now=now)
    watchdog.check_refused()
    alarm = Alarm.objects.get(key=key, cleared_at__isnull=True)
    assert f"Feed {feed.id} '{feed}': 3 points refused" in alarm.message  # named
    # Not acknowledged: it stays open. Acknowledged: it clears and the count is forgotten.
    watchdog.check_refused()
    assert Alarm.objects.filter(key=key, cleared_at__isnull=True).exists()
    from alarms.lifecycle import acknowledge

    acknowledge(alarm, engineer)
    watchdog.check_refused()
    assert not Alarm.objects.filter(key=key, cleared_at__isnull=True).exists()
    assert service.get_buffer().refused() == {}
    # New refusals open a new alarm counting only them.
    service.log_points([(feed.id, Y2000 + 30, 1.0)])
    service.commit_all(now=now)
    watchdog.check_refused()
    assert (
        f"Feed {feed.id} '{feed}': 1 points refused"
        in Alarm.objects.get(key=key, cleared_at__isnull=True).message
    )


@pytest.mark.django_db
def test_recent_points_of_a_new_feed_are_written(feed_dir, redis_client):
    feed = Feed.objects.create(name="fresh", interval=10)
    now = int(time.time()) // 10 * 10
    service.log_points([(feed.id, now - 6 * DAY, 1.0), (feed.id, now, 2.0)])
    assert service.commit_all(now=now)["refused"] == {}
    data = phpfina.open_data(feed_dir, feed.id)
    assert len(data) == 6 * DAY // 10 + 1 and np.isnan(data[1:-1]).all()
