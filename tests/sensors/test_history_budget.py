"""History is accepted as emoncms accepts it, bounded per site by what it costs on disk
(issue #26 item 4; sensors/ingest/history_budget.py):

- 33-day-old history posted with /input/bulk is stored point for point (it was answered `ok`
  and then refused at commit by a 7-day age bound);
- history over the site's budget is refused before `ok` (413 naming `time`) and nothing of it
  is queued or stored; at the budget exactly it fits;
- what reaches the worker without the web's check (MQTT) is left out before any process runs
  on it, counted on the node's input errors and alarmed;
- engineers read the budget and its use, and raise it; other roles only read it.
"""

from __future__ import annotations

import json
import time

import pytest
import time_machine

from alarms.models import Alarm
from core.redis import get_redis
from feeds.models import Feed
from feeds.store import phpfina, service
from sensors import cache as sensors_cache
from sensors.ingest import history_budget, input_errors
from sensors.ingest import stream as stream
from sensors.ingest.drain import drain_shard
from sensors.models import Sensor, Site
from tests.sensors.conftest import make_node, queued_batches
from tests.wsgi_client import WsgiClient as Client

pytestmark = pytest.mark.django_db

DAY = 86_400
NOW = 1_780_000_000  # a fixed clock: costs are exact


@pytest.fixture
def place(feed_dir, redis_client):
    """A site, its node, and its input "1" (a bulk row's first value) logged to a feed."""

    def make(interval: int = 10, budget_mb: int | None = None):
        site = Site.objects.create(name="Home", slug="home", history_budget_mb=budget_mb)
        node, key = make_node()
        node.site = site
        node.save()
        feed = Feed.objects.create(name="power", tag="n", interval=interval)
        Sensor.objects.create(
            node=node, key="1", name="1", processes=[{"process": "log_to_feed", "feed": feed.pk}]
        )
        return site, node, key, feed

    return make


def bulk(key: str, rows: list[list]):
    return Client().post("/input/bulk", {"data": json.dumps(rows), "time": "0", "apikey": key})


def drain(node) -> None:
    report = drain_shard(stream.shard_of(node.pk))
    assert report.dropped == 0 and not report.stopped


def stored(feed: Feed) -> tuple[phpfina.Meta | None, list[float]]:
    meta, data = phpfina.open_feed(service.feed_dir(feed.pk), feed.pk)
    return meta, [float(x) for x in data]


def test_33_day_old_history_via_bulk_is_stored_point_for_point(place):
    _site, node, key, feed = place()
    now = int(time.time())
    start = (now - 33 * DAY) // 10 * 10
    rows = [[start + 10 * i, node.node_id, float(i)] for i in range(360)]  # an hour of it
    for part in range(0, 360, 120):  # as emonhub sends it: several requests, oldest first
        response = bulk(key, rows[part : part + 120])
        assert response.status_code == 200 and response.content == b"ok", response.content
    drain(node)
    result = service.commit_all(sync=True)
    assert result["refused"] == {}
    meta, values = stored(feed)
    assert meta.start_time == start
    assert values == [float(i) for i in range(360)]


def test_history_older_than_live_data_is_prepended_point_for_point(place):
    _site, node, key, feed = place()
    now = int(time.time()) // 10 * 10
    assert bulk(key, [[now, node.node_id, 99.0]]).content == b"ok"  # live data came first
    drain(node)
    service.commit_all(sync=True)
    old = now - 33 * DAY
    assert bulk(key, [[old + 10 * i, node.node_id, float(i)] for i in range(50)]).content == b"ok"
    drain(node)
    assert service.commit_all(sync=True)["refused"] == {}
    meta, values = stored(feed)
    assert meta.start_time == old
    assert values[:50] == [float(i) for i in range(50)] and values[-1] == 99.0


def _cost_of(seconds: int, interval: int) -> int:
    return seconds * 4 // interval


