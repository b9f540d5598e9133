"""Fault scenarios shared by the short tests (tests/reliability) and the soak runs (tests/soak):
the same code, run with more faults and more readings there."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from django.conf import settings

from feeds.models import Feed
from feeds.store import phpfina
from sensors.models import Node, Sensor
from tests.reliability.harness import (
    Sender,
    Site,
    queue_state,
    redelivered,
    settled,
    task_errors,
)
from tests.wait import wait_for

INTERVAL = 10
POWER_W = 3600.0  # constant: every 10 s step adds exactly 0.01 kWh, whatever the order
KWH_PER_STEP = POWER_W * INTERVAL / 3_600_000


@dataclass
class Gateway:
    node: Node
    key: str
    power: Feed  # log_to_feed of "p" (the reading's index: each slot's value is unique)
    energy: Feed  # power_to_kwh of "e" (constant power): an accumulating feed
    rows: list[tuple[int, dict]] = field(default_factory=list)


def make_gateway(name: str, readings: int, t0: int) -> Gateway:
    node = Node(name=name, interval=INTERVAL)
    key = node.set_new_key()
    node.save()
    power = Feed.objects.create(name=f"{name}:p", tag=name, interval=INTERVAL, unit="W")
    energy = Feed.objects.create(name=f"{name}:kwh", tag=name, interval=INTERVAL, unit="kWh")
    Sensor.objects.create(
        node=node, key="p", feed=power, processes=[{"process": "log_to_feed", "feed": power.pk}]
    )
    Sensor.objects.create(
        node=node, key="e", processes=[{"process": "power_to_kwh", "feed": energy.pk}]
    )
    rows = [(t0 + INTERVAL * i, {"p": float(i), "e": POWER_W}) for i in range(readings)]
    return Gateway(node, key, power, energy, rows)


def start_time(readings: int) -> int:
    """Two days back, so the whole run is in the past (no future refusals), slot-aligned."""
    t0 = int(time.time()) - 2 * 86400 - readings * INTERVAL
    return t0 - t0 % INTERVAL


@dataclass
class Result:
    sent: int = 0
    accepted: int = 0
    found: int = 0
    extra: int = 0
    wrong: int = 0
    kwh_points: int = 0
    kwh_wrong: int = 0
    kwh_final: float = 0.0
    kwh_expected: float = 0.0
    requests: int = 0
    refused: dict[int, int] = field(default_factory=dict)
    faults: int = 0
    redelivered: int = 0
    task_errors: int = 0
    missing: list[str] = field(default_factory=list)  # where lost readings were, for the report
    seconds: float = 0.0

    def summary(self) -> str:
        return (
            f"faults={self.faults} sent={self.sent} accepted={self.accepted} found={self.found} "
            f"extra={self.extra} wrong={self.wrong} kwh={self.kwh_final:.4f}/"
            f"{self.kwh_expected:.4f} kwh_points={self.kwh_points} kwh_wrong={self.kwh_wrong} "
            f"requests={self.requests} refused={self.refused} redelivered={self.redelivered} "
            f"task_errors={self.task_errors} "
            f"missing={self.missing} "
            f"seconds={self.seconds:.0f}"
        )


def check_files(gateway: Gateway, accepted: list[tuple[int, dict]], result: Result) -> None:
    """Every accepted reading in its feed once with its value; kWh never over-counted."""
    directory = settings.BMS_FEED_DIR
    for feed in (gateway.power, gateway.energy):
        meta = phpfina.check_files(
            phpfina.meta_path(directory, feed.pk), phpfina.dat_path(directory, feed.pk)
        )  # raises CorruptFeed on a bad header or a torn file
        assert meta.interval == INTERVAL
    meta = phpfina.read_meta(directory, gateway.power.pk)
    power = np.asarray(phpfina.open_data(directory, gateway.power.pk))
    times = np.array([t for t, _ in accepted], dtype=np.int64)
    values = np.array([v["p"] for _, v in accepted], dtype=np.float32)
    slots = (times - meta.start_time) // INTERVAL
    inside = (slots >= 0) & (slots < len(power))  # before the file's start: not stored
    stored = np.full(len(slots), np.nan, dtype=np.float32)
    stored[inside] = power[slots[inside]]
    result.found += int(np.count_nonzero(np.isfinite(stored)))
    lost = times[~np.isfinite(stored)]
    if len(lost):
        result.missing.append(f"{gateway.node.name}: {len(lost)} from t={lost[0]} to t={lost[-1]}")
    result.wrong += int(np.count_nonzero(np.isfinite(stored) & (stored != values)))
    result.extra += int(np.count_nonzero(np.isfinite(power))) - len(set(times.tolist()))

    # The kWh slot of reading i must hold i steps' worth (no double count at any point).
    kmeta = phpfina.read_meta(directory, gateway.energy.pk)
    kwh = np.asarray(phpfina.open_data(directory, gateway.energy.pk), dtype=np.float64)
    present = np.flatnonzero(np.isfinite(kwh))
    index = (kmeta.start_time + present * INTERVAL - gateway.rows[0][0]) // INTERVAL
    expected = index * KWH_PER_STEP
    result.kwh_points += len(present)
    result.kwh_wrong += int(np.count_nonzero(np.abs(kwh[present] - expected) > 1e-3))
    if len(present):
        result.kwh_final += float(kwh[present[-1]])
    result.kwh_expected += (len(gateway.rows) - 1) * KWH_PER_STEP


def run_with_faults(
    site: Site,
    gateways: list[Gateway],
    inject: Callable[[int], None],
    faults: int,
    gap_s: tuple[float, float],
    batch: int = 20,
    settle_s: float = 120,
    seed: int = 1,
    span_s: float | None = None,
) -> Result:
    """Post every gateway's rows while `inject(n)` runs `faults` times at random moments; then
    let the site settle (queues drained, buffer committed) and check the files."""
    rng = random.Random(seed)
    started = time.monotonic()
    # Spread the posts over the whole fault period: ingest is sustained while faults land.
    # `span_s`: that period when the faults themselves last (an outage), not just the gaps.
    posts = max(len(g.rows) for g in gateways) / batch
    pace_s = (span_s if span_s is not None else faults * sum(gap_s) / 2) / posts
    senders = [Sender(site, g.key, g.node.name, g.rows, batch, pace_s) for g in gateways]
    for sender in senders:
        sender.start()
    result = Result()
    for n in range(faults):
        # A real pause: faults land at random moments while the senders post to real processes.
        time.sleep(rng.uniform(*gap_s))
        inject(n)
        result.faults += 1
    for sender in senders:
        sender.join(timeout=600)
        assert not sender.is_alive(), "a sender never got its readings accepted"
    client = site.redis.client()
    wait_for(
        lambda: settled(client),
        settle_s,
        "the queues to drain and the buffer to commit",
        state=lambda: {**queue_state(client), "exited": site.exited()},
    )
    result.seconds = time.monotonic() - started
    for gateway, sender in zip(gateways, senders, strict=True):
        result.sent += len(gateway.rows)
        result.accepted += len(sender.accepted)
        result.requests += sender.requests
        for status, count in sender.refused.items():
            result.refused[status] = result.refused.get(status, 0) + count
        check_files(gateway, sender.accepted, result)
    result.redelivered = sum(redelivered(p) for p in site.log_dir.glob("worker*.log"))
    result.task_errors = sum(task_errors(p) for p in site.log_dir.glob("worker*.log"))
    return result
