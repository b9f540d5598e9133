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
UNDER_SETPOINT = "zone_under_setpoint"
VALVE_PASSING = "valve_passing"
SENSOR_SPIKES = "sensor_spikes"


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

# A zone is short of its setpoint when it reads more than this below it while occupied and
# heated, for more than UNDER_SETPOINT_MIN of the window's occupied time in all: a morning's
# warm-up or a door opened for a delivery stays under it.
UNDER_SETPOINT_MARGIN_K = 1.0
UNDER_SETPOINT_MIN = timedelta(hours=2)

# A room warming faster than this while its valve is commanded shut and its boiler runs
# gets heat it was not asked to have: sun or a full room rarely add 1 K an hour for an hour.
PASSING_RATE_K_PER_H = 1.0
PASSING_SUSTAIN = timedelta(hours=1)
# A radiator stays hot for a while after its valve shuts: warming this soon after an OFF
# is that stored heat, not a passing valve.
PASSING_SETTLE = timedelta(minutes=30)
# The heat a room's air, furniture and inner surfaces take per kelvin, when nothing better
# is known: the same mid-size 60 m² room as ZONE_HEAT_KW at 80 kJ/(m²·K), ISO 13790:2008
# Table 12's "very light" internal heat capacity (an hour's warming reaches only the air,
# furniture and the walls' inner layer): 4,800 kJ/K = 1.333 kWh/K.
ROOM_HEAT_KWH_PER_K = 60 * 80 / 3600

# A spike: a jump of more than SPIKE_JUMP_K between consecutive 5-min readings that comes
# back within SPIKE_REVERT_K of where it was inside SPIKE_WITHIN. More than SPIKES_PER_DAY in
# a day is a sensor to look at: one a day can be a door slammed on a draught, many cannot.
SPIKE_JUMP_K = 5.0
SPIKE_REVERT_K = 1.0
SPIKE_WITHIN = timedelta(minutes=15)
SPIKES_PER_DAY = 3

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
        Rule(
            name=UNDER_SETPOINT,
            title="Zone not reaching its setpoint",
            needs=(
                "zone temperature sensor's feed",
                "zone schedule or bookings (with their setpoints)",
                "zone valves' commands",
            ),
            condition=f"a zone reads more than {UNDER_SETPOINT_MARGIN_K:g} K below the setpoint "
            "of its occupancy (schedule or booking) while its valve is commanded ON, for more "
            f"than {UNDER_SETPOINT_MIN.seconds // 3600} h of occupied time in the week",
            window=timedelta(days=7),
            min_duration=UNDER_SETPOINT_MIN,
            cost_method="",
            what_to_check="the valve (does it open: feel the radiator's inlet), the radiator "
            "(air in it, sized for the room), the sensor's placement (by a door, a window, an "
            "outside wall) and the plant's flow temperature (its curve too low for the weather)",
        ),
        Rule(
            name=VALVE_PASSING,
            title="Valve passing: a room warms with its valve shut",
            needs=(
                "zone temperature sensor's feed",
                "zone valves' commands",
                "its heating plant's boiler commands",
            ),
            condition=f"a zone warms faster than {PASSING_RATE_K_PER_H:g} K/h over at least "
            f"{PASSING_SUSTAIN.seconds // 3600} h while all its valves are commanded shut "
            f"(from {PASSING_SETTLE.seconds // 60} min after the OFF) and its plant's boiler "
            "is ON",
            window=PASSING_SUSTAIN,
            min_duration=PASSING_SUSTAIN,
            cost_method=f"the rise (K) while shut × {ROOM_HEAT_KWH_PER_K:.3f} kWh/K (a 60 m² "
            f"room at 80 kJ/m²K) ÷ {BOILER_EFFICIENCY:g}, scaled to a week, at the site's "
            f"{HEATING_FUEL} tariff and carbon factor; a floor: the losses while warming are "
            "not counted",
            what_to_check="the valve: does it close (its actuator's pin, a seized seat, a "
            "manual override cap left on), and the pipework (a bypass or another circuit "
            "running through the room)",
        ),
        Rule(
            name=SENSOR_SPIKES,
            title="Sensor spikes",
            needs=("zone temperature sensor's feed",),
            condition=f"more than {SPIKES_PER_DAY} times in a day the zone's temperature jumps "
            f"more than {SPIKE_JUMP_K:g} K between consecutive 5-min readings and comes back "
            f"within {SPIKE_REVERT_K:g} K of where it was inside "
            f"{SPIKE_WITHIN.seconds // 60} min",
            window=timedelta(days=1),
            min_duration=timedelta(days=1),
            cost_method="",
            what_to_check="the sensor's wiring and connector (a loose or corroded contact), its "
            "radio's signal and battery, and anything hot or cold near it (a lamp, a vent). The "
            "control may act on a spike: a jump down calls for heat, a jump up stops it.",
        ),
    )
}