def test_at_the_budget_exactly_history_fits_and_one_slot_more_is_a_413(place, redis_client):
    # A 4 s feed costs exactly 1 byte per second of history: 1 MiB is 1,048,576 s of it.
    site, node, key, feed = place(interval=4, budget_mb=1)
    with time_machine.travel(NOW, tick=False):
        assert bulk(key, [[NOW, node.node_id, 1.0]]).content == b"ok"  # reach: now, costs 0
        at_bound = NOW - (1 << 20)
        assert bulk(key, [[at_bound, node.node_id, 2.0]]).content == b"ok"
        assert history_budget.used_bytes(site.pk) == 1 << 20
        before = queued_batches(redis_client)
        response = bulk(key, [[at_bound - 4, node.node_id, 3.0]])
    assert response.status_code == 413
    body = response.json()
    assert body["field"] == "time" and "history budget" in body["error"]
    assert queued_batches(redis_client) == before  # nothing of it queued
    assert history_budget.used_bytes(site.pk) == 1 << 20  # nor charged
    drain(node)
    service.commit_all(sync=True)
    _meta, values = stored(feed)
    assert 3.0 not in values and values[0] == 2.0


def test_a_site_over_budget_is_refused_before_ok_and_nothing_is_stored(place, redis_client):
    _site, node, key, feed = place(budget_mb=1)
    now = int(time.time())
    # 33 days of a 10 s feed is 1.1 MB: over a 1 MB budget.
    rows = [[now - 33 * DAY + 10 * i, node.node_id, 1.0] for i in range(10)]
    response = bulk(key, rows)
    assert response.status_code == 413 and response.content != b"ok"
    assert "1.0 MB" in response.json()["error"]
    assert queued_batches(redis_client) == []
    service.commit_all(sync=True)
    assert stored(feed) == (None, [])


def test_the_red_team_rows_from_2000_are_refused_at_the_door(place, redis_client):
    # Before the age bound: a row in 2000 made a feed pad 63 MB. The default budget (2 GiB)
    # is far above one such row on one input, so a small one shows the door doing it. A row
    # as old as 2000 is past what a 1 s feed can hold at all: it is skipped, not charged
    # (test_a_batch_with_one_row_older_than_the_files_can_hold_is_ok_and_counts_it); 100 days
    # back is holdable but over 10 MB: the whole request is a 413, nothing stored.
    _site, node, key, feed = place(interval=1, budget_mb=10)
    now = int(time.time())
    response = bulk(key, [[now - 100 * DAY, node.node_id, 1.0], [now, node.node_id, 2.0]])
    assert response.status_code == 413 and "history budget" in response.json()["error"]
    service.commit_all(sync=True)
    assert stored(feed) == (None, [])


def test_a_node_key_rest_reading_over_budget_is_a_413_too(place, redis_client):
    _site, node, key, _feed = place(budget_mb=1)
    body = {"time": int(time.time()) - 40 * DAY, "values": {"1": 1.0}}
    response = Client().post(
        "/api/v1/readings", json.dumps(body), "application/json", HTTP_AUTHORIZATION=f"Bearer {key}"
    )
    assert response.status_code == 413 and response.json()["field"] == "time"


def test_over_budget_rows_from_mqtt_are_left_out_before_the_processes_and_alarmed(place):
    _site, node, _key, feed = place(budget_mb=1)
    kwh = Feed.objects.create(name="kwh", tag="n", interval=10)
    Sensor.objects.filter(node=node).update(
        processes=[
            {"process": "log_to_feed", "feed": feed.pk},
            {"process": "power_to_kwh", "feed": kwh.pk},
        ]
    )
    now = int(time.time()) // 10 * 10
    old = now - 40 * DAY
    # What the MQTT gateway appends (sensors/devices/mqtt.py): no web check on the way.
    stream.append(node.pk, [[old, {"1": 3600.0}], [old + 10, {"1": 3600.0}]])
    stream.append(node.pk, [[now, {"1": 3600.0}], [now + 10, {"1": 3600.0}]])
    drain(node)
    service.commit_all(sync=True)
    meta, values = stored(feed)
    assert meta.start_time == now and values == [3600.0, 3600.0]  # the live rows only
    # power_to_kwh never saw the refused rows: 10 s at 1 Wh/s since the first live reading.
    assert service.last_value(kwh.pk)[1] == pytest.approx(0.01, abs=1e-6)
    record = input_errors.record_key(input_errors.node_subject(node.pk))
    assert int(get_redis().hget(record, "count")) == 2
    alarm = Alarm.objects.get(key=input_errors.alarm_key(input_errors.node_subject(node.pk)))
    assert "history budget" in alarm.message


