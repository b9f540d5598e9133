"""Lumped thermal models: solar collector and tank, boiler circuit, rooms. No Django.

Every body is one node with a heat capacity C (J/K) and losses UA (W/K) to its surroundings,
stepped with explicit Euler in sub-steps of at most a fiftieth of the body's time constant
(a room, being linear, is stepped with its exact exponential solution instead).
That is crude next to a building-physics package, but it has the behaviour to watch: a room
warms only while its radiator valve is open and the boiler and pump are running, and cools
towards the outside temperature otherwise; the tank charges only while the solar pump runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

WATER_CP = 4186.0  # J/(kg·K)


def _substeps(dt_s: float, capacity: float, conductance: float) -> tuple[int, float]:
    """How many Euler sub-steps keep dt below a fifth of the fastest time constant."""
    if dt_s <= 0:
        return 0, 0.0
    limit = capacity / (50.0 * max(conductance, 1e-9))
    n = max(1, int(dt_s / limit) + 1)
    return n, dt_s / n


@dataclass
class SolarThermal:
    """Flat-plate collector (a few m²) feeding a hot-water tank through a pumped loop.

    Collector gain follows the Hottel–Whillier form η0·G − UL·(Tc − Ta) per m²; with the pump
    running, the loop moves heat m·cp·(Tc − Tt)·ε into the tank; with it stopped, the collector
    stagnates (heats up in sun) and the tank only loses heat.
    """

    area_m2: float = 6.0
    optical_efficiency: float = 0.78
    loss_w_m2k: float = 4.0
    collector_capacity_j_k: float = 60_000.0  # absorber, glass and the fluid in it
    loop_flow_kg_s: float = 0.08
    exchanger_effectiveness: float = 0.7
    tank_litres: float = 300.0
    tank_loss_w_k: float = 2.0
    collector_c: float = 15.0
    tank_c: float = 40.0
    # A backup immersion heater keeps the tank usable when the sun cannot (thermostat 42–45 °C).
    backup_w: float = 3000.0
    backup_on_below_c: float = 42.0
    backup_off_above_c: float = 45.0
    backup_on: bool = False
    last_power_w: float = 0.0  # solar heat delivered into the tank during the last step

    @property
    def tank_capacity_j_k(self) -> float:
        return self.tank_litres * WATER_CP  # 1 litre of water ≈ 1 kg

    def step(
        self,
        dt_s: float,
        irradiance_w_m2: float,
        ambient_c: float,
        pump_on: bool,
        tank_room_c: float = 15.0,
        draw_w: float = 0.0,
    ) -> None:
        """`draw_w`: hot water used (taps), taken from the tank while it is above the room."""
        loop_conductance = (
            self.loop_flow_kg_s * WATER_CP * self.exchanger_effectiveness if pump_on else 0.0
        )
        fastest = max(self.area_m2 * self.loss_w_m2k + loop_conductance, self.tank_loss_w_k)
        n, h = _substeps(dt_s, self.collector_capacity_j_k, fastest)
        delivered_j = 0.0
        for _ in range(n):
            gain = self.area_m2 * (
                self.optical_efficiency * irradiance_w_m2
                - self.loss_w_m2k * (self.collector_c - ambient_c)
            )
            to_tank = loop_conductance * (self.collector_c - self.tank_c)
            tank_loss = self.tank_loss_w_k * (self.tank_c - tank_room_c)
            if self.tank_c > tank_room_c:
                tank_loss += draw_w
            if self.tank_c < self.backup_on_below_c:
                self.backup_on = True
            elif self.tank_c > self.backup_off_above_c:
                self.backup_on = False
            backup = self.backup_w if self.backup_on else 0.0
            self.collector_c += h * (gain - to_tank) / self.collector_capacity_j_k
            self.tank_c += h * (to_tank + backup - tank_loss) / self.tank_capacity_j_k
            delivered_j += to_tank * h
        if n:
            self.last_power_w = delivered_j / dt_s


@dataclass
class BoilerCircuit:
    """The boiler's flow temperature: heats towards the boiler setpoint while the boiler fires
    and the circulation pump runs, and falls back towards the boiler-house air otherwise."""

    flow_c: float = 20.0
    boiler_setpoint_c: float = 75.0
    boiler_power_w: float = 24_000.0
    water_capacity_j_k: float = 200.0 * WATER_CP  # boiler, pipework and radiators
    standing_loss_w_k: float = 30.0
    plant_room_c: float = 15.0
    last_fuel_power_w: float = 0.0

    def step(
        self, dt_s: float, boiler_on: bool, pump_on: bool, load_w: float, other_w: float = 0.0
    ) -> None:
        """`load_w`: heat the radiators drew from the water during this step; `other_w`: heat
        from the heat main's other sources (each with its own high limit at the set point)."""
        power = (self.boiler_power_w if boiler_on else 0.0) + other_w
        firing = power > 0 and pump_on and self.flow_c < self.boiler_setpoint_c
        self.last_fuel_power_w = power if firing else 0.0
        n, h = _substeps(dt_s, self.water_capacity_j_k, self.standing_loss_w_k + 1.0)
        for _ in range(n):
            fire = power if (firing and self.flow_c < self.boiler_setpoint_c) else 0
            loss = self.standing_loss_w_k * (self.flow_c - self.plant_room_c)
            self.flow_c += h * (fire - loss - load_w) / self.water_capacity_j_k

    @property
    def hot(self) -> bool:
        """Water warm enough to heat a room."""
        return self.flow_c > 30.0


