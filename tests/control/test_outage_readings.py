"""Readings keep reaching control during a database outage (issue 27, item 8): the ingest path
serves a node's key and sensors from what it last read when the database is away (its process
caches past their TTL), so a reading posted during the outage reaches its feed's last value in
Redis and the control tick, which runs on the cached configuration, uses it: the zone does not
fall into sensor fallback after 15 minutes. Outages as in test_database_outage.py."""

from __future__ import annotations

from collections import OrderedDict
from datetime import timedelta

import pytest
from django.utils import timezone

from control import runtime
from control.runner import run_tick
from sensors import cache
from sensors.ingest import stream
from sensors.ingest.drain import drain_shard
from tests.wsgi_client import WsgiClient

from . import factories as f
from .test_database_outage import board, database_unavailable  # noqa: F401  (fixture)

pytestmark = pytest.mark.django_db(transaction=True)


def expire_process_caches() -> None:
    """Every cached node key and sensor map past its TTL, as after a minute of outage."""
    for c in cache._caches:
        with c._lock:
            c._data = OrderedDict((k, (0.0, v)) for k, (_, v) in c._data.items())


def post(client: WsgiClient, key: str, t: float, value: float) -> int:
    body = {"node": "roomnode", "time": int(t), "values": {"Hall-t": value}}
    return client.post(
        "/api/v1/readings", body, content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {key}",
    ).status_code  # fmt: skip


def test_a_reading_posted_during_the_outage_reaches_the_tick(redis_client, board):  # noqa: F811
    node, key = f.node()
    valve = f.relay("Hall valve", board, coil=7)
    zone = f.zone("Hall", valve)
    cache.check_generation()  # this process has seen the configuration it is about to cache
    client = WsgiClient()
    later = timezone.now()
    t0 = later - timedelta(minutes=20)
    assert post(client, key, t0.timestamp(), 18.0) in (200, 201, 202)
    drain_shard(stream.shard_of(node.pk))
    run_tick(t0)  # configuration cached, the node's key and sensors cached by the ingest path
    assert runtime.load_zones([zone.pk])[zone.pk]["temperature"] == 18.0
    expire_process_caches()
    with database_unavailable():
        assert post(client, key, later.timestamp() - 30, 19.5) in (200, 201, 202)
        report = drain_shard(stream.shard_of(node.pk))
        assert report.dropped == 0 and not report.stopped
        tick = run_tick(later)
        assert tick["offline"]
    state = runtime.load_zones([zone.pk])[zone.pk]
    assert state["temperature"] == 19.5
    assert state["mode"] != "sensor_fallback" and "stale" not in state["reason"]


def test_an_unknown_key_during_the_outage_is_still_a_503(redis_client):
    f.node()
    expire_process_caches()
    with database_unavailable():
        assert post(WsgiClient(), "not-a-key-" + "x" * 22, 0, 1.0) in (401, 503)


def test_a_stale_kept_cache_is_still_bounded(redis_client):
    cache.check_generation()  # no config change clears it mid-test
    kept = cache.ProcessCache(ttl_s=-1.0, max_entries=2, keep_stale=True)  # all expired
    for k in ("a", "b", "c"):
        kept.set(k, k.upper())
    assert len(kept) == 2 and kept.get("c") is None  # expired for ordinary reads
    assert kept.stale("c") == "C" and kept.stale("a") is None  # the oldest was evicted
