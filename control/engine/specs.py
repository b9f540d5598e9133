"""Plain data the evaluator works on: a snapshot in, decisions out.

Nothing here touches the database, Redis or the network, so the evaluator can be unit-tested
with hand-made snapshots and replayed over recorded history. Times are timezone-aware
datetimes (UTC inside the evaluator) or unix seconds where they come from Redis.

The configuration specs (zone, actuator, plant, weather, solar, kick, exception day) are
keyword-only and carry no defaults for what a model field holds: control/mapper.py fills them
from the rows, so each default is written once, on the model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, time
from typing import Any

# Strategy names, as written to ActuatorCommand.strategy and shown on the staff pages.
FROST = "frost_protection"
OVER_TEMPERATURE = "over_temperature"
SENSOR_FALLBACK = "sensor_fallback"
OVERRIDE = "manual_override"
BOOKING = "booking"
SCHEDULE = "schedule"
OPTIMUM_START = "optimum_start"
OPTIMUM_STOP = "optimum_stop"
SETBACK = "setback"
IDLE = "off"
HEATING_PLANT = "heating_plant"
PUMP_OVERRUN = "pump_overrun"
PUMP_KICK = "pump_kick"
ANTI_SHORT_CYCLE = "anti_short_cycle"
SOLAR_DIFFERENTIAL = "solar_differential"
SOLAR_EMERGENCY = "solar_emergency_stop"
SOLAR_ANTIFREEZE = "solar_antifreeze"
SOLAR_TANK_MAX = "solar_tank_max"
IDLE_STATE = "idle_state"  # nothing drives the actuator: it is held at its configured idle state
NO_BYPASS = "no_bypass"  # a zone valve held open so a plant without a bypass is not dead-headed
WEATHER = "weather_compensation"  # heating curve / mixing loop output
# A plant without a bypass none of whose circuits can be shown open: the boiler is held off.
NO_OPEN_CIRCUIT = "no_open_circuit"
# A zone whose window is open (a temperature drop while heating, or its contact): heating off.
OPEN_WINDOW = "open_window"
HEAT_MAIN = "heat_main"  # a heat main's lead/lag sequencing of its heat sources
THERMAL_STORE = "thermal_store"  # a heat main's store: charged by its sources, discharged to it

# Actuators that open a zone's circuit: what a pump without a bypass needs, and what a zone
# takes heat through.
VALVE_KINDS = frozenset({"valve", "radiator"})

# Decisions from these strategies beat a manual override and are never delayed by min on/off.
SAFETY_STRATEGIES = frozenset(
    {FROST, OVER_TEMPERATURE, SOLAR_EMERGENCY, SOLAR_ANTIFREEZE, SOLAR_TANK_MAX}
)


@dataclass(frozen=True)
class Reading:
    t: float  # unix seconds
    value: float


@dataclass(frozen=True)
class PeriodSpec:
    weekday: int  # 0 = Monday
    start: time
    end: time
    setpoint: float | None = None


@dataclass(frozen=True, kw_only=True)
class ExceptionSpec:
    day: date
    occupied: bool
    start: time | None = None
    end: time | None = None
    description: str = ""


@dataclass(frozen=True)
class ScheduleSpec:
    name: str
    periods: tuple[PeriodSpec, ...] = ()
    exceptions: tuple[ExceptionSpec, ...] = ()


@dataclass(frozen=True)
class BookingSpec:
    title: str
    start: datetime
    end: datetime
    setpoint: float | None = None


@dataclass(frozen=True)
class OverrideSpec:
    state: bool
    expires: datetime
    reason: str
    user_id: int | None = None
    user_name: str = ""
    id: int | None = None
    setpoint: float | None = None  # a zone held at this °C (thermostat) instead of forced


@dataclass(frozen=True)
class OutputOverrideSpec:
    """An operator holding a plant's analogue output (control/models.py OutputOverride)."""

    value: float  # valve % (mixing valve) or flow set point °C (modulating boiler)
    expires: datetime
    reason: str
    user_id: int | None = None
    user_name: str = ""
    id: int | None = None


