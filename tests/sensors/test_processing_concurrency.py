"""Parallel drains of one node's requests count every reading once.

Worker concurrency 2 and the web's kicks beside beat's safety net start several drains of one
shard at once (sensors/ingest/drain.py). Four threads drain the same node's requests at once;
a twin node gets them once, in order, straight through ingest_rows. The pulse total and the
kWh integral (accumulating state in Redis) must come out identical: the shard's lease lets
one drain at a time process a node, and no request is processed twice or skipped.
"""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection

from feeds.models import Feed
from feeds.store import service
from sensors.ingest import stream as ingest_stream
from sensors.ingest.drain import drain_shard
from sensors.ingest.processing import ingest_rows
from sensors.models import Sensor
from tests.sensors.conftest import make_node

T0 = 1_700_000_000
THREADS = 4


def configured_node(name: str, node_id: int):
    node, _ = make_node(name, node_id)
    gas = Feed.objects.create(name="gas", tag=name, interval=10)
    kwh = Feed.objects.create(name="kwh", tag=name, interval=10)
    Sensor.objects.create(
        node=node, key="pulse", kind="pulse", feed=gas, params={"pulses_per_unit": 10}
    )
    Sensor.objects.create(
        node=node, key="p", kind="power", processes=[{"process": "power_to_kwh", "feed": kwh.pk}]
    )
    return node, gas.pk, kwh.pk


def batches() -> list[list]:
    rows = [
        [T0 + 10 * i, {"pulse": (i * i) % 7 + 3 * i, "p": float((i * 37) % 900)}]
        for i in range(300)
    ]
    return [rows[i : i + 6] for i in range(0, len(rows), 6)]


def buffered(feed_id: int) -> list[tuple[int, float]]:
    records = service.get_buffer().pending(feed_id)
    return sorted(zip(records["t"].tolist(), records["v"].tolist(), strict=True))


@pytest.mark.django_db(transaction=True)
def test_parallel_drains_of_one_node_equal_one_at_a_time(redis_client):
    ref_node, ref_gas, ref_kwh = configured_node("reference", 20)
    node, gas, kwh = configured_node("parallel", 21)
    for batch in batches():
        ingest_rows(ref_node.pk, batch)

    for batch in batches():
        ingest_stream.append(node.pk, batch)
    stream = ingest_stream.stream_key(node.pk)
    start = threading.Barrier(THREADS)
    errors: list[BaseException] = []
    drained = []

    def worker() -> None:
        try:
            start.wait()
            while redis_client.xlen(stream):
                report = drain_shard(ingest_stream.shard_of(node.pk), budget_s=0.5)
                drained.append(report)
                if report.busy:
                    time.sleep(0.005)  # a back-off: another thread's drain holds the shard
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=120)
    assert errors == []
    assert sum(r.requests for r in drained) == len(batches())  # each request once
    assert sum(r.dropped for r in drained) == 0
    assert len(buffered(kwh)) == len(buffered(ref_kwh)) == 300
    assert buffered(kwh) == buffered(ref_kwh)
    assert buffered(gas) == buffered(ref_gas)
    assert service.last_value(gas)[1] == service.last_value(ref_gas)[1] > 0
