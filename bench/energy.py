"""Energy benchmark. Prints its figures; see docs/BENCHMARKS.md "Energy".

One site of 50 buildings, each with two floors of two rooms (350 nodes) and 10 meters (500):
a main electricity meter on power, gas and water registers (cumulative), a cumulative
sub-meter per floor, a power sub-meter per room and a virtual "unmetered" electricity meter
(main - floors). A year of daily results (MeterDay, 182,500 rows), a monthly energy model
(ExpectedUse) per building for electricity and gas, a baseline period per building and a year
of hourly outside temperature in a real PHPFina file (degree days are read from it on every
request).

Timed through Django's test client as a viewer (full middleware, session, templates, DRF):
the staff energy page for a building over the year (by month and by day) and over the default
30 days, GET /api/v1/energy/league over the year, GET /api/v1/energy/nodes/<id>/consumption
over the year (by day and by month). Median and max of --repeat runs after one warm-up, and the
database queries of one request. Target: < 1 s each.

Scratch data dir and SQLite file (or --database-url), and the Redis db given by --redis-db
(flushed!).

    .venv/bin/python bench/energy.py [--redis-db 11] [--repeat 10] [--database-url URL]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from datetime import date, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import scratch_site  # noqa: E402  (bench/, the script's own folder)

BUILDINGS = 50
FIRST, LAST = date(2025, 1, 1), date(2025, 12, 31)
TARGET_S = 1.0


def cpu_model() -> str:
    """What lscpu calls "Model name"."""
    with open("/proc/cpuinfo") as fh:
        for line in fh:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown CPU"


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def build_site() -> dict:
    """The site, its tree, a year of MeterDay rows, the model and the temperature feed."""
    from django.conf import settings
    from django.contrib.auth.models import Group, User

    from core.roles import VIEWERS
    from energy.models import (
        EnergySite,
        ExpectedUse,
        FuelRate,
        Meter,
        MeterDay,
        MeterNode,
        VirtualTerm,
    )
    from feeds.models import Feed
    from feeds.store import phpfina
    from sensors.models import Site

    t0 = time.perf_counter()
    viewer = User.objects.create_user("bench-viewer", password="x", is_staff=True)
    viewer.groups.add(Group.objects.get(name=VIEWERS))
    site = Site.objects.create(name="Bench campus", slug="bench", time_zone="Europe/London")
    tz = ZoneInfo(site.time_zone)

    # A year of hourly outside temperature: 8 °C mean, ±7 °C over the year, ±3 °C over a day.
    temp = Feed.objects.create(name="outside", tag="weather", interval=3600)
    start = int(datetime(FIRST.year, 1, 1, tzinfo=tz).timestamp()) - 86400
    hours = np.arange(start, start + 368 * 86400, 3600)
    yearly = -7 * np.cos((hours - start) / (365 * 86400) * 2 * np.pi)
    daily = -3 * np.cos((hours % 86400) / 86400 * 2 * np.pi)
    phpfina.write_points(settings.BMS_FEED_DIR, temp.pk, 3600, hours.tolist(),
                         (8 + yearly + daily).tolist(), now=hours[-1] + 3600)  # fmt: skip
    EnergySite.objects.create(site=site, outside_temperature_feed=temp)
    FuelRate.objects.create(site=site, fuel="electricity", price_per_unit=0.28)
    FuelRate.objects.create(site=site, fuel="gas", price_per_unit=0.07)

    rng = np.random.default_rng(17)
    days = [FIRST + timedelta(days=i) for i in range((LAST - FIRST).days + 1)]
    hdd = np.array(
        [max(0.0, 15.5 - (8 - 7 * np.cos(i / 365 * 2 * np.pi))) for i in range(len(days))]
    )
    meter_days: list[MeterDay] = []
    expected: list[ExpectedUse] = []
    buildings = []
    counts = {"power": 0, "cumulative": 0, "virtual": 0}

    def meter(node, name, fuel, source, daily_values=None, counts_to_node=True) -> Meter:
        feed = None
        if source != "virtual":
            feed = Feed.objects.create(
                name=f"meter {sum(counts.values())}", tag="energy", interval=600
            )
        m = Meter.objects.create(node=node, name=name, fuel=fuel, source=source, feed=feed,
                                 counts_to_node=counts_to_node)  # fmt: skip
        counts[source] += 1
        if daily_values is not None:
            gap = rng.random(len(days)) < 0.003  # a few lost days
            meter_days.extend(
                MeterDay(meter=m, day=d, value=None if g else float(v),
                         status="gap" if g else ("estimated" if v < 0.5 else "measured"))
                for d, v, g in zip(days, daily_values, gap, strict=True)
            )  # fmt: skip
        return m

    for b in range(BUILDINGS):
        area = float(rng.integers(800, 12000))
        building = MeterNode.objects.create(
            site=site, name=f"Building {b:02d}", kind="building", floor_area_m2=area,
            tm46_category=("general_office", "schools", "university", "workshop")[b % 4],
            baseline_start=FIRST, baseline_end=date(2025, 3, 31),
        )  # fmt: skip
        buildings.append(building)
        elec_day = area * 0.25 * (1 + 0.1 * rng.standard_normal(len(days)))
        gas_day = area * (0.05 + 0.04 * hdd) * (1 + 0.05 * rng.standard_normal(len(days)))
        main = meter(building, "Main electricity", "electricity", "power", elec_day)
        meter(building, "Gas", "gas", "cumulative", gas_day)
        meter(building, "Water", "water", "cumulative", area * 0.004 * np.ones(len(days)))
        floors = []
        for f in range(2):
            floor = MeterNode.objects.create(site=site, parent=building, name=f"Floor {f}",
                                             kind="floor")  # fmt: skip
            floors.append(meter(floor, "Floor electricity", "electricity", "cumulative",
                                elec_day * 0.4))  # fmt: skip
            for r in range(2):
                room = MeterNode.objects.create(site=site, parent=floor, name=f"Room {f}.{r}",
                                                kind="room")  # fmt: skip
                meter(room, "Room electricity", "electricity", "power", elec_day * 0.15)
        rest = meter(building, "Unmetered electricity", "electricity", "virtual",
                     elec_day * 0.2, counts_to_node=False)  # fmt: skip
        VirtualTerm.objects.create(meter=rest, source=main, sign=1)
        for fm in floors:
            VirtualTerm.objects.create(meter=rest, source=fm, sign=-1)
        for month in range(1, 13):
            m_first = date(2025, month, 1)
            m_last = (date(2025, month + 1, 1) if month < 12 else date(2026, 1, 1)) - timedelta(1)
            idx = slice((m_first - FIRST).days, (m_last - FIRST).days + 1)
            for fuel, series in (("electricity", elec_day), ("gas", gas_day)):
                expected.append(ExpectedUse(node=building, fuel=fuel, start=m_first, end=m_last,
                                            value=float(series[idx].sum() * 1.05)))  # fmt: skip
    MeterDay.objects.bulk_create(meter_days, batch_size=5000)
    ExpectedUse.objects.bulk_create(expected)
    print(f"built in {time.perf_counter() - t0:.1f} s: {BUILDINGS} buildings, "
          f"{MeterNode.objects.count()} nodes, {Meter.objects.count()} meters "
          f"({counts['power']} power, {counts['cumulative']} cumulative, "
          f"{counts['virtual']} virtual), {MeterDay.objects.count():,} meter-days, "
          f"{ExpectedUse.objects.count()} model rows")  # fmt: skip
    return {"site": site, "viewer": viewer, "building": buildings[len(buildings) // 2]}


def timed(client, path: str, repeat: int) -> tuple[float, float, int]:
    """Median and max seconds over `repeat` GETs after one warm-up; queries of one request."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    connection.queries_log.clear()  # a full log (9,000 entries) would count nothing new
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(path)
    queries = len(ctx.captured_queries)  # now: the next request clears the log
    assert response.status_code == 200, (path, response.status_code, response.content[:300])
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        response = client.get(path)
        times.append(time.perf_counter() - t0)
        assert response.status_code == 200
    return statistics.median(times), max(times), queries