@dataclass
class Room:
    """A room as one thermal mass: radiator gain K·(T_flow − T_room) while its valve is open and
    water circulates; fabric and ventilation loss UA·(T_room − T_out)."""

    name: str = "room"
    temperature_c: float = 14.0
    capacity_j_k: float = 3.0e6  # air, furniture and the inner skin of the walls
    loss_w_k: float = 150.0
    radiator_w_k: float = 80.0  # ≈ 4 kW at a 50 K mean water-to-air difference
    last_heat_w: float = 0.0
    # An open window: extra ventilation loss. The room is one lumped mass (air, furniture,
    # walls) but its sensor reads the air, which a wide-open casement cools far faster than
    # the walls; 900 W/K puts the fall the sensor sees at ~1 K in 5 min with the radiator on,
    # the kind of drop open-window detection looks for (control/engine/open_window.py).
    window_open: bool = False
    window_w_k: float = 900.0

    def step(
        self, dt_s: float, outside_c: float, valve_open: bool, flow_c: float, circulating: bool
    ) -> None:
        """Exact solution of C·dT/dt = K·(T_flow − T) − UA·(T − T_out) over dt, flow held."""
        if dt_s <= 0:
            return
        heating = valve_open and circulating and flow_c > self.temperature_c
        k = self.radiator_w_k if heating else 0.0
        loss = self.loss_w_k + (self.window_w_k if self.window_open else 0.0)
        conductance = k + loss
        settles_at = (k * flow_c + loss * outside_c) / conductance
        start = self.temperature_c
        decay = math.exp(-dt_s * conductance / self.capacity_j_k)
        self.temperature_c = settles_at + (start - settles_at) * decay
        # Mean radiator output over the step, from the exact mean room temperature.
        mean_temp = settles_at + (start - settles_at) * (1.0 - decay) * (
            self.capacity_j_k / (conductance * dt_s)
        )
        self.last_heat_w = k * max(0.0, flow_c - mean_temp)