# --- The energy rules (findings/energy_checks.py): meters, the energy model, generation ---

BASE_LOAD_RISING = "base_load_rising"
ABOVE_MODEL = "above_model"
PV_LOW_YIELD = "pv_low_yield"
HYDRO_NO_OUTPUT = "hydro_no_output"

# Out of hours: weekends, and weekdays before 07:00 and from 19:00, local time: 5 × 12 h +
# 48 h = 108 h a week. A building's base load is what it draws then: servers, fridges,
# standby, and whatever was left on.
OPENS_HOUR, CLOSES_HOUR = 7, 19
OUT_OF_HOURS_A_WEEK = 5 * (24 - (CLOSES_HOUR - OPENS_HOUR)) + 48
# The base load: the 10th percentile of the out-of-hours hourly means, so a cleaner's hour
# or a server's backup does not count but a load left on every night does.
BASE_LOAD_PERCENTILE = 10
BASE_LOAD_MIN_HOURS = 24  # out-of-hours hours with data a week needs to be judged
BASE_LOAD_WEEKS = 4  # the previous weeks it is judged against
BASE_LOAD_MIN_WEEKS = 2
# A rise worth a look: 100 W (a heater or a few PCs left on) and 15 % of the base before.
BASE_LOAD_MIN_RISE_KW = 0.1
BASE_LOAD_MIN_RISE_RATIO = 0.15
ELECTRICITY = "electricity"

# The CUSUM turning up: at least ABOVE_MODEL_DAYS days in a row each using more than
# ABOVE_MODEL_MARGIN over the model (a day's scatter about a good model is a few per cent).
ABOVE_MODEL_DAYS = 4
ABOVE_MODEL_MARGIN = 0.05

# PV: an array whose best hours this week reach under PV_ENVELOPE_SHARE of its clear-day
# envelope (its best hours of the PV_WEEKS before); with sibling arrays, one making under
# PV_SIBLING_SHARE of what they make (each against its own past). Hours whose envelope is
# under PV_DAYLIGHT_SHARE of its peak (dawn, dusk) are left out.
PV_WEEKS = 4
PV_ENVELOPE_SHARE = 0.7
PV_SIBLING_SHARE = 0.8
PV_DAYLIGHT_SHARE = 0.1

# Hydro: running = output above HYDRO_RUNNING_SHARE of its 95th-percentile output; the water
# it runs on = the HYDRO_FLOW_QUANTILE percentile of the flow while it ran, over the
# HYDRO_WEEKS before. No output with that water for HYDRO_MIN_HOURS in a row is a finding.
HYDRO_WEEKS = 4
HYDRO_RUNNING_SHARE = 0.05
HYDRO_FLOW_QUANTILE = 10
HYDRO_MIN_HOURS = 3
HYDRO_FLOW_BAND = 0.2