@dataclass(frozen=True)
class Window:
    """One occupancy: from a booking or a schedule period, with the setpoint it wants."""

    start: datetime
    end: datetime
    setpoint: float
    label: str  # "Booking 'Yoga'" / "Schedule 'Office'"
    source: str  # BOOKING or SCHEDULE


@dataclass(frozen=True, kw_only=True)
class WindowSpec:
    """A zone's open-window detection (control/models.py WindowDetection)."""

    detect_drop: bool
    drop_k: float  # a fall of this much (K)…
    drop_window_s: int  # …within this long, while the zone calls for heat, is an open window
    pause_s: int  # heating stops this long after a drop, then resumes on its own
    contact_name: str  # "" = no contact configured
    contact_open: int  # the value the contact reads when open (1 or 0)


@dataclass(frozen=True, kw_only=True)
class ZoneSpec:
    """A zone (control/models.py Zone and its ZoneTuning). No defaults for what the model
    carries: control/mapper.py fills every field from a row, so a default lives once, on the
    model."""

    id: int
    name: str
    slug: str
    comfort_setpoint: float
    setback_setpoint: float | None
    frost_on: float
    frost_off: float
    max_temperature: float
    hysteresis: float
    optimum_start: bool
    optimum_stop: bool
    max_preheat_min: int
    heating_rate_min_per_k: float
    cooling_rate_min_per_k: float
    coast_allowance_k: float
    sensor_stale_after_s: int
    has_sensor: bool
    sensor_name: str  # for reasons and alarms: "sensor 'Hall-t' stale since 08:40"
    # Sensor lost while occupied: run a fixed duty cycle instead of leaving the room cold
    # (from the settings, bms/settings.py).
    fallback_duty_pct: float
    fallback_period_s: int
    limit_band_k: float  # over-temperature releases at max_temperature − this
    reading: Reading | None = None
    schedule: ScheduleSpec | None = None
    bookings: tuple[BookingSpec, ...] = ()
    override: OverrideSpec | None = None
    actuator_ids: tuple[int, ...] = ()
    # Open-window detection (None: off) and the window contact's latest reading.
    window: WindowSpec | None = None
    window_contact: Reading | None = None


@dataclass(frozen=True, kw_only=True)
class ActuatorSpec:
    """An actuator (sensors/models.py Actuator) with its runtime state (control/runtime.py)."""

    id: int
    name: str
    kind: str
    min_on_s: int
    min_off_s: int
    is_on: bool | None = None  # None: unknown (never commanded, or runtime state lost)
    changed_at: float | None = None  # unix seconds of the last switch
    last_off_at: float | None = None  # unix seconds it last went off
    override: OverrideSpec | None = None
    fault: bool = False
    # What the plant confirmed, not what we commanded: `confirmed` is True when the device read
    # back `is_on` at the last tick (a node: acknowledged it). A valve counts as open for heat
    # demand and the no-bypass rule only when it is `confirmed_open`.
    confirmed: bool = False
    last_on_at: float | None = None  # unix seconds it last went on
    # When it first read back ON in its latest on-period (None: never since its state was
    # known): a boiler only has a pump overrun if it was confirmed firing.
    on_confirmed_at: float | None = None
    # What the relay does when nothing drives it (False = OFF): held there, not left wherever
    # its last driver put it.
    idle_state: bool
    # Who drove it at the last tick ("zone 'Hall'", "heating plant 'Boiler house'"; "" = nobody)
    # and, once released, whom it was released from: the idle reason names them.
    owner: str = ""
    released_from: str = ""
    disabled_zone: str = ""  # it belongs to a zone that is disabled (not controlled)

    @property
    def confirmed_open(self) -> bool:
        """ON as the device itself last reported it (not merely commanded ON)."""
        return self.is_on is True and self.confirmed and not self.fault

    @property
    def confirmed_fired(self) -> bool:
        """It read back ON at least once in its latest on-period (which may have ended)."""
        if self.on_confirmed_at is None:
            return False
        return self.last_on_at is None or self.on_confirmed_at >= self.last_on_at