@dataclass
class Store:
    """A heat main's buffer store as two layers of water, top and bottom, moved by its pumps
    (plug flow, as a stratified store charges and discharges):

    - charging: the boiler-house water enters the top, the top's water moves down, the bottom's
      goes back to the sources: the top warms first, then the bottom;
    - discharging: the top's water goes out to the main, the main's return (the rooms' radiators'
      water) enters the bottom: the bottom cools first, then the top. It gives out the heat the
      rooms draw (their load), no more, as the main's own valves would take.

    Each pump moves `flow_kg_s`; a layer exchanges nothing with the other while both stand."""

    top_c: float = 52.0
    bottom_c: float = 48.0
    capacity_j_k: float = 1000.0 * WATER_CP  # 1 m³, half of it in each layer
    flow_kg_s: float = 0.36  # ≈ 1.5 kW/K through its pumps
    loss_w_k: float = 3.0  # to the boiler house
    room_c: float = 15.0
    last_exchange_w: float = 0.0  # heat into the store (negative: out of it) in the last step

    @property
    def temperature_c(self) -> float:
        """The mean of its two layers; setting it gives a store with 4 K between them."""
        return (self.top_c + self.bottom_c) / 2

    @temperature_c.setter
    def temperature_c(self, value: float) -> None:
        self.top_c, self.bottom_c = value + 2.0, value - 2.0

    def step(
        self,
        dt_s: float,
        flow_c: float,
        charging: bool,
        discharging: bool,
        return_c: float | None = None,
        load_w: float = 0.0,
    ) -> None:
        """`flow_c`: the boiler-house water that charges it; `return_c`: the main's return that
        enters its bottom while discharging (default: the flow, which gives nothing); `load_w`:
        the heat the rooms draw, the most a discharge gives out."""
        half = self.capacity_j_k / 2
        conductance = self.flow_kg_s * WATER_CP
        n, h = _substeps(dt_s, half, conductance + self.loss_w_k)
        exchanged_j = 0.0
        back = flow_c if return_c is None else return_c
        for _ in range(n):
            top, bottom = self.top_c, self.bottom_c
            share = 0.0  # of the pump's flow that moves water this sub-step
            if charging and flow_c > bottom:
                share = 1.0
                into_top = conductance * (flow_c - top)
                into_bottom = conductance * (top - bottom)
                exchanged_j += h * conductance * (flow_c - bottom)
            elif discharging and top > back:
                available = conductance * (top - back)
                share = min(1.0, max(0.0, load_w) / available) if available > 0 else 0.0
                into_bottom = share * conductance * (back - bottom)
                into_top = share * conductance * (bottom - top)
                exchanged_j -= h * share * available
            if share == 0.0:
                into_top = into_bottom = 0.0
            self.top_c += h * (into_top - self.loss_w_k / 2 * (top - self.room_c)) / half
            self.bottom_c += h * (into_bottom - self.loss_w_k / 2 * (bottom - self.room_c)) / half
        self.last_exchange_w = exchanged_j / dt_s if dt_s > 0 else 0.0


@dataclass
class MixingValve:
    """The heating circuit's three-port mixing valve and the water after it: the mixed flow
    settles at return + opening × (boiler flow − return), the radiators' return taken as the
    rooms' mean temperature plus a few kelvin, with the lag of the pipe to the flow sensor; the
    water cools towards the plant room when the pump stops."""

    opening: float = 1.0  # 0..1; 1 (straight from the boiler) until its register is written
    flow_c: float = 20.0  # after the valve: what the rooms' radiators get
    lag_s: float = 60.0
    return_above_rooms_k: float = 5.0

    def step(
        self, dt_s: float, boiler_flow_c: float, rooms_c: float, pump_on: bool, plant_room_c: float
    ) -> None:
        if dt_s <= 0:
            return
        if pump_on:
            returning = min(boiler_flow_c, rooms_c + self.return_above_rooms_k)
            opening = min(1.0, max(0.0, self.opening))
            settles_at = returning + opening * (boiler_flow_c - returning)
            lag = self.lag_s
        else:
            settles_at, lag = plant_room_c, 20 * self.lag_s  # still water cools slowly
        self.flow_c = settles_at + (self.flow_c - settles_at) * math.exp(-dt_s / lag)
