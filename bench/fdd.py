"""Fault detection benchmark: the findings rules over a simulated month, once fault-free and once
with faults injected at known times. Prints per rule: injected, found, detection delay, false
findings. See docs/BENCHMARKS.md "Fault detection"; the code is demo/fdd.py.

The demo's rooms as zones with office hours, a boiler, the demo plant (demo/plant.py) stepped
every minute on a simulated clock from a January Monday; readings through the real feed store,
relay changes as ActuatorCommand rows, in a scratch data dir and SQLite file (or
--database-url) and the Redis db given by --redis-db (flushed!). The rules run as the hourly
beat task does: each hour over the week before it.

Targets (issue #30): every injected fault found within a day of its start; at most one false
finding per rule per fault-free month.

    .venv/bin/python bench/fdd.py [--days 28] [--redis-db 12] [--seed 1] [--every-h 1]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import scratch_site  # noqa: E402  (bench/, the script's own folder)

MONDAY = datetime(2026, 1, 5, tzinfo=UTC)  # a past January Monday: local time is UTC
DAY, H = timedelta(days=1), timedelta(hours=1)


def month_faults(start: datetime, days: int):
    """One fault of each kind (the rooms' and the boiler's a week apart, the meters' and the
    solar pump's between them), those that start within `days`."""
    from demo import faults as k

    plan = [
        k.Fault(k.VALVE_STUCK_OPEN, "seminar-room", start + 2 * DAY + 10 * H),
        k.Fault(k.WINDOW_OPEN, "workshop", start + 8 * DAY + 9 * H),
        k.Fault(k.SENSOR_FLATLINE, "lecture-theatre", start + 15 * DAY + 7 * H),
        k.Fault(k.BOILER_SHORT_CYCLING, k.BOILER, start + 22 * DAY + 6.5 * H),
        k.Fault(k.NIGHT_BASE_LOAD, k.SITE, start + 3 * DAY + 18 * H),
        k.Fault(k.PV_SHADED, "pv-string-2", start + 11 * DAY + 6 * H),
        k.Fault(k.SOLAR_PUMP_FORCED_ON, k.SOLAR, start + 17 * DAY + 11 * H),
    ]
    return [f for f in plan if f.start < start + days * DAY]


def print_table(title: str, table) -> None:
    print(title)
    print(
        f"  {'rule':24} {'injected':>8} {'found':>6} {'delay (h)':>14} {'false':>6} {'knock-on':>8}"
    )
    for rule, row in table.items():
        delays = ", ".join(f"{d.total_seconds() / 3600:.0f}" for d in row.delays) or "-"
        print(
            f"  {rule:24} {row.injected:>8} {row.found:>6} {delays:>14} {row.false:>6} {row.knock_on:>8}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=28)
    parser.add_argument("--redis-db", type=int, default=12)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--every-h", type=float, default=1.0, help="hours between rule runs")
    parser.add_argument("--database-url")
    args = parser.parse_args()
    if not 1 <= args.days <= 62:
        parser.error("--days: 1 to 62")
    scratch_site.start(
        "bms-bench-fdd-", f"redis://127.0.0.1:6379/{args.redis_db}", database_url=args.database_url
    )
    from core.redis import get_redis
    from demo import fdd
    from demo.faults import FaultPlan

    get_redis().flushdb()
    rig = fdd.build()
    every = timedelta(hours=args.every_h)
    print(f"{args.days} simulated days from {MONDAY:%Y-%m-%d}, rooms {len(rig.zones)}, seed "
          f"{args.seed}, rules every {args.every_h:g} h; {os.cpu_count()} cores, load "
          f"{os.getloadavg()[0]:.1f}")  # fmt: skip
    for title, faults in (("fault-free", []), ("faults injected", month_faults(MONDAY, args.days))):
        fdd.reset()
        started = time.perf_counter()
        changes = fdd.run(rig, MONDAY, args.days, FaultPlan.of(faults), seed=args.seed)
        simulated = time.perf_counter() - started
        first = fdd.detect(MONDAY, args.days, every)
        checked = time.perf_counter() - started - simulated
        for f in faults:
            print(f"  injected {f.kind} in {f.target} at {f.start:%a %d %b %H:%M}")
        print_table(f"{title}: simulated in {simulated:.1f} s ({changes} relay changes), "
                    f"rules run in {checked:.1f} s", fdd.score(rig, faults, first))  # fmt: skip
    get_redis().flushdb()


if __name__ == "__main__":
    main()
