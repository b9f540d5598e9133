"""The rules, declared as data: what each needs, its condition, its duration and its cost.

The condition functions live in findings/detect.py (pure); findings/evaluate.py finds each
rule's points through the site model and turns what tripped into Finding rows. Every figure
a rule uses is here, with why, and docs/FINDINGS.md says the same in words.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import timedelta

from control.engine import specs
from control.engine.strategies import optimum_start
from energy import benchmarks
from findings import needs as n

HEATING_UNOCCUPIED = "heating_unoccupied"
SENSOR_FLATLINE = "sensor_flatline"
SHORT_CYCLING = "boiler_short_cycling"
UNDER_SETPOINT = "zone_under_setpoint"
VALVE_PASSING = "valve_passing"
SENSOR_SPIKES = "sensor_spikes"
LOW_DELTA_T = "low_delta_t"
SOLAR_NO_GAIN = "solar_pump_no_gain"
WINDOW_DROPS = "frequent_open_window"
OPTIMUM_PINNED = "optimum_start_pinned"
SENSOR_RANGE = "sensor_out_of_range"
SENSOR_DRIFT = "sensor_drift"


@dataclass(frozen=True, kw_only=True)
class Rule:
    name: str
    title: str
    subject: tuple[str, ...]  # what a finding is about, by Brick class (findings/needs.py)
    needs: tuple[n.Need, ...]  # its points, by Brick class and relation, found in the model
    uses: tuple[str, ...] = ()  # what else it reads that is not a point, in words
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

# Low flow-return ΔT. A circuit designed for a condensing boiler runs a ΔT of about 20 K at
# design (70/50 °C, 55/35 °C); at part load with a fixed-speed pump the ΔT falls with the load.
# Judged only while the boiler fires and the flow is at least LOW_DT_MIN_FLOW_C (a real load,
# not a mild day's low curve), from LOW_DT_SETTLE after it starts (the return lags the flow
# while the circuit's water warms): a ΔT below LOW_DT_K then means water going round without
# giving up its heat (a bypass open, a pump too fast, valves wide open) and a return too warm
# for the boiler to condense. More than LOW_DT_MIN of it in the week, in all, is a fault.
LOW_DT_K = 5.0
LOW_DT_MIN_FLOW_C = 45.0
LOW_DT_SETTLE = timedelta(minutes=30)
LOW_DT_MIN = timedelta(hours=2)

# A solar pump with no gain: commanded ON while the collector reads more than
# SOLAR_NO_GAIN_MARGIN_K colder than the tank (two sensors' tolerance, ±1 K each), for
# SOLAR_NO_GAIN_MIN in one spell: the differential controller stops the pump at ΔT ≤ 4 K, so
# a pump that runs on is held by something else (a stale reading, an override left on, a
# welded relay's command) and carries the tank's heat out to the roof. The collector's frost
# protection (it circulates tank heat on purpose) and the weekly pump exercise are excused.
SOLAR_NO_GAIN_MARGIN_K = 2.0
SOLAR_NO_GAIN_MIN = timedelta(minutes=30)
SOLAR_EXCUSED = frozenset({specs.SOLAR_ANTIFREEZE, specs.PUMP_KICK})
# The pump's draw, when nothing better is known: a fixed-speed circulator of a solar pump
# station draws about 45-90 W over its three speeds; 60 W is its middle. An EC pump draws less.
SOLAR_PUMP_KW = 0.060
# The tank's heat per kelvin, when nothing better is known: a 300 l solar cylinder of water,
# 300 kg × 4.186 kJ/(kg·K) = 1,255.8 kJ/K = 0.3488 kWh/K.
SOLAR_TANK_KWH_PER_K = 300 * 4.186 / 3600
# The fuel a solar circuit's waste is of: its pump's electricity, and the tank's lost heat made
# good by its immersion heater (electric, 1 kWh a kWh; a tank topped up by a boiler costs gas
# instead, not modelled yet).
ELECTRICITY_FUEL = benchmarks.ELECTRICITY

# Frequent open-window drops: more than this many times a week the zone's heating was stopped
# for an open window. Airing a room once a day is good practice; more than that is a window
# left on the latch, a door propped open, a sensor by a draught, or a drop threshold too tight.
WINDOW_DROPS_PER_WEEK = 7
# Heat lost to each drop: the room's fall × the room's heat capacity (ROOM_HEAT_KWH_PER_K),
# the heat the control must put back; a floor (what the walls lost is not counted).

# Optimum start pinned: on more than half the days with a pre-heat, and at least on
# OPTIMUM_PINNED_MIN_DAYS, the pre-heat began at the zone's maximum lead (within a tick or
# two: OPTIMUM_PINNED_TOLERANCE) or the learned rate sits at its bound: the learning has run
# away (a valve or sensor fault teaching it nonsense) or the room cannot warm in time.
OPTIMUM_PINNED_MIN_DAYS = 3
OPTIMUM_PINNED_TOLERANCE = timedelta(minutes=2)
OPTIMUM_RATE_BOUNDS = (optimum_start.MIN_RATE, optimum_start.MAX_RATE)

# Out of range: a room's temperature outside 0-40 °C for RANGE_MIN in one spell. Below 0 °C a
# heated building would have frozen pipes and its frost protection would have run; above
# 40 °C is a plant room or a fire, not an office. What sensors read when broken falls outside:
# a DS18B20's power-on 85 °C and its −127 °C disconnected, an open RTD's hundreds of degrees.
RANGE_LOW_C = 0.0
RANGE_HIGH_C = 40.0
RANGE_MIN = timedelta(hours=2)

# Drift against neighbours: a zone's daily mean less the median of the other zones' of its
# site, wider than DRIFT_BAND_K on the last day and widening by at least DRIFT_K_PER_DAY
# (least-squares over at least DRIFT_MIN_DAYS days). Rooms of one building differ by a kelvin
# or two (sun, a cold corner) but steadily; a sensor ageing or slipping off its wall drifts.
# A day's mean needs DRIFT_MIN_READINGS (half a day of 5-min points); at least
# DRIFT_MIN_NEIGHBOURS other zones make the median: the median of two is their mean, which one
# drifting sensor pulls, so each of the others would seem to drift too; one of three is not.
# The median is still pulled when two of the neighbours are faulty (a stuck sensor, a room a
# stuck-open valve warms): the gap must also widen, the same way, against most neighbours one
# by one, and against at least DRIFT_MIN_NEIGHBOURS of them.
DRIFT_BAND_K = 2.0
DRIFT_K_PER_DAY = 0.25
DRIFT_MIN_DAYS = 4
DRIFT_MIN_READINGS = 144
DRIFT_MIN_NEIGHBOURS = 3

RULES: dict[str, Rule] = {
    r.name: r
    for r in (
        Rule(
            name=HEATING_UNOCCUPIED,
            title="Heating an empty room",
            subject=n.ZONE,
            needs=(n.ZONE_VALVES,),
            uses=("the zone's schedule and bookings", "the strategy that asked for each command"),
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
            subject=n.ZONE,
            needs=(n.ZONE_TEMPERATURE, n.ZONE_VALVES),
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
            subject=n.PLANT,
            needs=(n.PLANT_BOILER,),
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
            subject=n.ZONE,
            needs=(n.ZONE_TEMPERATURE, n.ZONE_VALVES),
            uses=("the zone's schedule and bookings, with their setpoints",),
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
            subject=n.ZONE,
            needs=(n.ZONE_TEMPERATURE, n.ZONE_VALVES, n.ZONE_BOILERS),
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
            subject=n.ZONE,
            needs=(n.ZONE_TEMPERATURE,),
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
        Rule(
            name=LOW_DELTA_T,
            title="Low flow-return ΔT",
            subject=n.PLANT,
            needs=(n.PLANT_BOILER, n.PLANT_FLOW, n.PLANT_RETURN),
            condition=f"the plant's flow less its return reads under {LOW_DT_K:g} K while its "
            f"boiler is ON (from {LOW_DT_SETTLE.seconds // 60} min after it starts) and the "
            f"flow is at least {LOW_DT_MIN_FLOW_C:g} °C, for more than "
            f"{LOW_DT_MIN.seconds // 3600} h of the week in all",
            window=timedelta(days=7),
            min_duration=LOW_DT_MIN,
            cost_method="",
            what_to_check="the circuit's bypass (left open), the pump's speed (too fast for "
            "the load: try a lower speed or constant-pressure mode), radiator valves wide open "
            "or missing their lockshield balancing, and where the two sensors sit (both on the "
            "flow, or the return sensor beside the boiler's own bypass)",
        ),
        Rule(
            name=SOLAR_NO_GAIN,
            title="Solar pump running with no gain",
            subject=n.COLLECTOR,
            needs=(n.COLLECTOR_TEMPERATURE, n.TANK_TEMPERATURE, n.SOLAR_PUMP),
            condition="the solar pump is commanded ON while the collector reads more than "
            f"{SOLAR_NO_GAIN_MARGIN_K:g} K colder than the tank, for at least "
            f"{SOLAR_NO_GAIN_MIN.seconds // 60} min in a spell (collector frost protection and "
            "the weekly pump exercise excused)",
            window=timedelta(days=7),
            min_duration=SOLAR_NO_GAIN_MIN,
            cost_method=f"hours ON with no gain × {SOLAR_PUMP_KW * 1000:g} W (a fixed-speed "
            "solar circulator) plus the tank's fall over those hours × "
            f"{SOLAR_TANK_KWH_PER_K:.4f} kWh/K (a 300 l tank; its immersion heater makes it "
            "good), scaled to a week, at the site's electricity tariff and carbon factor; the "
            "tank's fall also holds any hot water drawn meanwhile",
            what_to_check="what held the pump on (its audit rows: an override left on, a stale "
            "collector reading), the collector sensor (in its pocket, at the collector's "
            "outlet), and the relay (does it release)",
        ),
        Rule(
            name=WINDOW_DROPS,
            title="Frequent open-window drops",
            subject=n.ZONE,
            needs=(n.ZONE_VALVES, n.ZONE_TEMPERATURE),
            uses=("the zone's open-window detection settings",),
            condition="a zone's heating is stopped for an open window (a drop while heating or "
            f"a window contact) more than {WINDOW_DROPS_PER_WEEK} times a week",
            window=timedelta(days=7),
            min_duration=timedelta(),
            cost_method=f"the room's fall at each drop × {ROOM_HEAT_KWH_PER_K:.3f} kWh/K "
            f"(a 60 m² room at 80 kJ/m²K) ÷ {BOILER_EFFICIENCY:g}: the heat put back, scaled "
            f"to a week, at the site's {HEATING_FUEL} tariff and carbon factor; a floor",
            what_to_check="the windows and doors (left on the latch, propped open), where the "
            "sensor is (by a window or a door, in a draught), and the zone's drop threshold "
            "(too small a fall for too long a time)",
        ),
        Rule(
            name=OPTIMUM_PINNED,
            title="Optimum start pinned at its limit",
            subject=n.ZONE,
            needs=(replace(n.ZONE_TEMPERATURE, optional=True),),
            uses=("the zone's optimum start learning log", "its maximum pre-heat"),
            condition="on more than half the days with a pre-heat (at least "
            f"{OPTIMUM_PINNED_MIN_DAYS}), the pre-heat starts at the zone's maximum lead or its "
            f"learned rate sits at a bound ({OPTIMUM_RATE_BOUNDS[0]:g} or "
            f"{OPTIMUM_RATE_BOUNDS[1]:g} min/K)",
            window=timedelta(days=7),
            min_duration=timedelta(),
            cost_method="",
            what_to_check="the zone's learning log (the rate and why it moved): a valve that "
            "does not open or a sensor in the wrong place teaches it a heating rate the room "
            "does not have; then whether the room can warm in time at all (radiators, flow "
            "temperature) and the maximum pre-heat itself",
        ),
        Rule(
            name=SENSOR_RANGE,
            title="Sensor reads out of range",
            subject=n.ZONE,
            needs=(n.ZONE_TEMPERATURE,),
            condition=f"a zone's temperature reads below {RANGE_LOW_C:g} °C or above "
            f"{RANGE_HIGH_C:g} °C for at least {RANGE_MIN.seconds // 3600} h in a spell",
            window=RANGE_MIN,
            min_duration=RANGE_MIN,
            cost_method="",
            what_to_check="the sensor and its wiring (an open or shorted RTD, a DS18B20's "
            "85 °C power-on value or −127 °C when lost), its conversion (kind, calibration, "
            "scale) and whether it is really in the room. The control trusts this reading.",
        ),
        Rule(
            name=SENSOR_DRIFT,
            title="Sensor drifting from its neighbours",
            subject=n.ZONE,
            needs=(n.ZONE_TEMPERATURE,),
            uses=("the other zones' temperatures of its site",),
            condition="a zone's daily mean departs from the median of the other zones of its "
            f"site by more than {DRIFT_BAND_K:g} K on the last day and the gap widens by at "
            f"least {DRIFT_K_PER_DAY:g} K a day over at least {DRIFT_MIN_DAYS} days, and so it does "
            f"against most of those zones one by one (at least {DRIFT_MIN_NEIGHBOURS})",
            window=timedelta(days=7),
            min_duration=timedelta(days=DRIFT_MIN_DAYS),
            cost_method="",
            what_to_check="the sensor against a hand thermometer beside it; its mounting "
            "(slipped behind a radiator, in the sun, on an outside wall), and its battery; "
            "a room that really drifts has a heating fault the other rules name",
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
# The short look, so a step is found the morning after it (issue 30: within a day): the last
# NIGHT_HOURS out-of-hours hours (one weekday night; a weekend's are longer) with at least
# NIGHT_MIN_HOURS of data, their BASE_LOAD_PERCENTILE percentile risen by the same bars
# above the NIGHT_ABOVE_PERCENTILE percentile of the previous weeks' nights (runs of as many
# out-of-hours hours): a meter whose nights vary (frost heaters on cold nights) is judged
# against its own spread. Against nights, not the weeks' base: a week's 10th percentile is
# its weekend's quietest hours, and an ordinary weekday night above that is the building, not
# a fault (the demo's Lecture block). One night, not two: a step on a Thursday evening has
# only one night before Friday evening.
NIGHT_HOURS = 12
NIGHT_MIN_HOURS = 10
NIGHT_ABOVE_PERCENTILE = 90
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
# The short look (with sibling arrays): over the last PV_DAY_HOURS, the hours a sibling made
# at least PV_BRIGHT_SHARE of its clear-day envelope at that hour (a bright hour: a grey day
# has none and is not judged), at least PV_BRIGHT_MIN_HOURS of them; the array's share of
# its own envelope in each, against the sibling's, has a median under PV_SIBLING_SHARE.
PV_DAY_HOURS = 24
PV_BRIGHT_SHARE = 0.6
PV_BRIGHT_MIN_HOURS = 3

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
        subject=n.ELECTRICITY_METER,
        needs=(n.METER_READING, n.NOT_GENERATION),
        uses=("the meter's feed, read hourly, with the four weeks before",),
        condition=f"an electricity meter's out-of-hours base load (the {BASE_LOAD_PERCENTILE}th "
        f"percentile of its hourly means on weekday nights before {OPENS_HOUR:02d}:00 and from "
        f"{CLOSES_HOUR:02d}:00 and at weekends) is at least {BASE_LOAD_MIN_RISE_KW * 1000:g} W "
        f"and {100 * BASE_LOAD_MIN_RISE_RATIO:.0f} % above the median of its previous "
        f"{BASE_LOAD_WEEKS} weeks' over the week, or over its last {NIGHT_HOURS} out-of-hours "
        f"hours (one night) by as much above the {NIGHT_ABOVE_PERCENTILE}th percentile of "
        "the previous weeks' nights",
        window=timedelta(days=7),
        min_duration=timedelta(hours=NIGHT_MIN_HOURS),
        cost_method=f"the rise (kW) × {OUT_OF_HOURS_A_WEEK} out-of-hours hours a week, at the "
        "site's electricity tariff and carbon factor",
        what_to_check="what runs at night and at weekends on this circuit: heaters, lights, "
        "PCs and screens left on, a fridge or a pump with a failing thermostat, a timer lost "
        "after a power cut; walk round at night with the meter's live reading",
    ),
    Rule(
        name=ABOVE_MODEL,
        title="Building using more than its model",
        subject=n.BUILDING,
        needs=(),  # its meters may meter its floors and rooms: the energy page sums them
        uses=(
            "the building's daily use (the energy page's figures)",
            "its energy model or baseline",
        ),
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
        subject=n.PV_ARRAY,
        needs=(n.GENERATED,),
        uses=("its sibling arrays' meters of the same site",),
        condition=f"a PV array makes under {100 * PV_SIBLING_SHARE:.0f} % of what its sibling arrays "
        f"make (each against its own previous {PV_WEEKS} weeks); an array alone: its best "
        f"hours of the week reach under {100 * PV_ENVELOPE_SHARE:.0f} % of its clear-day envelope "
        f"(its best hours of the {PV_WEEKS} weeks before); or, within a day, on at least "
        f"{PV_BRIGHT_MIN_HOURS} bright hours of the last {PV_DAY_HOURS} (a sibling at "
        f"{100 * PV_BRIGHT_SHARE:.0f} % or more of its clear-day envelope) it makes under "
        f"{100 * PV_SIBLING_SHARE:.0f} % of the sibling's share of its envelope",
        window=timedelta(days=7),
        min_duration=timedelta(hours=PV_BRIGHT_MIN_HOURS),
        cost_method="the missing kWh (what it would have made at its siblings' share, or its "
        "week's yield scaled up to its envelope; found on a bright day: the share it fell "
        "short by × what it made in as many hours before) at the site's electricity tariff "
        "and carbon factor: each kWh not generated is bought",
        what_to_check="the inverter's display and error log, each string's breaker and "
        "fuses, shading (a tree grown, scaffolding), soiling, and a string's connectors "
        "after a storm",
    ),
    Rule(
        name=HYDRO_NO_OUTPUT,
        title="Hydro turbine idle with water",
        subject=n.GENERATION_SYSTEM,
        needs=(n.GENERATED, n.WATER_FLOW),
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
