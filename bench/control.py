"""Control tick benchmark: 500 zones, 1,000 actuators on real pymodbus relay boards.

Runs in a scratch SQLite database and data dir (Redis: --redis-url, a database of its own), with
the relay boards served by a separate process so their work does not count against the tick.
Measures, each over --runs ticks:
  1. first tick: every actuator is written, read back and audited (1,000 commands);
  2. steady tick: nothing changes, every coil is still read back (the fault/reboot check);
  3. tick with 10 % of the zones changing;
  4. the evaluator alone (pure, no I/O): per zone and for the whole site.
With --weather N (default 8) weather-compensated plants as well: half write a holding register
(an analogue output module), half drive a three-point valve (two relays), each with its own
boiler relay and flow sensor, fed by every N-th zone. Their valve pulses run between ticks (as
with a 30 s tick); the bench waits for them outside the timed tick.
Every zone has open-window detection with its defaults (control/engine/open_window.py), and
with --sources N (default 4) a heat main of N sources in lead/lag sequence (and, from 3
sources, a thermal store) is fed by every zone.
Target: one tick for 500 zones / 1,000 actuators < 1 s.

Each run ends with the cost per zone: the steady tick's CPU and the evaluator's (this thread's
CPU time, median of its passes: what a loaded machine does not inflate). With several sizes
(`--zones 500,1000,2000,5000`) each runs on a scratch site of its own, one after the other, and a
table of the per-zone costs follows: flat rows mean the tick grows linearly with the site.
Boards hold at most 125 valve coils (+3 spares), so large sites get more boards.

    .venv/bin/python bench/control.py [--zones 500] [--boards N] [--weather 8] [--sources 4] [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import scratch_site  # noqa: E402  (bench/, the script's own folder)


def serve_boards(ports: list[int], coils: int, ready, stop) -> None:
    from control.drivers.simulated_board import RelayBoard

    boards = [RelayBoard(coils=coils, port=p).start() for p in ports]
    ready.set()
    stop.wait()
    for b in boards:
        b.stop()


# A board carries at most this many valve coils (and 3 spares for the plants): 1,000 zones on
# 16 boards is 125 each; larger sites get more boards rather than 600-coil boards.
MAX_VALVES_PER_BOARD = 125
MIN_BOARDS = 16  # the 500-zone figures in docs/BENCHMARKS.md are on 16 boards
RESULT = "RESULT "  # the line a run prints its figures on, for a run of several sizes


def zone_counts(text: str) -> list[int]:
    counts = [int(part) for part in text.split(",") if part.strip()]
    if not counts or min(counts) < 1:
        raise argparse.ArgumentTypeError("zone counts are positive integers, comma-separated")
    return counts


def boards_for(zones: int) -> int:
    return max(MIN_BOARDS, -(-2 * zones // MAX_VALVES_PER_BOARD))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--zones",
        type=zone_counts,
        default=[500],
        help="zones (two valves each); several, comma-separated, run one after the other",
    )
    parser.add_argument(
        "--boards",
        type=int,
        default=0,
        help=f"relay boards the actuators are spread over (default: at least {MIN_BOARDS}, "
        f"at most {MAX_VALVES_PER_BOARD} valves a board)",
    )
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--weather", type=int, default=8, help="weather-compensated plants (at most --boards)"
    )
    parser.add_argument(
        "--sources", type=int, default=4, help="heat sources on one heat main fed by every zone"
    )
    parser.add_argument(
        "--redis-url", default=os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/13")
    )
    parser.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="N",
        help="after the runs, profile N steady ticks with cProfile and print the top functions",
    )
    args = parser.parse_args()
    if len(args.zones) > 1:
        run_sizes(args)
        return
    args.zones = args.zones[0]
    args.boards = args.boards or boards_for(args.zones)

    scratch_site.start("bms-bench-control-", args.redis_url, LOG_LEVEL="ERROR")
    from control.drivers.simulated_board import free_port
    from core.redis import get_redis

    get_redis().flushdb()

    actuators_n = args.zones * 2
    per_board = -(-actuators_n // args.boards)
    ports = [free_port() for _ in range(args.boards)]
    ready, stop = multiprocessing.Event(), multiprocessing.Event()
    server = multiprocessing.Process(
        target=serve_boards, args=(ports, per_board + 3, ready, stop), daemon=True
    )
    server.start()
    ready.wait(30)
    try:
        figures = run(args, ports, per_board)
    finally:
        stop.set()
        server.join(10)
    print(RESULT + json.dumps(figures))


def run_sizes(args) -> None:
    """Each size in a process of its own (a fresh scratch site and database), then the table."""
    rows = []
    for zones in args.zones:
        command = [sys.executable, __file__, "--zones", str(zones), "--runs", str(args.runs)]
        command += ["--weather", str(args.weather), "--sources", str(args.sources)]
        command += ["--redis-url", args.redis_url] + (
            ["--boards", str(args.boards)] * bool(args.boards)
        )
        print(f"--- {zones} zones", flush=True)
        out = subprocess.run(command, capture_output=True, text=True, check=False)
        lines = out.stdout.splitlines()
        print("\n".join(line for line in lines if not line.startswith(RESULT)), flush=True)
        results = [line[len(RESULT) :] for line in lines if line.startswith(RESULT)]
        if out.returncode or not results:
            sys.exit(f"{zones} zones failed (exit {out.returncode}):\n{out.stderr[-3000:]}")
        rows.append(json.loads(results[-1]))
    print("\nper zone, as the site grows (CPU: the machine's load does not inflate it):")
    print(f"{'zones':>6} {'actuators':>9} {'boards':>6} {'steady tick CPU':>16} "
          f"{'per zone':>9} {'evaluator CPU':>14} {'per zone':>9}")  # fmt: skip
    for r in rows:
        print(
            f"{r['zones']:>6} {r['actuators']:>9} {r['boards']:>6} "
            f"{r['steady_cpu_ms']:>13.0f} ms {r['steady_cpu_ms'] * 1000 / r['zones']:>6.0f} µs "
            f"{r['evaluator_cpu_ms']:>11.1f} ms {r['evaluator_cpu_ms'] * 1000 / r['zones']:>6.1f} µs"
        )


def build_weather_plants(n: int, zones, ports: list[int], per_board: int) -> list:
    """n weather-compensated plants on the spare coils (per_board …+2) and holding register 0
    of boards 0…n-1; flow 50 °C, the curve's value at 0 °C outside: after the first valve
    movements the loops settle, as a site does."""
    from control.models import HeatingPlant, WeatherCompensation
    from feeds.models import Feed
    from sensors.models import Actuator, Node, Sensor

    node = Node.objects.get(name="bench")
    feeds = Feed.objects.bulk_create(
        Feed(name=f"w{i}", tag="bench", interval=10) for i in range(n + 1)
    )
    outside = Sensor.objects.create(node=node, key="outside", kind="temperature", feed=feeds[0])
    for j in range(n):
        flow = Sensor.objects.create(
            node=node, key=f"flow{j}", kind="temperature", feed=feeds[j + 1]
        )

        def relay(name: str, offset: int, kind: str = "relay", j: int = j) -> Actuator:
            return Actuator.objects.create(
                name=f"{name}{j}", kind=kind, host="127.0.0.1", port=ports[j],
                coil=per_board + offset, min_on_s=0, min_off_s=0,
            )  # fmt: skip

        plant = HeatingPlant.objects.create(
            name=f"weather{j}", boiler=relay("wboiler", 0, "boiler"), outside_sensor=outside,
            flow_sensor=flow, has_bypass=True,
        )  # fmt: skip
        plant.zones.set(zones[j::n])
        if j % 2:
            extra = {"output": "three_point", "open_actuator": relay("open", 1),
                     "close_actuator": relay("close", 2), "run_time_s": 10.0}  # fmt: skip
        else:
            extra = {"register_host": "127.0.0.1", "register_port": ports[j]}
        WeatherCompensation.objects.create(plant=plant, **extra)
    return feeds


def build_heat_main(n: int, zones, ports: list[int], per_board: int):
    """A heat main of n sources (a biomass lead that does not rotate, gas lags) on the first
    spare coil of the last n boards, fed by every zone, staging on its flow sensor (held at
    60 °C: below the 70 °C stage-up threshold, so the sequence has work to do)."""
    from control.models import HeatMain, HeatSource, ThermalStore
    from feeds.models import Feed
    from sensors.models import Actuator, Node, Sensor

    node = Node.objects.get(name="bench")
    feed = Feed.objects.create(name="main-flow", tag="bench", interval=10)
    flow = Sensor.objects.create(node=node, key="main-flow", kind="temperature", feed=feed)
    main = HeatMain.objects.create(name="main", flow_sensor=flow, stage_up_s=60)
    main.zones.set(zones)
    for j in range(n):
        relay = Actuator.objects.create(
            name=f"source{j}", kind="boiler", host="127.0.0.1", port=ports[-1 - j],
            coil=per_board, min_on_s=0, min_off_s=0,
        )  # fmt: skip
        HeatSource.objects.create(
            heat_main=main, name=f"source{j}", actuator=relay, order=j, rotate=j > 0,
            ramp_s=0,
        )  # fmt: skip
    if n >= 3:
        # Its thermal store: top and bottom sensors, charge and discharge pumps on spare coils.
        top = Sensor.objects.create(node=node, key="store-top", kind="temperature",
                                    feed=Feed.objects.create(name="store-top", tag="bench", interval=10))  # fmt: skip
        bottom = Sensor.objects.create(node=node, key="store-bottom", kind="temperature",
                                       feed=Feed.objects.create(name="store-bottom", tag="bench", interval=10))  # fmt: skip
        pumps = [
            Actuator.objects.create(
                name=f"store-pump{k}",
                kind="pump",
                host="127.0.0.1",
                port=ports[-2 - k],
                coil=per_board + 1,
                min_on_s=0,
                min_off_s=0,
            )  # fmt: skip
            for k in (0, 1)
        ]
        ThermalStore.objects.create(
            heat_main=main, name="store", top_sensor=top, bottom_sensor=bottom,
            charge_pump=pumps[0], discharge_pump=pumps[1],
        )  # fmt: skip
        return [feed, top.feed, bottom.feed]
    return [feed]


def build_site(zones_n: int, ports: list[int], per_board: int):
    from django.utils import timezone

    from control.models import Booking, HeatingPlant, WindowDetection, Zone
    from feeds.models import Feed
    from feeds.store import service as feed_service
    from sensors.models import Actuator, Node, Sensor

    node = Node(name="bench")
    node.set_new_key()
    node.save()
    feeds = Feed.objects.bulk_create(
        Feed(name=f"z{i}", tag="bench", interval=10) for i in range(zones_n)
    )
    sensors = Sensor.objects.bulk_create(
        Sensor(node=node, key=f"t{i}", kind="temperature", feed=feed)
        for i, feed in enumerate(feeds)
    )
    acts = Actuator.objects.bulk_create(
        Actuator(
            name=f"a{i}",
            kind="valve",
            host="127.0.0.1",
            port=ports[i // per_board],
            coil=i % per_board,
            min_on_s=0,
            min_off_s=0,
        )
        for i in range(zones_n * 2)
    )
    zones = Zone.objects.bulk_create(
        Zone(name=f"Zone {i}", slug=f"zone-{i}", temperature_sensor=s)
        for i, s in enumerate(sensors)
    )
    through = Zone.actuators.through
    through.objects.bulk_create(
        through(zone_id=z.pk, actuator_id=acts[2 * i + k].pk)
        for i, z in enumerate(zones)
        for k in (0, 1)
    )
    # Every zone runs open-window detection (its defaults): the drop is checked each tick.
    WindowDetection.objects.bulk_create(WindowDetection(zone=z) for z in zones)
    boiler = Actuator.objects.create(
        # A spare coil: per_board - 1 was the last valve's own coil once the boards were full
        # (1,000 zones on 16 boards: 125 each), and the two flipped each other every tick.
        name="boiler",
        kind="boiler",
        host="127.0.0.1",
        port=ports[-1],
        coil=per_board + 1,
    )
    plant = HeatingPlant.objects.create(name="plant", boiler=boiler)
    plant.zones.set(zones)
    now = timezone.now()
    # Half the rooms are booked now, so half the valves open on the first tick.
    Booking.objects.bulk_create(
        Booking(
            zone=z, title=f"b{i}", start=now - timedelta(minutes=1), end=now + timedelta(hours=2)
        )
        for i, z in enumerate(zones)
        if i % 2 == 0
    )
    t = int(time.time())
    feed_service.log_points((f.pk, t, 16.0) for f in feeds)
    return zones, feeds


def run(args, ports, per_board) -> dict:
    from control import snapshot as snapshot_builder
    from control.drivers import three_point
    from control.engine.evaluator import evaluate
    from control.models import ActuatorCommand, Booking
    from control.runner import run_tick
    from feeds.store import service as feed_service
    from sensors.models import Actuator

    zones, feeds = build_site(args.zones, ports, per_board)
    # The last board's spare coils are the plant boiler's (and the heat main's sources'): the
    # weather plants use the others.
    weather = min(args.weather, len(ports) - 1)
    weather_feeds = build_weather_plants(weather, zones, ports, per_board) if weather else []
    sources = min(args.sources, len(ports) - weather)
    main_feeds = build_heat_main(sources, zones, ports, per_board) if sources else []
    n_act = Actuator.objects.count()
    print(
        f"Site: {args.zones} zones, {n_act} actuators on {len(ports)} relay boards "
        f"({per_board} coils each + 3), {weather} weather-compensated plants, "
        f"a heat main of {sources} sources" + (" and a store" if len(main_feeds) > 1 else "")
    )

    def fresh_temps() -> None:
        t = int(time.time())
        feed_service.log_points((f.pk, t, 16.0) for f in feeds)
        # Flow 60 °C; the store (when there is one) charged: top 72 °C, bottom 68 °C.
        feed_service.log_points(
            [(f.pk, t, v) for f, v in zip(main_feeds, (60.0, 72.0, 68.0), strict=False)]
        )
        if weather_feeds:
            # Outside 0 °C; each flow at 50 °C, the curve's value for a 20 °C room.
            feed_service.log_points(
                [(weather_feeds[0].pk, t, 0.0)] + [(f.pk, t, 50.0) for f in weather_feeds[1:]]
            )

    def pulses_done() -> None:
        # A site ticks every 30 s; a pulse (at most 0.6 × the tick) has ended by the next one.
        while three_point.in_flight():
            time.sleep(0.02)

    fresh_temps()

    first = run_tick()
    assert first["faults"] == 0, first
    audited = ActuatorCommand.objects.count()
    print(
        f"first tick (all written + read back + audited): {first['total_ms']:.0f} ms "
        f"(snapshot {first['snapshot_ms']:.0f} ms, evaluate {first['evaluate_ms']:.0f} ms); "
        f"{first['written']} written, {audited} commands audited"
    )

    def timed(label: str, prepare=None) -> float:
        """Runs and prints the case; the median CPU ms of its ticks."""
        totals = []
        cpu = []
        report = {}
        for _ in range(args.runs):
            if prepare:
                prepare()
            pulses_done()
            # CPU time of this process (all its threads): what the tick costs, whatever else
            # the machine is doing; wall time is what a site sees.
            cpu_started = time.process_time()
            report = run_tick()
            cpu.append((time.process_time() - cpu_started) * 1000)
            assert report.get("faults") == 0, report
            totals.append(report["total_ms"])
        print(
            f"{label}: median {statistics.median(totals):.0f} ms, max {max(totals):.0f} ms, "
            f"CPU median {statistics.median(cpu):.0f} ms "
            f"over {args.runs} ticks (last: {report['written']} written, "
            f"{report.get('outputs', 0)} outputs, {report.get('pulses', 0)} pulses, "
            f"snapshot {report['snapshot_ms']:.0f} ms, evaluate {report['evaluate_ms']:.0f} ms)"
        )
        return statistics.median(cpu)

    steady_cpu = timed("steady tick (no change, every coil read back)", fresh_temps)

    flip = {"on": False}

    def change_tenth() -> None:
        fresh_temps()
        # Cancel / restore a tenth of the bookings, so 10 % of zones switch each tick.
        ids = list(
            Booking.objects.order_by("pk").values_list("pk", flat=True)[: max(1, args.zones // 10)]
        )
        Booking.objects.filter(pk__in=ids).update(cancelled=not flip["on"])
        flip["on"] = not flip["on"]

    timed("tick with 10 % of zones switching", change_tenth)

    if args.profile:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        for _ in range(args.profile):
            fresh_temps()
            profiler.enable()
            run_tick()
            profiler.disable()
        print(f"profile of {args.profile} steady ticks (cumulative, top 25):")
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)

    fresh_temps()
    from django.utils import timezone

    live = snapshot_builder.build(timezone.now())
    if args.profile:
        import cProfile
        import pstats

        profiler = cProfile.Profile(time.thread_time)
        profiler.enable()
        evaluate(live.snapshot)
        profiler.disable()
        print("profile of the evaluator alone (own CPU time, top 15):")
        pstats.Stats(profiler).sort_stats("tottime").print_stats(15)
    # This thread's CPU time: the relay pool's threads and the machine's other processes do
    # not count (on a loaded 2-core machine wall time was 2-4x the CPU).
    passes = []
    for _ in range(max(3, args.runs)):
        started = time.thread_time()
        evaluate(live.snapshot)
        passes.append(time.thread_time() - started)
    per_site = statistics.median(passes)
    print(
        f"evaluator alone: {per_site * 1000:.1f} ms CPU for {args.zones} zones = "
        f"{per_site / args.zones * 1e6:.1f} µs per zone (median of {len(passes)} passes)"
    )
    print(
        f"per zone: steady tick {steady_cpu * 1000 / args.zones:.0f} µs CPU, "
        f"evaluator {per_site / args.zones * 1e6:.1f} µs CPU"
    )
    return {
        "zones": args.zones,
        "actuators": n_act,
        "boards": len(ports),
        "steady_cpu_ms": steady_cpu,
        "evaluator_cpu_ms": per_site * 1000,
    }


if __name__ == "__main__":
    main()
