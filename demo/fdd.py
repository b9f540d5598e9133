"""Fault detection proven on the demo plant: a simulated run with faults injected at known times,
the findings rules run over it as the hourly beat task would, and per rule what was found and how
late (bench/fdd.py prints it; docs/BENCHMARKS.md "Fault detection").

    rig = build(start)                               # a site of the demo's rooms, in the database
    run(rig, start, days, FaultPlan.of(faults))      # the plant stepped on a simulated clock
    found = detect(rig, start, days)                 # findings.evaluate, every `every`
    rows = score(faults, found)

The run writes what a live site would: each room's and the solar circuit's temperatures through
the real feed store, each relay change as an ActuatorCommand row with its strategy, and the
hourly power of the site's electricity meter and of each PV string (four weeks before the run
too, which the base load and PV rules compare with). The control here is the demo's
own stand-in (each room heated to 20 °C in office hours with a learned-rate pre-heat, the boiler
and pump on while any room is in its heating day), not control/'s engine: the rules judge
records, whoever wrote them. Deterministic given the seed and the start.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, time, timedelta

from django.utils.text import slugify

from control.engine import specs
from control.models import (
    ActuatorCommand,
    HeatingPlant,
    Schedule,
    SchedulePeriod,
    SolarCircuit,
    Zone,
)
from demo import faults as kinds
from demo import layout
from demo.faults import Fault, FaultPlan
from demo.plant import Coils, DemoPlant
from energy.benchmarks import ELECTRICITY, GENERATION
from energy.models import PV, FuelRate, Meter, MeterNode
from feeds.models import Feed
from feeds.store import service as feed_service
from findings import rules
from findings.evaluate import Summary, evaluate, occupancy
from findings.models import Finding
from sensors.models import Actuator, Node, Sensor, Site

STEP = timedelta(minutes=1)  # the plant and its control; finer than a short cycle's 4 min
SETPOINT_C = 20.0
HYSTERESIS_K = 0.3
PREHEAT_K_PER_H = 3.0  # the rooms' warming rate the pre-heat plans with
MAX_PREHEAT = timedelta(hours=4)
WEEK = timedelta(days=7)
HOUR = timedelta(hours=1)
# The meters' history before a run: the base load and PV rules judge a week against the four
# before it (findings/rules.py BASE_LOAD_WEEKS, PV_WEEKS), so a run's first week is judged too.
HISTORY = 4 * WEEK
HISTORY_STEP = timedelta(minutes=10)  # no rooms then: the sun, clouds and the site's load
SOLAR_ON_K, SOLAR_OFF_K, TANK_MAX_C = 6.0, 4.0, 60.0  # the differential's defaults (DESIGN.md)
WEEK_SITE_NAME, WEEK_SITE_SLUG = "Fault week", "fault-week"  # manage.py simulate_fault_week
WEEK_SUFFIX = " (fault week)"  # its rooms beside the demo's own: "Seminar room (fault week)"

# Which rule should find each kind of fault (the first of these the site has).
EXPECTED: dict[str, tuple[str, ...]] = {
    kinds.VALVE_STUCK_OPEN: (rules.VALVE_PASSING,),
    # Not frequent_open_window: it counts the control's open-window pauses, and this run's
    # stand-in control has no open-window detection (control/'s engine has), so none are made.
    kinds.WINDOW_OPEN: (rules.UNDER_SETPOINT,),
    kinds.SENSOR_FLATLINE: (rules.SENSOR_FLATLINE,),
    kinds.BOILER_SHORT_CYCLING: (rules.SHORT_CYCLING,),
    kinds.NIGHT_BASE_LOAD: (rules.BASE_LOAD_RISING,),
    kinds.PV_SHADED: (rules.PV_LOW_YIELD,),
    kinds.SOLAR_PUMP_FORCED_ON: (rules.SOLAR_NO_GAIN,),
}


@dataclass
class Rig:
    site: Site
    zones: dict[str, Zone]  # room slug -> zone
    valves: dict[str, Actuator]
    sensors: dict[str, Sensor]
    boiler: Actuator
    plant: HeatingPlant
    meter: Meter  # the site's electricity, hourly kW
    pv: dict[str, Meter]  # PV string -> its generation meter
    solar: SolarCircuit


def build(name: str = "FDD bench", slug: str = "fdd-bench", suffix: str = "") -> Rig:
    """The demo's rooms as zones (office hours, 08:00–17:00 on weekdays), each with a valve and
    a temperature feed, one heating plant, and a gas tariff. `suffix` follows every name (and,
    slugified, every zone's slug): zone, actuator, schedule and plant names are unique across
    the database, so a run beside the demo site needs names of its own."""
    site = Site.objects.create(name=name, slug=slug)
    tail = slugify(suffix)
    tail = f"-{tail}" if tail else ""
    FuelRate.objects.create(site=site, fuel="gas", price_per_unit=0.07)
    node = Node(name="fdd-rooms", site=site)
    node.set_new_key()
    node.save()
    schedule = Schedule.objects.create(name=f"Office hours{suffix}", site=site)
    for day in range(5):
        SchedulePeriod.objects.create(schedule=schedule, weekday=day, start=time(8), end=time(17))
    zones, valves, sensors = {}, {}, {}
    for room in layout.ROOMS:
        feed = Feed.objects.create(
            name=f"{room.name} temperature{suffix}", tag="fdd", unit="°C", interval=60
        )
        sensors[room.slug] = Sensor.objects.create(
            node=node, key=room.slug, name=f"{room.name} temperature", kind="temperature", feed=feed
        )
        valves[room.slug] = Actuator.objects.create(
            name=f"{room.name} valve{suffix}", kind="valve", site=site, **_relay(node)
        )
        zones[room.slug] = Zone.objects.create(
            name=f"{room.name}{suffix}", slug=f"{room.slug}{tail}", site=site, schedule=schedule,
            temperature_sensor=sensors[room.slug], comfort_setpoint=SETPOINT_C,
            optimum_start=True, max_preheat_min=int(MAX_PREHEAT.total_seconds() // 60),
        )  # fmt: skip
        zones[room.slug].actuators.set([valves[room.slug]])
    boiler = Actuator.objects.create(
        name=f"Boiler{suffix}", kind="boiler", site=site, **_relay(node)
    )
    plant = HeatingPlant.objects.create(name=f"Boiler house{suffix}", boiler=boiler, site=site)
    plant.zones.set(zones.values())
    meter, pv = _meters(site, suffix)
    solar = _solar(site, node, suffix)
    return Rig(site, zones, valves, sensors, boiler, plant, meter, pv, solar)


def _relay(node: Node) -> dict:
    """How a rig's actuator is driven: through its simulated node's command queue. A valid
    configuration, so an engineer can edit one (its Brick class, docs/BRICK.md): a Modbus coil
    without a relay board host is refused on every save, and the demo's relay board is the
    live demo site's, whose coils these must not share. A live control tick that switches a
    rig's actuator queues a command nobody collects: no relay anywhere moves."""
    return {"driver": Actuator.Driver.NODE_QUEUE, "node": node}


def _meters(site: Site, suffix: str) -> tuple[Meter, dict[str, Meter]]:
    """The site's electricity meter and a generation meter a PV string, on hourly power feeds."""
    FuelRate.objects.create(site=site, fuel=ELECTRICITY, price_per_unit=0.27)
    node = MeterNode.objects.create(site=site, name=f"Site{suffix}", kind=MeterNode.Kind.BUILDING)

    def meter(name: str, fuel: str, generator: str = "") -> Meter:
        feed = Feed.objects.create(name=f"{name}{suffix}", tag="fdd", unit="W", interval=3600)
        return Meter.objects.create(node=node, name=name, fuel=fuel, generator=generator,
                                    source=Meter.Source.POWER, feed=feed)  # fmt: skip

    pv = {s: meter(f"PV {s.replace('-', ' ')}", GENERATION, PV) for s in kinds.PV_STRINGS}
    return meter("Site electricity", ELECTRICITY), pv


def _solar(site: Site, node: Node, suffix: str) -> SolarCircuit:
    def sensor(key: str) -> Sensor:
        feed = Feed.objects.create(name=f"Solar {key}{suffix}", tag="fdd", unit="°C", interval=60)
        return Sensor.objects.create(node=node, key=f"solar-{key}", name=f"Solar {key}",
                                     kind="temperature", feed=feed)  # fmt: skip

    pump = Actuator.objects.create(
        name=f"Solar pump{suffix}", kind="pump", site=site, **_relay(node)
    )
    return SolarCircuit.objects.create(
        name=f"Solar thermal{suffix}", site=site, pump=pump,
        collector_sensor=sensor("collector"), tank_sensor=sensor("tank"),
    )  # fmt: skip


@dataclass
class _Relays:
    """Each relay's last state, and the audit rows of every change."""

    state: dict[int, bool] = field(default_factory=dict)
    rows: list[ActuatorCommand] = field(default_factory=list)

    def set(self, actuator: Actuator, on: bool, strategy: str, t: datetime) -> None:
        if self.state.get(actuator.pk) == on:
            return
        self.state[actuator.pk] = on
        self.rows.append(
            ActuatorCommand(
                actuator=actuator, state=on, strategy=strategy, reason=f"fdd bench: {strategy}",
                requested_at=t, sent_at=t, confirmed_at=t,
            )
        )  # fmt: skip


def _window(windows: list[tuple[datetime, datetime]], t: datetime):
    """The occupancy window `t` is in or the next one, or None."""
    return next((w for w in windows if t < w[1]), None)


def run(rig: Rig, start: datetime, days: int, plan: FaultPlan, seed: int = 1) -> int:
    """Step the plant from `start` for `days` on a simulated clock; write the rooms' readings
    and the relays' audit rows. Returns the number of relay changes."""
    end = start + timedelta(days=days)
    plant = DemoPlant(start, seed=seed)
    plant.faults = plan
    occupied = {slug: occupancy(z, start, end + timedelta(days=1)) for slug, z in rig.zones.items()}
    relays = _Relays()
    heating = {slug: False for slug in rig.zones}
    points = []
    hourly = _Hourly()
    _history(rig, start, plan, seed, hourly)
    pump = False  # the solar differential's state
    collector, tank = rig.solar.collector_sensor, rig.solar.tank_sensor
    t = start
    while t < end:
        readings = {
            slug: plan.reading(slug, round(plant.rooms[slug].temperature_c, 2), t)
            for slug in rig.zones
        }
        in_day = False
        for slug, reading in readings.items():
            strategy, wanted = _room(occupied[slug], t, reading, heating[slug])
            heating[slug] = wanted
            in_day = in_day or strategy != ""
            relays.set(rig.valves[slug], wanted, strategy or "schedule", t)
        boiler_on = plan.boiler(in_day, t)
        relays.set(rig.boiler, boiler_on, "heating_plant", t)
        solar = plant.solar_thermal
        pump = _differential(pump, solar.collector_c, solar.tank_c)
        forced = plan.solar_pump_forced(t)
        strategy = specs.OVERRIDE if forced else specs.SOLAR_DIFFERENTIAL
        relays.set(rig.solar.pump, pump or forced, strategy, t)
        coils = Coils(
            boiler=boiler_on,
            heating_pump=in_day,
            solar_pump=pump or forced,
            valves={slug: relays.state[rig.valves[slug].pk] for slug in rig.zones},
        )
        ts = int(t.timestamp())
        points += [(rig.sensors[slug].feed_id, ts, value) for slug, value in readings.items()]
        points += [(collector.feed_id, ts, round(solar.collector_c, 2)),
                   (tank.feed_id, ts, round(solar.tank_c, 2))]  # fmt: skip
        plant.step(t, STEP.total_seconds(), 1.0, coils)
        _record(rig, plant, t, hourly)
        t += STEP
    # oldest first: a feed's first point fixes its start, and nothing before it is taken
    feed_service.log_points(sorted(hourly.points() + points, key=lambda p: p[1]))
    feed_service.commit_all(sync=True)
    ActuatorCommand.objects.bulk_create(relays.rows, batch_size=2000)
    return len(relays.rows)


def _differential(on: bool, collector_c: float, tank_c: float) -> bool:
    """The solar pump as the control's differential strategy runs it (its defaults)."""
    if tank_c >= TANK_MAX_C:
        return False
    if collector_c - tank_c >= SOLAR_ON_K:
        return True
    return on and collector_c - tank_c > SOLAR_OFF_K


@dataclass
class _Hourly:
    """Hourly means of the meters' power (W), as a meter's hourly feed holds them."""

    sums: dict[tuple[int, int], list[float]] = field(default_factory=dict)

    def add(self, feed_id: int, t: datetime, watts: float) -> None:
        hour = int(t.timestamp()) // 3600 * 3600
        total = self.sums.setdefault((feed_id, hour), [0.0, 0])
        total[0] += watts
        total[1] += 1

    def points(self) -> list[tuple[int, int, float]]:
        return [(f, h, round(s / n, 1)) for (f, h), (s, n) in self.sums.items()]


def _record(rig: Rig, plant: DemoPlant, t: datetime, hourly: _Hourly) -> None:
    hourly.add(rig.meter.feed_id, t, plant.site_demand_w(t))
    for string, meter in rig.pv.items():
        hourly.add(meter.feed_id, t, plant.pv_strings_w[string])


def _history(rig: Rig, start: datetime, plan: FaultPlan, seed: int, hourly: _Hourly) -> None:
    """The meters' HISTORY before `start` (the sun, the clouds and the site's load; the rooms
    and their heating are not recorded then: no rule looks back at them)."""
    plant = DemoPlant(start - HISTORY, seed=seed + 1)
    plant.faults = plan
    t = start - HISTORY
    while t < start:
        plant.step(t, HISTORY_STEP.total_seconds(), 1.0, Coils())
        _record(rig, plant, t, hourly)
        t += HISTORY_STEP


def _room(windows, t: datetime, reading: float, heating: bool) -> tuple[str, bool]:
    """(strategy, valve wanted) for a room: in occupancy a thermostat on the setpoint; before
    it, pre-heat from when the room's distance to the setpoint at PREHEAT_K_PER_H would reach
    it ('' and OFF outside both)."""
    w = _window(windows, t)
    if w is None:
        return "", False
    on = reading < SETPOINT_C - HYSTERESIS_K or (heating and reading < SETPOINT_C + HYSTERESIS_K)
    if w[0] <= t:
        return "schedule", on
    need = timedelta(hours=max(0.0, SETPOINT_C - reading) / PREHEAT_K_PER_H)
    if t >= w[0] - min(need, MAX_PREHEAT):
        return "optimum_start", on
    return "", False


def detect(
    start: datetime, days: int, every: timedelta = timedelta(hours=1)
) -> dict[str, datetime]:
    """Run the rules as the beat task does (each run over the week before it), every `every`;
    the first time each finding's key was seen."""
    first: dict[str, datetime] = {}
    end = start + timedelta(days=days)
    t = start + every
    while t <= end:
        summary = evaluate(max(start, t - WEEK), t, now=t)
        for key in summary.keys:
            first.setdefault(key, t)
        t += every
    return first


def expected_key(rig: Rig, fault: Fault) -> tuple[str, str]:
    """(rule, finding key) that should find the fault."""
    rule = next(r for r in EXPECTED[fault.kind] if r in rules.RULES)
    if fault.kind == kinds.BOILER_SHORT_CYCLING:
        return rule, f"{rule}:plant:{rig.plant.pk}"
    if fault.kind == kinds.SENSOR_FLATLINE:
        return rule, f"{rule}:sensor:{rig.sensors[fault.target].pk}"
    if fault.kind == kinds.NIGHT_BASE_LOAD:
        return rule, f"{rule}:meter:{rig.meter.pk}"
    if fault.kind == kinds.PV_SHADED:
        return rule, f"{rule}:meter:{rig.pv[fault.target].pk}"
    if fault.kind == kinds.SOLAR_PUMP_FORCED_ON:
        return rule, f"{rule}:solar:{rig.solar.pk}"
    return rule, f"{rule}:zone:{rig.zones[fault.target].pk}"


@dataclass
class RuleScore:
    injected: int = 0
    found: int = 0
    delays: list[timedelta] = field(default_factory=list)
    false: int = 0  # on a subject no fault was injected in
    knock_on: int = 0  # another rule's finding on a faulted subject (a stuck sensor reads cold)


def _subject(rig: Rig, key: str) -> str:
    """The room slug (or 'boiler') a finding's key is about."""
    _, kind, pk = key.split(":", 2)
    if kind == "plant":
        return kinds.BOILER
    if kind == "solar":
        return kinds.SOLAR
    if kind == "meter":
        by_meter = {str(m.pk): s for s, m in rig.pv.items()} | {str(rig.meter.pk): kinds.SITE}
        return by_meter.get(pk, "")
    by_pk = rig.sensors if kind == "sensor" else rig.zones
    return next((slug for slug, x in by_pk.items() if str(x.pk) == pk), "")


def score(rig: Rig, injected: list[Fault], first: dict[str, datetime]) -> dict[str, RuleScore]:
    """Per rule: faults injected for it, found (its key seen at or after the fault's start),
    each delay; false findings (on a subject with no fault) and knock-on ones (another rule's
    finding on a faulted subject, from the fault's start)."""
    table: dict[str, RuleScore] = defaultdict(RuleScore)
    explained = set()
    for fault in injected:
        rule, key = expected_key(rig, fault)
        row = table[rule]
        row.injected += 1
        seen = first.get(key)
        if seen is not None and seen >= fault.start:
            row.found += 1
            row.delays.append(seen - fault.start)
            explained.add(key)
    for key, seen in first.items():
        if key in explained:
            continue
        row = table[key.split(":", 1)[0]]
        subject = _subject(rig, key)
        # a boiler's fault is every room's (short cycles starve the radiators of heat), not
        # the meters' or the solar circuit's
        boiler = subject in rig.zones
        if any(
            (f.target == subject or (boiler and f.target == kinds.BOILER)) and seen >= f.start
            for f in injected
        ):
            row.knock_on += 1
        else:
            row.false += 1
    for rule in rules.RULES:
        table.setdefault(rule, RuleScore())
    return dict(sorted(table.items()))


def week_faults(start: datetime) -> list[Fault]:
    """The fault week's three faults (docs/FINDINGS.md "Try it"), at known times from `start`:
    the lecture theatre's sensor sticks at 07:00 on the first day, the seminar room's valve
    seizes open at 10:00, and the boiler starts short-cycling at 06:30 the next day."""
    return [
        Fault(kinds.SENSOR_FLATLINE, "lecture-theatre", start + timedelta(hours=7)),
        Fault(kinds.VALVE_STUCK_OPEN, "seminar-room", start + timedelta(hours=10)),
        Fault(kinds.BOILER_SHORT_CYCLING, kinds.BOILER, start + timedelta(hours=30.5)),
    ]


def fault_week(start: datetime, plan: FaultPlan, seed: int = 1) -> tuple[Rig, Summary]:
    """A site of its own ("Fault week") stepped through the week from `start` with the plan's
    faults, then the rules run over that week as the beat task would: the findings page shows
    what they found. The caller checks the site is not there yet (its slug is unique)."""
    rig = build(name=WEEK_SITE_NAME, slug=WEEK_SITE_SLUG, suffix=WEEK_SUFFIX)
    run(rig, start, WEEK.days, plan, seed=seed)
    return rig, evaluate(start, start + WEEK, now=start + WEEK)


def reset() -> None:
    """Forget the findings and the audit log of a run (the next run starts clean)."""
    Finding.objects.all().delete()
    ActuatorCommand.objects.all().delete()