@dataclass(frozen=True, kw_only=True)
class KickSpec:
    """Weekly pump kick: run a pump that has stood idle, so it does not seize."""

    idle_s: int
    run_s: int


@dataclass(frozen=True, kw_only=True)
class WeatherSpec:
    """A plant's weather compensation: the heating curve and where its output goes
    (control/models.py WeatherCompensation)."""

    mode: str  # "mixing_valve" or "boiler_setpoint" (a modulating boiler's flow set point)
    slope: float
    shift_k: float
    room_influence: float  # K of flow per K the index room is below its set point
    flow_min_c: float
    flow_max_c: float
    flow_limit_c: float  # over-temperature: valve closed / set point at flow min
    output: str  # "register", "three_point" or "bacnet"
    kp: float  # % valve per K
    ti_s: float
    # Holding register output (0-10 V / 4-20 mA module): scale_low -> raw_min, scale_high -> raw_max.
    host: str
    port: int
    device_id: int
    register: int
    raw_min: int
    raw_max: int
    scale_low: float
    scale_high: float
    # Three-point valve: two relays (actuator ids) and the valve's full stroke time.
    open_id: int | None
    close_id: int | None
    run_time_s: float
    min_pulse_s: float
    max_pulse_s: float  # a pulse must end before the next tick (set from the tick)
    # BACnet analogue output (a controller's analog-output/value, in the output's own unit):
    # its controller's address and answer timeout, the object, our priority, for alarms its name.
    bacnet_address: str
    bacnet_ref: str
    bacnet_priority: int
    bacnet_timeout_s: float
    bacnet_name: str


@dataclass(frozen=True, kw_only=True)
class PlantSpec:
    """A heating plant: a boiler fed by its zones' demand and a circulation pump with overrun."""

    id: int
    name: str
    boiler_id: int
    zone_ids: tuple[int, ...]
    pump_id: int | None
    pump_overrun_s: int
    kick: KickSpec | None
    # Without a bypass the pump must always have an open circuit, or it runs dead-headed.
    has_bypass: bool
    # Plant frost protection from the outside temperature (Siemens RVD/Synco: 1.5 °C).
    outside: Reading | None = None
    outside_name: str = ""
    frost_outside_c: float
    # Outside and flow readings older than this are stale (HeatingPlant.sensor_stale_after_s).
    sensor_stale_after_s: int
    limit_band_k: float  # plant frost releases at frost_outside_c + this
    # Flow temperature: plant frost protection when the zones are blind, and the mixing loop.
    flow: Reading | None = None
    flow_name: str = ""
    flow_frost_c: float
    # The index circuit: its room drives the curve's room influence, its valves are held open
    # for a plant without a bypass. None: the first of the plant's zones by name.
    index_zone_id: int | None = None
    weather: WeatherSpec | None = None
    output_override: OutputOverrideSpec | None = None


@dataclass(frozen=True, kw_only=True)
class HeatSourceSpec:
    """One heat source on a heat main (control/models.py HeatSource): a boiler's relay. Its
    minimum run and off times are its actuator's (a biomass boiler: hours)."""

    id: int
    name: str
    actuator_id: int
    order: int  # position in the sequence before rotation (lowest leads)
    rotate: bool  # takes part in the lead rotation (a biomass base load may not)
    ramp_s: int  # after it starts, no further stage is judged until it has run this long


@dataclass(frozen=True, kw_only=True)
class HeatMainSpec:
    """A heat main fed by several heat sources in lead/lag sequence (control/models.py HeatMain)."""

    id: int
    name: str
    zone_ids: tuple[int, ...]
    sources: tuple[HeatSourceSpec, ...]
    flow: Reading | None = None
    flow_name: str
    flow_setpoint_c: float
    stage_up_k: float  # flow below set point − this…
    stage_up_s: int  # …for this long: the next source starts
    stage_down_k: float  # flow above set point + this…
    stage_down_s: int  # …for this long: the last source stops
    rotate_weekly: bool
    rotate_hours: float  # the lead changes when its run hours exceed the least's by this (0: off)
    sensor_stale_after_s: int