def test_engineers_read_and_raise_the_budget(place, engineer_api):
    site, node, key, _feed = place(budget_mb=1)
    now = int(time.time())
    assert bulk(key, [[now - 33 * DAY, node.node_id, 1.0]]).status_code == 413
    use = engineer_api.get(f"/api/v1/sites/{site.pk}/history-budget").json()
    assert use["budget_mb"] == 1 and use["used_bytes"] == 0
    r = engineer_api.patch(f"/api/v1/sites/{site.pk}", {"history_budget_mb": 2}, format="json")
    assert r.status_code == 200, r.content
    assert bulk(key, [[now - 33 * DAY, node.node_id, 1.0]]).content == b"ok"
    use = engineer_api.get(f"/api/v1/sites/{site.pk}/history-budget").json()
    # 4 bytes per 10 s slot from 33 days ago to now (the clock moved a little meanwhile).
    assert use["budget_mb"] == 2
    assert 0 <= use["used_bytes"] - _cost_of(33 * DAY, 10) <= 8


def test_viewers_read_the_budget_but_cannot_raise_it(place, viewer_api, anon_api):
    site, *_ = place(budget_mb=1)
    assert viewer_api.get(f"/api/v1/sites/{site.pk}/history-budget").status_code == 200
    r = viewer_api.patch(f"/api/v1/sites/{site.pk}", {"history_budget_mb": 99}, format="json")
    assert r.status_code == 403
    assert anon_api.get(f"/api/v1/sites/{site.pk}/history-budget").status_code in (401, 403)
    site.refresh_from_db()
    assert site.history_budget_mb == 1


def test_the_budget_has_a_bound(place, engineer_api):
    site, *_ = place()
    url = f"/api/v1/sites/{site.pk}"
    ok = engineer_api.patch(url, {"history_budget_mb": 1_048_576}, format="json")
    assert ok.status_code == 200
    r = engineer_api.patch(url, {"history_budget_mb": 1_048_577}, format="json")
    assert r.status_code == 400 and "history_budget_mb" in r.json()["fields"]
    assert engineer_api.patch(url, {"history_budget_mb": -1}, format="json").status_code == 400


def test_the_default_budget_is_the_documented_one(settings):
    assert settings.BMS_SITE_HISTORY_BUDGET_MB == 2048
    assert settings.BMS_FEED_MAX_BACKFILL_DAYS == 0  # the age bound is off


def test_a_batch_with_one_row_older_than_the_files_can_hold_is_ok_and_counts_it(
    place, redis_client
):
    # A 1 s feed pads at most 15,768,000 slots (emoncms's bound): 182 days. Such a row was a
    # 413 for the whole batch, for ever (emonhub resends it): now it is skipped and counted on
    # the node's input errors, and the batch's live rows are stored (docs/INGEST.md "History").
    site, node, key, feed = place(interval=1)
    holdable = history_budget.holdable_s(node.pk)
    assert holdable == phpfina.MAX_PADDING_SLOTS  # 182.5 days of 1 s slots
    rows = [[NOW - 1, node.node_id, 1.0], [NOW - holdable - 1, node.node_id, 9.0],
            [NOW, node.node_id, 2.0]]  # fmt: skip
    with time_machine.travel(NOW, tick=False):
        response = bulk(key, rows)
        assert response.status_code == 200 and response.content == b"ok"
        drain(node)
        assert service.commit_all(sync=True)["refused"] == {}
        meta, values = stored(feed)
        assert meta.start_time == NOW - 1 and values == [1.0, 2.0]  # the live rows only
        summary = input_errors.summary(input_errors.node_subject(node.pk))
        assert summary["count"] == "1" and "feed files can hold" in summary["last"], summary
        # One 1 s slot for the row a second old; nothing for the skipped one.
        assert history_budget.used_bytes(site.pk) == 4
        # At the bound: answered ok and kept by the commit.
        assert bulk(key, [[NOW - holdable, node.node_id, 1.0]]).content == b"ok"
        drain(node)
        assert service.commit_all(sync=True)["refused"] == {}
    assert stored(feed)[0].start_time == NOW - holdable


def post(key: str, node: str, t: int, values: dict):
    return Client().post(
        "/input/post",
        {"node": node, "time": str(t), "fulljson": json.dumps(values), "apikey": key},
    )