def run(data: dict, repeat: int) -> bool:
    from django.test import Client

    client = Client()
    client.force_login(data["viewer"])
    site, node = data["site"].pk, data["building"].pk
    year = f"start={FIRST}&end={LAST}"
    cases = [
        ("page, a building, year by month", f"/staff/energy/?site={site}&node={node}&{year}&period=month"),
        ("page, a building, year by day", f"/staff/energy/?site={site}&node={node}&{year}&period=day"),
        ("page, default (30 days by day)", f"/staff/energy/?site={site}&node={node}"),
        ("API league, year", f"/api/v1/energy/league?site={site}&{year}"),
        ("API consumption, year by day", f"/api/v1/energy/nodes/{node}/consumption?fuel=electricity&period=day&{year}"),
        ("API consumption, year by month", f"/api/v1/energy/nodes/{node}/consumption?fuel=gas&period=month&{year}"),
    ]  # fmt: skip
    ok = True
    print(f"\n{repeat} timed runs each after one warm-up (Django test client, viewer):")
    print(f"  {'case':<36} {'median':>9} {'max':>9} {'queries':>8}")
    for label, path in cases:
        median, worst, queries = timed(client, path, repeat)
        ok &= worst < TARGET_S
        verdict = "ok" if worst < TARGET_S else f"over the {TARGET_S:.0f} s target"
        print(
            f"  {label:<36} {median * 1000:7.0f} ms {worst * 1000:7.0f} ms {queries:8d}  {verdict}"
        )
    return ok


def profile(data: dict, path_kind: str) -> None:
    import cProfile
    import pstats

    from django.test import Client

    client = Client()
    client.force_login(data["viewer"])
    site, node = data["site"].pk, data["building"].pk
    path = {
        "page": f"/staff/energy/?site={site}&node={node}&start={FIRST}&end={LAST}&period=day",
        "league": f"/api/v1/energy/league?site={site}&start={FIRST}&end={LAST}",
    }[path_kind]
    client.get(path)
    prof = cProfile.Profile()
    prof.enable()
    client.get(path)
    prof.disable()
    pstats.Stats(prof).sort_stats("cumulative").print_stats(25)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--redis-db", type=int, default=11, help="Redis db to use (flushed)")
    parser.add_argument("--repeat", type=int, default=10, help="timed runs per case")
    parser.add_argument("--database-url", help="default: a scratch SQLite file")
    parser.add_argument("--profile", choices=["page", "league"], help="cProfile one request")
    args = parser.parse_args()

    base = scratch_site.start(
        "bench-energy-", f"redis://127.0.0.1:6379/{args.redis_db}", database_url=args.database_url
    )
    from django.db import connection

    from core.redis import get_redis

    redis_client = get_redis()
    redis_client.flushdb()
    print(f"data dir {base}; database {connection.vendor}; Redis db {args.redis_db}")
    print(f"machine: nproc {os.cpu_count()}, {cpu_model()}, load {load()}")
    try:
        data = build_site()
        ok = run(data, args.repeat)
        if args.profile:
            profile(data, args.profile)
        print(f"load at the end {load()}")
        print("\nall under the target" if ok else "\nSOME CASES OVER THE TARGET")
    finally:
        redis_client.flushdb()
        import shutil

        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
