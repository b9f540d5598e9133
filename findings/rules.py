"""The rules, declared as data: what each needs, its condition, its duration and its cost.

The condition functions live in findings/detect.py (pure); findings/evaluate.py finds each
rule's points through the site model and turns what tripped into Finding rows. Every figure
a rule uses is here, with why, and docs/FINDINGS.md says the same in words.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from control.engine import specs

HEATING_UNOCCUPIED = "heating_unoccupied"
SENSOR_FLATLINE = "sensor_flatline"
SHORT_CYCLING = "boiler_short_cycling"


@dataclass(frozen=True, kw_only=True)
class Rule:
    name: str
    title: str
    needs: tuple[str, ...]  # the points by role, as the site model names them
    condition: str  # in words, for the page and the docs
    window: timedelta  # the span the condition is judged over
    min_duration: timedelta  # shorter than this is not a fault
    cost_method: str  # how the weekly waste is estimated, in words ("" = no estimate)
    what_to_check: str


# Strategies that are a reason to heat an empty room: safety, a person's override, optimum
# start warming up for the next occupancy, and the plant's own needs (a pump's exercise, a
# valve held open because the plant has no bypass). Sensor fallback is a fault of its own,
# already alarmed: it is not counted twice.
HEATING_EXCUSED = frozenset(
    {
        specs.FROST,
        specs.OVER_TEMPERATURE,
        specs.SENSOR_FALLBACK,
        specs.OVERRIDE,
        specs.OPTIMUM_START,
        specs.PUMP_KICK,
        specs.NO_BYPASS,
    }
)

# Heat a zone takes while its valve is open, when nothing better is known: 3 kW is a
# mid-size room's radiators (about 60 m² at 50 W/m² design loss). A site model with measured
# heat meters per zone is a later slice (docs/FINDINGS.md, "What is estimated").
ZONE_HEAT_KW = 3.0
# A boiler's rated output when nothing better is known: a small commercial wall-hung boiler.
BOILER_KW = 30.0
# Seasonal efficiency of a condensing gas boiler on part load: fuel kWh = heat kWh / this.
BOILER_EFFICIENCY = 0.85
# Each start beyond the threshold costs this many minutes of the boiler's full output: the
# pre-purge blows warm air up the flue and the heat exchanger's mass is heated again before
# the water is (our stated assumption, docs/FINDINGS.md; tune it to a measured boiler).
CYCLE_LOSS_MIN = 2.0
# Starts per hour above which a boiler short-cycles (most manufacturers' anti-cycling
# guidance allows about six an hour).
MAX_STARTS_PER_HOUR = 6
# The fuel heating burns, for the tariff and carbon factor (energy.models.FuelRate).
HEATING_FUEL = "gas"

FLATLINE_BAND_K = 0.05
FLATLINE_MIN_READINGS = 12  # one every half hour over 6 h at least
FLATLINE_MIN_HEAT = timedelta(minutes=30)

RULES: dict[str, Rule] = {
    r.name: r
    for r in (
        Rule(
            name=HEATING_UNOCCUPIED,
            title="Heating an empty room",
            needs=("zone", "zone schedule or bookings", "zone valves' commands"),
            condition="a zone's valve commanded ON outside its occupancy (schedule, bookings, "
            "and the optimum-start allowance before them) by no frost, override, optimum-start "
            "or plant reason",
            window=timedelta(days=7),
            min_duration=timedelta(minutes=30),
            cost_method=f"hours ON while empty × {ZONE_HEAT_KW:g} kW (a mid-size room's "
            f"radiators) ÷ {BOILER_EFFICIENCY:g} boiler efficiency, scaled to a week, "
            f"at the site's {HEATING_FUEL} tariff and carbon factor",
            what_to_check="the zone's schedule and bookings (a period left on, a holiday "
            "missing), and which strategy turned the valve on (its audit rows)",
        ),
        Rule(
            name=SENSOR_FLATLINE,
            title="Sensor reads a flat line",
            needs=("zone temperature sensor's feed", "zone valves' commands"),
            condition=f"a zone's temperature varies less than {FLATLINE_BAND_K:g} K over 6 h "
            f"while its valve was ON for at least {FLATLINE_MIN_HEAT.seconds // 60} min",
            window=timedelta(hours=6),
            min_duration=timedelta(hours=6),
            cost_method="",
            what_to_check="the sensor: stuck, off its wall, in a drawer or reading a default; "
            "compare it with a hand thermometer. The control trusts this reading.",
        ),
        Rule(
            name=SHORT_CYCLING,
            title="Boiler short-cycling",
            needs=("heating plant's boiler commands",),
            condition=f"more than {MAX_STARTS_PER_HOUR} boiler starts in a clock hour, "
            "in at least two hours of the week",
            window=timedelta(hours=1),
            min_duration=timedelta(hours=2),
            cost_method=f"starts beyond {MAX_STARTS_PER_HOUR} an hour × {CYCLE_LOSS_MIN:g} min "
            f"of the boiler's output ({BOILER_KW:g} kW assumed) ÷ {BOILER_EFFICIENCY:g}, "
            f"scaled to a week, at the site's {HEATING_FUEL} tariff and carbon factor",
            what_to_check="the boiler's minimum run and rest times, its flow temperature and "
            "the zones' hysteresis; a boiler oversized for the load cycles on its own "
            "thermostat",
        ),
    )
}