for _rule in (
    Rule(
        name=BASE_LOAD_RISING,
        title="Out-of-hours base load rising",
        needs=("electricity meter's feed",),
        condition=f"an electricity meter's out-of-hours base load (the {BASE_LOAD_PERCENTILE}th "
        f"percentile of its hourly means on weekday nights before {OPENS_HOUR:02d}:00 and from "
        f"{CLOSES_HOUR:02d}:00 and at weekends) is at least {BASE_LOAD_MIN_RISE_KW * 1000:g} W "
        f"and {100 * BASE_LOAD_MIN_RISE_RATIO:.0f} % above the median of its previous "
        f"{BASE_LOAD_WEEKS} weeks'",
        window=timedelta(days=7),
        min_duration=timedelta(hours=BASE_LOAD_MIN_HOURS),
        cost_method=f"the rise (kW) × {OUT_OF_HOURS_A_WEEK} out-of-hours hours a week, at the "
        "site's electricity tariff and carbon factor",
        what_to_check="what runs at night and at weekends on this circuit: heaters, lights, "
        "PCs and screens left on, a fridge or a pump with a failing thermostat, a timer lost "
        "after a power cut; walk round at night with the meter's live reading",
    ),
    Rule(
        name=ABOVE_MODEL,
        title="Building using more than its model",
        needs=("building's meters' daily use", "building's energy model or baseline"),
        condition=f"a building uses more than its model (imported or its baseline line) by "
        f"over {100 * ABOVE_MODEL_MARGIN:.0f} % on {ABOVE_MODEL_DAYS} or more days in a row: its "
        "CUSUM has turned up",
        window=timedelta(days=7),
        min_duration=timedelta(days=ABOVE_MODEL_DAYS),
        cost_method="the use above the model (kWh) on those days, scaled to a week, at the "
        "site's tariff and carbon factor of the fuel",
        what_to_check="what changed when the CUSUM turned: new equipment, longer hours, a "
        "control setting (a schedule, a setpoint), a fault elsewhere on this list; the energy "
        "page's CUSUM for the building shows the day",
    ),
    Rule(
        name=PV_LOW_YIELD,
        title="PV array yielding less than it should",
        needs=("PV array generation meters' feeds",),
        condition=f"a PV array makes under {100 * PV_SIBLING_SHARE:.0f} % of what its sibling arrays "
        f"make (each against its own previous {PV_WEEKS} weeks); an array alone: its best "
        f"hours of the week reach under {100 * PV_ENVELOPE_SHARE:.0f} % of its clear-day envelope "
        f"(its best hours of the {PV_WEEKS} weeks before)",
        window=timedelta(days=7),
        min_duration=timedelta(days=1),
        cost_method="the missing kWh (what it would have made at its siblings' share, or its "
        "week's yield scaled up to its envelope) at the site's electricity tariff and "
        "carbon factor: each kWh not generated is bought",
        what_to_check="the inverter's display and error log, each string's breaker and "
        "fuses, shading (a tree grown, scaffolding), soiling, and a string's connectors "
        "after a storm",
    ),
    Rule(
        name=HYDRO_NO_OUTPUT,
        title="Hydro turbine idle with water",
        needs=("hydro generation meter's feed", "its flow (or level) feed"),
        condition=f"no output for {HYDRO_MIN_HOURS} h or more in a row while the flow is at or "
        f"above what the turbine ran on in its previous {HYDRO_WEEKS} weeks (the "
        f"{HYDRO_FLOW_QUANTILE}th percentile of the flow while running)",
        window=timedelta(days=7),
        min_duration=timedelta(hours=HYDRO_MIN_HOURS),
        cost_method="each idle hour's output at such a flow before (the median of the hours "
        f"with a flow within {100 * HYDRO_FLOW_BAND:.0f} %), at the site's electricity tariff and "
        "carbon factor",
        what_to_check="the intake screen (leaves, debris), the turbine's controller and its "
        "trip log (a grid fault, an over-speed), the penstock valve, and the generator's "
        "breaker",
    ),
):
    RULES[_rule.name] = _rule