@dataclass(frozen=True, kw_only=True)
class ThermalStoreSpec:
    """A heat main's thermal store (control/models.py ThermalStore), charged by its top and
    bottom temperatures, discharged to the main. Solar thermal feeds it through a solar circuit
    whose tank sensor is the store's bottom sensor."""

    id: int
    name: str
    heat_main_id: int
    top: Reading | None = None
    top_name: str
    bottom: Reading | None = None
    bottom_name: str
    charge_start_c: float  # the top below this: charge…
    charge_stop_c: float  # …until the bottom reaches this
    discharge_min_c: float  # the top at or above this: the store serves the main's demand
    charge_pump_id: int | None
    discharge_pump_id: int | None
    sensor_stale_after_s: int
    # The solar circuits feeding it (their tank sensor is its bottom sensor): while one's pump
    # runs, the sources do not charge the store (thermal_store.py).
    solar_ids: tuple[int, ...] = ()


@dataclass(frozen=True, kw_only=True)
class SolarSpec:
    """A solar thermal circuit: collector and tank sensors, one pump (control/models.py
    SolarCircuit)."""

    id: int
    name: str
    pump_id: int
    collector: Reading | None
    tank: Reading | None
    delta_on: float
    delta_off: float
    tank_max: float
    tank_hysteresis: float
    collector_emergency: float
    emergency_hysteresis: float
    antifreeze_on: float
    antifreeze_off: float
    sensor_stale_after_s: int
    kick: KickSpec | None


@dataclass(frozen=True)
class Snapshot:
    now: datetime
    time_zone: str  # the site's (settings.TIME_ZONE), for wall-clock schedules and reasons
    zones: tuple[ZoneSpec, ...] = ()
    actuators: dict[int, ActuatorSpec] = field(default_factory=dict)
    plants: tuple[PlantSpec, ...] = ()
    solars: tuple[SolarSpec, ...] = ()
    memory: dict[str, Any] = field(default_factory=dict)
    heat_mains: tuple[HeatMainSpec, ...] = ()
    stores: tuple[ThermalStoreSpec, ...] = ()  # what strategies remember between ticks


@dataclass(frozen=True)
class Decision:
    actuator_id: int
    state: bool
    reason: str
    strategy: str
    user_id: int | None = None
    owner: str = ""  # who drives the actuator ("zone 'Hall'"); "" = not controlled
    released_from: str = ""  # not controlled: whom it was released from


@dataclass(frozen=True)
class ZoneResult:
    zone_id: int
    demand: bool
    mode: str  # the strategy that decided
    reason: str
    temperature: float | None = None
    target: float | None = None
    flags: tuple[str, ...] = ()
    preheat_min: float | None = None
    user_id: int | None = None


@dataclass(frozen=True)
class OutputDecision:
    """A weather-compensated plant's output this tick."""

    plant_id: int
    flow_setpoint_c: float
    value: float  # what the output carries: flow set point (°C) or valve position (%)
    unit: str  # "°C" or "%"
    reason: str
    strategy: str
    raw: int | None = None  # holding register output: raw counts (None for the others)
    pulse_actuator_id: int | None = None  # three-point: the relay to pulse
    pulse_s: float = 0.0
    # What the staff page shows beside it (control/outputs.py keeps it in Redis).
    outside_c: float | None = None
    flow_c: float | None = None
    position_pct: float | None = None  # three-point: the estimated position after the pulse
    owner: str = ""  # "weather compensation", "manual override by …", "frost protection", …
    user_id: int | None = None  # a manual override's user (audit rows)


@dataclass
class Evaluation:
    decisions: dict[int, Decision]
    zones: dict[int, ZoneResult]
    memory: dict[str, Any]
    # Things the runner acts on after the tick, e.g. an occupancy start to learn from.
    events: list[dict[str, Any]] = field(default_factory=list)
    # Conditions that need a person (alarm key -> message): the runner raises each one while
    # it lasts (emailed once, when it opens) and clears the ones that ended.
    alarms: dict[str, str] = field(default_factory=dict)
    # Weather-compensated plants: plant id -> what its analogue output / valve does.
    outputs: dict[int, OutputDecision] = field(default_factory=dict)