def test_new_inputs_at_an_already_charged_time_are_charged_for_their_files(feed_dir, redis_client):
    # The testers' repro (#26 item 4 follow-up), at 30 days: one input charged at an old time,
    # then forty new inputs at that same time were free (the node's reach did not move), and
    # a live post then padded each of their files from there to now against one file's charge.
    site = Site.objects.create(name="Home", slug="home", history_budget_mb=40)
    node, key = make_node()
    node.site = site
    node.save()
    old = NOW - 30 * DAY
    per_file = 30 * DAY * 4 // 10  # 1,036,800 bytes: 259,200 slots of 4 bytes
    many = {f"x{i}": i for i in range(40)}
    with time_machine.travel(NOW, tick=False):
        assert post(key, node.name, old, {"t": 1}).status_code == 200
        assert history_budget.used_bytes(site.pk) == per_file
        # 41 files' history is 40.5 MiB: over a 40 MiB budget, refused whole, nothing charged.
        response = post(key, node.name, old, many)
        assert response.status_code == 413 and response.json()["field"] == "time"
        assert history_budget.used_bytes(site.pk) == per_file
        Site.objects.filter(pk=site.pk).update(history_budget_mb=41)
        assert post(key, node.name, old, many).status_code == 200
        assert history_budget.used_bytes(site.pk) == 41 * per_file
        drain(node)
        # Their inputs now exist with their own feeds: the same time again costs nothing more
        # (what the keys paid before their feeds existed counts for the feeds).
        assert post(key, node.name, old, {"t": 2, "x0": 3}).status_code == 200
        assert history_budget.used_bytes(site.pk) == 41 * per_file
        assert post(key, node.name, NOW, {f"x{i}": i for i in range(10)}).status_code == 200
        # The budget's rest (41 MiB - 41 files) cannot pay for one more new input back there.
        response = post(key, node.name, old, {"x40": 1})
        assert response.status_code == 413 and "history budget" in response.json()["error"]
        drain(node)
        assert service.commit_all(sync=True)["refused"] == {}
    feeds = Feed.objects.filter(pk__in=Sensor.objects.filter(node=node).values("feed_id"))
    sizes = {feed.name: len(stored(feed)[1]) * 4 for feed in feeds}
    assert len(sizes) == 41 and "emontx1:x40" not in sizes
    padded = [name for name, size in sizes.items() if size > 4]
    assert len(padded) == 10  # x0..x9: from 30 days ago to now, one slot each for the live point
    assert all(sizes[name] == per_file + 4 for name in padded)
    # What history added to the disk (each file less its live slot) is within what was charged.
    history = sum(sizes.values()) - 4 * len(padded)
    assert history <= history_budget.used_bytes(site.pk) == 41 * per_file


def test_mqtt_rows_with_new_inputs_at_a_charged_time_are_charged_per_file_too(place):
    # The worker's check (admit) uses the same per-file cost: three new inputs at an old time
    # the node already paid for one input are over a 2 MiB budget; the live row still goes in.
    site, node, _key, _feed = place(budget_mb=2)
    now = int(time.time()) // 10 * 10
    old = now - 20 * DAY  # 691,200 bytes a 10 s file
    stream.append(node.pk, [[old, {"t": 1.0}]])
    drain(node)
    # (Per file: only t's file, 691,200 bytes; per node it was every feed of the node.)
    assert history_budget.used_bytes(site.pk) >= 20 * DAY * 4 // 10
    stream.append(node.pk, [[old, {"x0": 1.0, "x1": 2.0, "x2": 3.0}], [now, {"x0": 5.0}]])
    drain(node)
    assert history_budget.used_bytes(site.pk) <= 2 << 20
    record = input_errors.record_key(input_errors.node_subject(node.pk))
    assert int(get_redis().hget(record, "count") or 0) == 3  # x0, x1 and x2 at the old time
    x0 = Sensor.objects.get(node=node, key="x0").feed
    service.commit_all(sync=True)
    meta, values = stored(x0)
    assert meta.start_time == now and values == [5.0]


def _hmget_count(monkeypatch) -> list[int]:
    """How many times the reaches are read from Redis (history_budget._reaches)."""
    calls = [0]
    real = history_budget._reaches

    def counted(files, now):
        calls[0] += 1
        return real(files, now)

    monkeypatch.setattr(history_budget, "_reaches", counted)
    return calls


