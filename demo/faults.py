"""Faults the demo plant can carry, each from a known time: the proof that the findings rules
find what is wrong (bench/fdd.py, docs/DEMO.md "Faults"). No Django.

    plan = FaultPlan([Fault(VALVE_STUCK_OPEN, "workshop", start)])
    plant.faults = plan            # DemoPlant asks the plan each step

Each fault acts where it would in a building:

- `valve_stuck_open` (a room): the radiator valve passes water whatever its relay says (a seized
  seat, a manual cap left on): the room is heated whenever the plant circulates;
- `window_open` (a room): the window stays open (the room's extra ventilation loss);
- `sensor_flatline` (a room): its temperature sensor reads the value it had when the fault began
  (stuck, off its wall): what the room does is no longer seen;
- `boiler_short_cycling` (the boiler): while there is demand, its relay is switched every
  SHORT_CYCLE (a faulty flow thermostat, anti-cycling lost in a controller swap): the BMS's
  own commands show it, as the audit log does on a real site;
- `night_base_load` (the site's electricity): BASE_LOAD_RISE_W more, day and night (a heater,
  a dehumidifier or a server left on): the night base load steps up;
- `pv_shaded` (a PV string, PV_STRINGS): the string makes SHADED_SHARE of what it would (a tree
  grown over it, half its modules bypassed after a storm);
- `solar_pump_forced_on` (the solar circuit): its pump is held on whatever the differential
  says (a manual override left on after commissioning): it runs at night and carries the
  tank's heat out to a cold collector. The BMS's own commands show it, as an override.

Pure and deterministic: given the same steps at the same times, a plan answers the same (the
flat-lined value is the first reading the plan is asked for once the fault is on).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

VALVE_STUCK_OPEN = "valve_stuck_open"
WINDOW_OPEN = "window_open"
SENSOR_FLATLINE = "sensor_flatline"
BOILER_SHORT_CYCLING = "boiler_short_cycling"
NIGHT_BASE_LOAD = "night_base_load"
PV_SHADED = "pv_shaded"
SOLAR_PUMP_FORCED_ON = "solar_pump_forced_on"
KINDS = (VALVE_STUCK_OPEN, WINDOW_OPEN, SENSOR_FLATLINE, BOILER_SHORT_CYCLING, NIGHT_BASE_LOAD,
         PV_SHADED, SOLAR_PUMP_FORCED_ON)  # fmt: skip
BOILER = "boiler"  # the target of a boiler fault
SITE = "site"  # of a base load fault
SOLAR = "solar"  # of a solar pump fault
PV_STRINGS = ("pv-string-1", "pv-string-2")  # the array's two strings, half its peak each
# The one target each plant fault has; a room fault's target is a room's slug (none of these).
PLANT_TARGETS = {BOILER_SHORT_CYCLING: (BOILER,), NIGHT_BASE_LOAD: (SITE,),
                 PV_SHADED: PV_STRINGS, SOLAR_PUMP_FORCED_ON: (SOLAR,)}  # fmt: skip
NOT_ROOMS = frozenset(t for targets in PLANT_TARGETS.values() for t in targets)
SHORT_CYCLE = timedelta(minutes=4)  # on 4 min, off 4 min: 7-8 starts an hour
BASE_LOAD_RISE_W = 1000.0  # a 1 kW fan heater: 40 % on the demo's 2.5 kW night load
SHADED_SHARE = 0.5  # half the string's modules bypassed
MAX_FAULTS = 100  # a plan is written by hand or by a bench: more is a mistake


class FaultError(ValueError):
    """A fault the plan refuses (unknown kind, bad target or times, too many)."""


@dataclass(frozen=True)
class Fault:
    kind: str
    target: str  # a room slug, or BOILER
    start: datetime
    end: datetime | None = None  # None: until the run ends

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise FaultError(f"kind: {self.kind!r} is not one of {', '.join(KINDS)}")
        targets = PLANT_TARGETS.get(self.kind)
        if targets is not None and self.target not in targets:
            raise FaultError(f"target: {self.kind} is of {' or '.join(targets)}")
        if targets is None and self.target in NOT_ROOMS:
            raise FaultError(f"target: {self.kind} is of a room, not {self.target}")
        if self.start.tzinfo is None:
            raise FaultError("start: a time with its time zone")
        if self.end is not None and self.end <= self.start:
            raise FaultError("end: after the start")

    def active(self, t: datetime) -> bool:
        return self.start <= t and (self.end is None or t < self.end)


def parse(text: str) -> Fault:
    """`KIND:TARGET@START[/END]` (ISO times with their zone), e.g.
    `window_open:workshop@2030-01-08T09:00+00:00` (simulate_site --fault)."""
    head, at, when = text.partition("@")
    kind, _, target = head.partition(":")
    if not at or not target:
        raise FaultError(f"{text[:80]!r}: KIND:TARGET@START[/END]")
    first, _, last = when.partition("/")
    try:
        start = datetime.fromisoformat(first)
        end = datetime.fromisoformat(last) if last else None
    except ValueError as e:
        raise FaultError(f"{text[:80]!r}: times as ISO 8601 with their zone") from e
    return Fault(kind, target, start, end)


@dataclass
class FaultPlan:
    faults: list[Fault] = field(default_factory=list)
    _held: dict[str, float] = field(default_factory=dict)  # flat-lined readings, by room

    def __post_init__(self) -> None:
        if len(self.faults) > MAX_FAULTS:
            raise FaultError(f"at most {MAX_FAULTS} faults a plan")

    @classmethod
    def of(cls, faults: Iterable[Fault]) -> FaultPlan:
        return cls(list(faults))

    def _on(self, kind: str, target: str, t: datetime) -> Fault | None:
        return next(
            (f for f in self.faults if f.kind == kind and f.target == target and f.active(t)), None
        )

    def valve_open(self, slug: str, commanded: bool, t: datetime) -> bool:
        """Whether the room's valve passes water: as commanded, or always when stuck open."""
        return commanded or self._on(VALVE_STUCK_OPEN, slug, t) is not None

    def window_open(self, slug: str, airing: bool, t: datetime) -> bool:
        return airing or self._on(WINDOW_OPEN, slug, t) is not None

    def reading(self, slug: str, value: float, t: datetime) -> float:
        """What the room's sensor reports: the value, or the one it stuck at."""
        if self._on(SENSOR_FLATLINE, slug, t) is None:
            self._held.pop(slug, None)
            return value
        return self._held.setdefault(slug, value)

    def boiler(self, demand: bool, t: datetime) -> bool:
        """The boiler relay's state for `demand`: while short-cycling, on and off by turns
        every SHORT_CYCLE from the fault's start."""
        fault = self._on(BOILER_SHORT_CYCLING, BOILER, t)
        if fault is None or not demand:
            return demand
        return int((t - fault.start) / SHORT_CYCLE) % 2 == 0

    def extra_load_w(self, t: datetime) -> float:
        """Electrical load beyond the site's own (W)."""
        return BASE_LOAD_RISE_W if self._on(NIGHT_BASE_LOAD, SITE, t) is not None else 0.0

    def pv_share(self, string: str, t: datetime) -> float:
        """The share of its output a PV string makes (1: clean)."""
        return SHADED_SHARE if self._on(PV_SHADED, string, t) is not None else 1.0

    def solar_pump_forced(self, t: datetime) -> bool:
        """Whether the solar pump is held on whatever the differential says."""
        return self._on(SOLAR_PUMP_FORCED_ON, SOLAR, t) is not None
