"""Accumulators never restart from zero, with the real Redis flushed between
posts (FLUSHDB: what a Redis that restarted without its data looks like)."""

from __future__ import annotations

import time

import pytest

from feeds.models import Feed
from feeds.store import service
from sensors.ingest.processing import ingest_rows
from sensors.models import PulseCounterState, Sensor
from tests.sensors.conftest import make_node

pytestmark = pytest.mark.django_db

# Recent (commits refuse points older than the backfill bound), aligned to 10 s.
T0 = int(time.time()) // 10 * 10 - 3600


def committed(redis_client) -> None:
    service.commit_all(sync=True)
    assert redis_client.hlen("feeds:last") > 0  # Redis knew the last values...
    redis_client.flushdb()  # ...and forgets everything


def test_power_to_kwh_onto_an_imported_kwh_feed_continues_from_its_total(redis_client):
    node, _ = make_node()
    kwh = Feed.objects.create(name="kwh", tag="n", interval=10)
    # An imported feed: its file ends at 1234.5 kWh, Redis has never heard of it.
    service.log_points([(kwh.pk, T0 - 100, 1234.0), (kwh.pk, T0 - 10, 1234.5)])
    committed(redis_client)
    assert service.last_value(kwh.pk) == (T0 - 10, 1234.5)  # from the file
    Sensor.objects.create(
        node=node, key="p", kind="power", processes=[{"process": "power_to_kwh", "feed": kwh.pk}]
    )
    ingest_rows(node.pk, [[T0, {"p": 3600.0}], [T0 + 10, {"p": 3600.0}]])
    # emoncms power_to_kwh: 10 s since the file's last point, then 10 s more, at 1 Wh/s.
    assert service.last_value(kwh.pk)[1] == pytest.approx(1234.52, abs=1e-4)


def test_power_to_kwh_continues_after_redis_loses_everything(redis_client):
    node, _ = make_node()
    kwh = Feed.objects.create(name="kwh", tag="n", interval=10)
    Sensor.objects.create(
        node=node, key="p", kind="power", processes=[{"process": "power_to_kwh", "feed": kwh.pk}]
    )
    ingest_rows(node.pk, [[T0 + 10 * i, {"p": 3600.0}] for i in range(7)])  # 0.06 kWh
    committed(redis_client)
    ingest_rows(node.pk, [[T0 + 70, {"p": 3600.0}], [T0 + 80, {"p": 3600.0}]])
    assert service.last_value(kwh.pk)[1] == pytest.approx(0.08, abs=1e-5)


def test_timevalue_json_answers_the_files_last_value(redis_client, engineer_api):
    feed = Feed.objects.create(name="imported", tag="n", interval=10)
    service.log_points([(feed.pk, T0, 42.0), (feed.pk, T0 + 10, 43.5)])
    committed(redis_client)
    body = engineer_api.get(f"/feed/timevalue.json?id={feed.pk}").json()
    assert body == {"time": T0 + 10, "value": 43.5}


def pulse_sensor(node, feed, **params):
    return Sensor.objects.create(
        node=node, key="pulse", kind="pulse", feed=feed,
        params={"pulses_per_unit": 1, **params},
    )  # fmt: skip


def test_a_pulse_counter_total_survives_a_lost_redis(redis_client):
    node, _ = make_node()
    feed = Feed.objects.create(name="gas", tag="n", interval=10)
    sensor = pulse_sensor(node, feed)
    ingest_rows(node.pk, [[T0 + 10 * i, {"pulse": 1000 + 5 * i}] for i in range(7)])  # +30
    assert PulseCounterState.objects.get(sensor=sensor).total == 30.0
    committed(redis_client)
    ingest_rows(node.pk, [[T0 + 70, {"pulse": 1040}], [T0 + 80, {"pulse": 1042}]])
    # Was: the counter started again at 0. Now 30 + 10 + 2.
    assert service.last_value(feed.pk)[1] == 42.0


def test_pulse_state_saved_a_while_ago_loses_no_pulse(redis_client):
    """The row is written at most every PULSE_SAVE_S: an older row still counts every pulse,
    the count being cumulative."""
    node, _ = make_node()
    feed = Feed.objects.create(name="gas", tag="n", interval=10)
    sensor = pulse_sensor(node, feed)
    ingest_rows(node.pk, [[T0, {"pulse": 100}]])
    ingest_rows(node.pk, [[T0 + 10, {"pulse": 120}], [T0 + 20, {"pulse": 130}]])
    row = PulseCounterState.objects.get(sensor=sensor)
    assert (row.t, row.count) == (T0, 100)  # not yet 60 s of readings: not rewritten
    redis_client.flushdb()
    ingest_rows(node.pk, [[T0 + 30, {"pulse": 135}]])
    assert service.last_value(feed.pk)[1] == 35.0


def test_a_single_zero_between_counts_adds_no_spike(redis_client):
    node, _ = make_node()
    feed = Feed.objects.create(name="elec", tag="n", interval=10)
    pulse_sensor(node, feed)
    counts = [5000, 5004, 0, 5010, 5011]
    ingest_rows(node.pk, [[T0 + 10 * i, {"pulse": c}] for i, c in enumerate(counts)])
    assert [v for _t, v in service.read(feed.pk, T0, T0 + 40, 10)] == [0, 4, 4, 10, 11]


def test_signed_16_bit_counts_from_emonhub_lose_no_pulse(redis_client):
    node, _ = make_node()
    feed = Feed.objects.create(name="elec", tag="n", interval=10)
    pulse_sensor(node, feed, counter_bits=16)
    # 32,000 up to 66,036 pulses as emonhub's datacode h sends them: past 32767, negative.
    counts = [32_000 + 2_000 * i for i in range(18)] + [66_036]
    signed = [((c + 32768) % 65536) - 32768 for c in counts]
    assert min(signed) < 0
    ingest_rows(node.pk, [[T0 + 10 * i, {"pulse": c}] for i, c in enumerate(signed)])
    assert service.last_value(feed.pk)[1] == 34_036
