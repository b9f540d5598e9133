"""Find-the-waste benchmark. Prints its figures; see docs/BENCHMARKS.md "Findings".

One site of --zones zones (default 200), each with a valve, a weekday 08:00–17:00 schedule and a
temperature feed holding a week of readings at 1 minute in a real PHPFina file (10,080 points),
and --plants heating plants (default 20) whose boilers each start 9 times an hour for 2 hours a
day. Every valve is switched on and off on each weekday (and left on to 21:00 in a quarter of
the zones, on Mondays; one zone in ten has its sensor stuck at 19.0 °C), so the audit log holds 10 rows a valve a week plus the boilers' 504.

Times `findings.evaluate.evaluate` over that week, which is what the hourly beat task runs
(every rule, every zone and plant), and `find_waste` over four such weeks: median and max of
--repeat runs after one warm-up, and the database queries of one run.

Scratch data dir and SQLite file (or --database-url), and the Redis db given by --redis-db
(flushed!).

    .venv/bin/python bench/findings.py [--redis-db 11] [--repeat 5] [--zones 200] [--plants 20]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import scratch_site  # noqa: E402  (bench/, the script's own folder)

MONDAY = datetime(2026, 1, 5, tzinfo=UTC)  # a past January week: local time is UTC
H = timedelta(hours=1)


def build(zones: int, plants: int) -> None:
    from control.models import ActuatorCommand, HeatingPlant, Schedule, SchedulePeriod, Zone
    from energy.models import FuelRate
    from feeds.models import Feed
    from feeds.store import service as feed_service
    from sensors.models import Actuator, Node, Sensor, Site

    site = Site.objects.create(name="Bench", slug="bench")
    FuelRate.objects.create(site=site, fuel="gas", price_per_unit=0.07)
    node = Node(name="rooms", site=site)
    node.set_new_key()
    node.save()
    schedule = Schedule.objects.create(name="Office", site=site)
    for day in range(5):
        SchedulePeriod.objects.create(schedule=schedule, weekday=day, start="08:00", end="17:00")
    rows = []
    for i in range(zones):
        feed = Feed.objects.create(name=f"z{i} temperature", tag="bench", unit="°C", interval=60)
        sensor = Sensor.objects.create(node=node, key=f"z{i}", kind="temperature", feed=feed)
        valve = Actuator.objects.create(name=f"z{i} valve", kind="valve", coil=i + 1)
        zone = Zone.objects.create(
            name=f"Zone {i}", slug=f"z{i}", site=site, schedule=schedule,
            temperature_sensor=sensor, optimum_start=False,
        )  # fmt: skip
        zone.actuators.set([valve])
        for day in range(5):
            on = MONDAY + day * 24 * H + 8 * H
            off = on + (13 if i % 4 == 0 and day == 0 else 9) * H
            rows += [
                ActuatorCommand(actuator=valve, state=True, strategy="schedule", reason="b",
                                requested_at=on),
                ActuatorCommand(actuator=valve, state=False, strategy="schedule", reason="b",
                                requested_at=off),
            ]  # fmt: skip
        t0 = int(MONDAY.timestamp())
        feed_service.log_points(
            # one zone in ten has a sensor stuck at 19.0 °C: a flat line while heated
            (feed.pk, t0 + m * 60, 19.0 if i % 10 == 0 else 18.0 + (m % 600) / 300)
            for m in range(7 * 1440)
        )
    for p in range(plants):
        boiler = Actuator.objects.create(name=f"boiler {p}", kind="boiler", coil=10_000 + p)
        HeatingPlant.objects.create(name=f"plant {p}", boiler=boiler, site=site)
        for day in range(7):
            for k in range(18):
                at = MONDAY + day * 24 * H + 6 * H + k * timedelta(minutes=60 / 9)
                rows += [
                    ActuatorCommand(actuator=boiler, state=True, strategy="heating_plant",
                                    reason="b", requested_at=at),
                    ActuatorCommand(actuator=boiler, state=False, strategy="heating_plant",
                                    reason="b", requested_at=at + timedelta(minutes=3)),
                ]  # fmt: skip
    ActuatorCommand.objects.bulk_create(rows, batch_size=2000)
    feed_service.commit_all(sync=True)


def timed(fn, repeat: int) -> tuple[float, float, int]:
    from django.db import connection, reset_queries
    from django.test.utils import CaptureQueriesContext

    fn()  # warm-up
    runs = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - started)
    reset_queries()
    with CaptureQueriesContext(connection) as queries:
        fn()
    return statistics.median(runs), max(runs), len(queries)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis-db", type=int, default=11)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--zones", type=int, default=200)
    parser.add_argument("--plants", type=int, default=20)
    parser.add_argument("--database-url")
    args = parser.parse_args()
    scratch_site.start(
        "bms-bench-findings-",
        f"redis://127.0.0.1:6379/{args.redis_db}",
        database_url=args.database_url,
    )
    from django.core.management import call_command

    from core.redis import get_redis
    from findings.evaluate import evaluate
    from findings.models import Finding

    get_redis().flushdb()
    build(args.zones, args.plants)
    week = (MONDAY, MONDAY + 7 * H * 24)
    median, worst, queries = timed(lambda: evaluate(*week, now=week[1]), args.repeat)
    print(f"zones {args.zones}, plants {args.plants}, one week of history")
    print(f"evaluate (every rule, one week): median {median * 1000:.0f} ms, "
          f"max {worst * 1000:.0f} ms, {queries} queries")  # fmt: skip
    by_rule = {r: Finding.objects.filter(rule=r).count() for r in sorted(
        Finding.objects.values_list("rule", flat=True).distinct())}  # fmt: skip
    print(f"findings open: {by_rule}")
    started = time.perf_counter()
    call_command("find_waste", "--from", "2026-01-05", "--to", "2026-02-02", verbosity=0)
    print(f"find_waste over 4 weeks: {time.perf_counter() - started:.2f} s")
    get_redis().flushdb()


if __name__ == "__main__":
    main()