def test_live_readings_read_the_reaches_from_redis_once_not_per_post(place, monkeypatch):
    # Issue #29: the reach check was a round trip of every post. A reach only moves back, so
    # once read it answers every later live reading of the file in memory.
    site, node, key, _feed = place()
    reads = _hmget_count(monkeypatch)
    with time_machine.travel(NOW, tick=False):
        assert bulk(key, [[NOW - 5, node.node_id, 1.0]]).content == b"ok"  # charged: 5 s
    charged = history_budget.used_bytes(site.pk)
    assert reads[0] == 1  # the file was never charged: read, then charged
    for i in range(1, 6):
        with time_machine.travel(NOW + 10 * i, tick=False):
            assert bulk(key, [[NOW + 10 * i - 5, node.node_id, 2.0]]).content == b"ok"
    assert reads[0] == 2  # one read found the stored reach; the next four posts none
    assert history_budget.used_bytes(site.pk) == charged  # and none of them cost anything


def test_posts_of_the_current_second_read_a_new_files_reach_once(place, monkeypatch):
    # A post without a time (or with the current second) is the first reading of a file never
    # charged: free, and its reach is written then (HSETNX), so the next posts of the file ask
    # Redis nothing. Before, nothing was written and every such post read the reach again
    # and ran the charge script for nothing (two round trips a post).
    site, node, key, _feed = place()
    reads = _hmget_count(monkeypatch)
    with time_machine.travel(NOW, tick=False):
        for _ in range(5):
            assert bulk(key, [[NOW, node.node_id, 1.0]]).content == b"ok"
        assert reads[0] == 1 and history_budget.used_bytes(site.pk) == 0
        # The reach written is the file's first reading: a reading before it is charged.
        assert bulk(key, [[NOW - 10, node.node_id, 1.0]]).content == b"ok"
    assert history_budget.used_bytes(site.pk) == 10 * 4 // 10


def test_a_reading_before_the_known_reach_is_still_charged(place, monkeypatch):
    # The reach this process knows is an upper bound: a reading before it goes to Redis and
    # is charged exactly as before, at the bound (4 s feed: a byte a second).
    site, node, key, _feed = place(interval=4)
    with time_machine.travel(NOW, tick=False):
        assert bulk(key, [[NOW, node.node_id, 1.0]]).content == b"ok"
        assert bulk(key, [[NOW, node.node_id, 1.0]]).content == b"ok"  # reach known: NOW
        reads = _hmget_count(monkeypatch)
        assert bulk(key, [[NOW - 1, node.node_id, 2.0]]).content == b"ok"
        assert reads[0] == 1 and history_budget.used_bytes(site.pk) == 1
        # Another process moved the reach further back meanwhile: this one's known reach
        # (NOW - 1) is still after it, and a reading between the two is free, as it is.
        history_budget.charge(site.pk, {node.pk: (NOW - 100, {"1"})}, NOW)
        assert history_budget.used_bytes(site.pk) == 100
        assert bulk(key, [[NOW - 50, node.node_id, 3.0]]).content == b"ok"
        assert history_budget.used_bytes(site.pk) == 100


def test_a_site_with_more_feed_files_than_a_cache_bound_keeps_every_known_reach(place, monkeypatch):
    # Issue #29: at 10,000 nodes x 5 feeds the reaches sat in one 10,000-entry cache, each was
    # evicted before its node's next post, and every post asked Redis again. A feed's file is
    # configuration (bounded by the site's feeds), so its reaches have a cache of their own.
    _site, node, key, feed = place()
    with time_machine.travel(NOW, tick=False):
        assert bulk(key, [[NOW, node.node_id, 1.0]]).content == b"ok"
    others = history_budget.File("f0", "", 0.4)
    for feed_id in range(feed.pk + 1, feed.pk + 1 + sensors_cache.MAX_ENTRIES + 1):
        history_budget._known_reaches(others).set((f"f{feed_id}", ""), float(NOW))
    reads = _hmget_count(monkeypatch)
    with time_machine.travel(NOW + 10, tick=False):
        assert bulk(key, [[NOW + 10, node.node_id, 2.0]]).content == b"ok"
    assert reads[0] == 0
    # A key with no feed yet is named by whoever holds a node key: its cache keeps the bound.
    pending = history_budget.File(f"k{node.pk}:new", "", 0.4)
    assert history_budget._known_reaches(pending).max_entries == sensors_cache.MAX_ENTRIES
