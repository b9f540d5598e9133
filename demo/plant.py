"""The whole simulated site stepped together: weather, PV, solar thermal, hydro, boiler, rooms,
the grid meter, and what each node would report. No Django.

Time has two rates. The sun and the outside temperature follow the real wall clock (the site
shows today's sun); everything with a state (clouds, river, wind, water and room temperatures)
advances `speed` times faster, so at --speed 60 a room warms in minutes instead of an hour.
Counters and energy totals (anemometer pulses, meter kWh) integrate over *real* time, so the
rates the server derives from them stay physically right whatever the speed.
"""

from __future__ import annotations

import math
import random
import struct
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from demo import layout, solar
from demo.faults import PV_STRINGS, FaultPlan
from demo.hydro import RiverFlow, Turbine
from demo.thermal import BoilerCircuit, MixingValve, Room, SolarThermal, Store
from demo.weather import Clouds, OrnsteinUhlenbeck, outside_temperature
from demo.wind import Anemometer, Wind

PV_PEAK_KW = 10.0


@dataclass
class Coils:
    """Relay board outputs as the simulated plant sees them."""

    boiler: bool = False
    heating_pump: bool = False
    solar_pump: bool = False
    valves: dict[str, bool] = field(default_factory=dict)  # room slug -> open
    biomass: bool = False  # the heat main's sources
    gas_boiler_2: bool = False
    store_charge: bool = False  # the heat main's store pumps
    store_discharge: bool = False
    # The board's analogue output: the mixing valve's holding register (raw counts, 0..
    # layout.MIXING_VALVE_RAW_MAX); None leaves the valve where it is.
    mixing_valve_raw: int | None = None

    @classmethod
    def from_bits(cls, bits: list[bool], holding: list[int] | None = None) -> Coils:
        def bit(i: int) -> bool:
            return bool(bits[i]) if i < len(bits) else False

        raw = None
        if holding is not None and layout.REG_MIXING_VALVE < len(holding):
            raw = holding[layout.REG_MIXING_VALVE]

        return cls(
            boiler=bit(layout.COIL_BOILER),
            heating_pump=bit(layout.COIL_HEATING_PUMP),
            solar_pump=bit(layout.COIL_SOLAR_PUMP),
            valves={room.slug: bit(room.coil) for room in layout.ROOMS},
            biomass=bit(layout.COIL_BIOMASS),
            gas_boiler_2=bit(layout.COIL_GAS_BOILER_2),
            store_charge=bit(layout.COIL_STORE_CHARGE),
            store_discharge=bit(layout.COIL_STORE_DISCHARGE),
            mixing_valve_raw=raw,
        )

    def describe(self) -> str:
        on = [
            name
            for name, state in (
                ("boiler", self.boiler),
                ("heating pump", self.heating_pump),
                ("solar pump", self.solar_pump),
                ("biomass", self.biomass),
                ("gas boiler 2", self.gas_boiler_2),
                ("store charge", self.store_charge),
                ("store discharge", self.store_discharge),
            )
            if state
        ]
        on += [f"valve {slug}" for slug, state in self.valves.items() if state]
        described = ", ".join(on) if on else "all off"
        if self.mixing_valve_raw is not None:
            described += f"; mixing valve {mixing_opening(self.mixing_valve_raw):.0%}"
        return described


def mixing_opening(raw: int) -> float:
    """The mixing valve's opening (0..1) for its register's raw counts, clamped as the output
    module clamps its 0-10 V."""
    return min(1.0, max(0.0, raw / layout.MIXING_VALVE_RAW_MAX))


BIOMASS_W = 40_000.0
BIOMASS_RAMP_S = 1800.0
GAS_BOILER_2_W = 24_000.0


class DemoPlant:
    def __init__(self, now: datetime, seed: int | None = None) -> None:
        self.rng = random.Random(seed)
        self.tz = ZoneInfo(layout.TIME_ZONE)
        self.clouds = Clouds(rng=self.rng)
        self.river = RiverFlow(rng=self.rng)
        self.turbine = Turbine()
        self.wind = Wind(rng=self.rng)
        self.anemometer = Anemometer()
        self.humidity = OrnsteinUhlenbeck(mean=65.0, sigma=8.0, tau_s=3 * 3600.0, rng=self.rng)
        self.grid_volts = OrnsteinUhlenbeck(mean=240.0, sigma=2.0, tau_s=120.0, rng=self.rng)
        self.outside_c = self._outside(now)
        self.solar_thermal = SolarThermal(collector_c=self.outside_c, tank_c=44.0)
        self.circuit = BoilerCircuit(flow_c=max(self.outside_c, 15.0))
        self.mixing = MixingValve(flow_c=self.circuit.flow_c)
        self.rooms = {
            room.slug: Room(name=room.name, temperature_c=max(room.start_c, self.outside_c + 2))
            for room in layout.ROOMS
        }
        self.coils = Coils(valves={room.slug: False for room in layout.ROOMS})
        self.biomass_since: datetime | None = None
        self.store = Store()
        self.import_kwh = 12_000.0 + self.rng.uniform(0, 500)  # a meter that has been in a while
        self.now = now
        # Faults injected from known times (demo/faults.py); an empty plan changes nothing.
        self.faults = FaultPlan()
        self.irradiance = 0.0
        self.pv_w = 0.0
        self.pv_strings_w = dict.fromkeys(PV_STRINGS, 0.0)
        self.hydro_w = 0.0
        self.grid_w = 0.0
        self._update_instantaneous(now)

    def resume(self, last: dict[str, float]) -> list[str]:
        """Carry on from the last recorded temperatures (keys: `room:<slug>`, `tank`,
        `collector`, `flow`, `heating`), so a restarted demo has no cliffs in its charts. Values outside
        -30..110 °C are ignored (a broken feed must not start a room at 500 °C). Returns the
        keys used."""
        used = []
        for key, value in last.items():
            if not -30.0 <= value <= 110.0:
                continue
            kind, _, slug = key.partition(":")
            if kind == "room" and slug in self.rooms:
                self.rooms[slug].temperature_c = value
            elif key == "tank":
                self.solar_thermal.tank_c = value
            elif key == "collector":
                self.solar_thermal.collector_c = value
            elif key == "flow":
                self.circuit.flow_c = value
            elif key == "heating":
                self.mixing.flow_c = value
            else:
                continue
            used.append(key)
        return used

    def _outside(self, now: datetime) -> float:
        local = now.astimezone(self.tz)
        hour = local.hour + local.minute / 60.0 + local.second / 3600.0
        return outside_temperature(local.timetuple().tm_yday, hour)

    def _update_instantaneous(self, now: datetime) -> None:
        elevation = solar.solar_elevation_deg(layout.LATITUDE, layout.LONGITUDE, now)
        self.irradiance = solar.clear_sky_ghi(elevation) * self.clouds.clear_fraction
        # the array in its strings, each of half its peak: a shaded one makes less (faults.py)
        share = PV_PEAK_KW / len(PV_STRINGS)
        self.pv_strings_w = {
            s: solar.pv_power_w(self.irradiance, share) * self.faults.pv_share(s, now)
            for s in PV_STRINGS
        }
        self.pv_w = sum(self.pv_strings_w.values())
        self.hydro_w = self.turbine.power_w(self.river.flow_l_s)
        self.outside_c = self._outside(now)
        self.grid_w = self.site_demand_w(now) - self.pv_w - self.hydro_w

    def _open(self, now: datetime) -> bool:
        """The visitor centre is open 10:00–17:00 local time."""
        return 10 <= now.astimezone(self.tz).hour < 17

    def _heat_main_w(self, now: datetime, coils: Coils) -> float:
        """Heat from the heat main's sources: the biomass boiler ramps to its 40 kW over
        BIOMASS_RAMP_S after it starts (a wood-chip boiler comes to heat slowly); the second
        gas boiler gives its 24 kW at once."""
        if coils.biomass and self.biomass_since is None:
            self.biomass_since = now
        elif not coils.biomass:
            self.biomass_since = None
        heat = 0.0
        if self.biomass_since is not None:
            ramp = (now - self.biomass_since).total_seconds() / BIOMASS_RAMP_S
            heat += BIOMASS_W * min(1.0, max(0.0, ramp))
        if coils.gas_boiler_2:
            heat += GAS_BOILER_2_W
        return heat

    def _airing(self, slug: str, now: datetime) -> bool:
        """The room's window is open for its daily airing (layout.RoomSpec.airing_at)."""
        spec = next((r for r in layout.ROOMS if r.slug == slug), None)
        if spec is None or spec.airing_at is None:
            return False
        local = now.astimezone(self.tz)
        opens = local.replace(hour=spec.airing_at[0], minute=spec.airing_at[1], second=0)
        return opens <= local < opens + timedelta(minutes=spec.airing_min)

    def site_demand_w(self, now: datetime) -> float:
        """Electrical load of the site: base load, the visitor centre by day, the plant."""
        load = 2500.0 + (3500.0 if self._open(now) else 0.0)
        load += 90.0 * self.coils.heating_pump + 60.0 * self.coils.solar_pump
        load += 150.0 * self.coils.boiler  # burner fan and controls
        load += self.faults.extra_load_w(now)  # something left on
        return load

    def step(self, now: datetime, real_dt_s: float, speed: float, coils: Coils) -> None:
        """Advance to `now`: stateful physics by real_dt_s × speed, counters by real_dt_s."""
        sim_dt = max(0.0, real_dt_s) * speed
        if self.faults.solar_pump_forced(now) and not coils.solar_pump:
            coils = replace(coils, solar_pump=True)  # held on at the panel, whatever the relay
        self.coils = coils
        self.now = now
        self.clouds.step(sim_dt)
        self.river.step(sim_dt)
        self.wind.step(sim_dt)
        self.humidity.step(sim_dt)
        self.grid_volts.step(real_dt_s)
        self._update_instantaneous(now)

        # The visitor centre café draws hot water while it is open.
        draw = 400.0 if self._open(now) else 0.0
        self.solar_thermal.step(
            sim_dt, self.irradiance, self.outside_c, coils.solar_pump, draw_w=draw
        )
        circulating = coils.heating_pump
        load = sum(room.last_heat_w for room in self.rooms.values())
        self.circuit.plant_room_c = max(self.outside_c + 5.0, 10.0)
        # The store's pumps circulate the boiler-house water through it on their own; a
        # discharge carries the rooms' load, its return the radiators' water (the mixing
        # valve's return: the rooms plus a few kelvin).
        rooms_c = sum(r.temperature_c for r in self.rooms.values()) / len(self.rooms)
        returning = min(self.circuit.flow_c, rooms_c + self.mixing.return_above_rooms_k)
        self.store.step(
            sim_dt, self.circuit.flow_c, coils.store_charge, coils.store_discharge,
            return_c=returning, load_w=load,
        )  # fmt: skip
        circulating_water = coils.heating_pump or coils.store_charge or coils.store_discharge
        self.circuit.step(
            sim_dt, coils.boiler, circulating_water, load + self.store.last_exchange_w,
            self._heat_main_w(now, coils),
        )  # fmt: skip
        # The rooms' radiators get the water after the mixing valve, which the plant's weather
        # compensation steers to its heating curve.
        if coils.mixing_valve_raw is not None:
            self.mixing.opening = mixing_opening(coils.mixing_valve_raw)
        self.mixing.step(
            sim_dt, self.circuit.flow_c, rooms_c, circulating, self.circuit.plant_room_c
        )
        for slug, room in self.rooms.items():
            room.window_open = self.faults.window_open(slug, self._airing(slug, now), now)
            room.step(
                sim_dt,
                self.outside_c,
                self.faults.valve_open(slug, coils.valves.get(slug, False), now),
                self.mixing.flow_c,
                circulating,
            )
        self.anemometer.step(real_dt_s, self.wind.speed_m_s)
        self.import_kwh += max(0.0, self.grid_w) * real_dt_s / 3.6e6

    # --- what the nodes report -------------------------------------------------------------

    def http_values(self) -> dict[str, dict[str, float]]:
        """Values per HTTP (emonTx/emonTH) node name, as /input/bulk {name: value} objects."""
        values: dict[str, dict[str, float]] = {
            "emontx-pv": {"power": round(self.pv_w, 1), "irradiance": round(self.irradiance, 1)},
            "emontx-solarthermal": {
                "collector": round(self.solar_thermal.collector_c, 2),
                "tank": round(self.solar_thermal.tank_c, 2),
                # A heat meter counts heat into the tank; antifreeze circulation is not "gain".
                "heat": round(max(0.0, self.solar_thermal.last_power_w), 1),
            },
            "emontx-store": {
                "top": round(self.store.top_c, 2),
                "bottom": round(self.store.bottom_c, 2),
            },
            "emontx-hydro": {
                "power": round(self.hydro_w, 1),
                "flow": round(self.river.flow_l_s, 2),
            },
        }
        assert self.humidity.value is not None
        for slug, room in self.rooms.items():
            # Heating a room lowers its relative humidity (~3 %RH per K near room temperature).
            humidity = self.humidity.value - 3.0 * (room.temperature_c - 15.0)
            values[f"emonth-{slug}"] = {
                "temperature": round(self.faults.reading(slug, room.temperature_c, self.now), 2),
                "humidity": round(min(95.0, max(25.0, humidity)), 1),
            }
        return values

    def jeelib_frames(self) -> dict[int, list[int]]:
        """16-bit values per JeeLib node id: hundredths of °C (int16); the anemometer's
        counter (uint16)."""
        return {
            10: [
                _hundredths(self.circuit.flow_c),
                _hundredths(self.outside_c),
                _hundredths(self.mixing.flow_c),
            ],
            11: [self.anemometer.counter],
        }

    def meter_values(self) -> dict[str, float]:
        assert self.grid_volts.value is not None
        volts = self.grid_volts.value
        return {
            "voltage": volts,
            "current": abs(self.grid_w) / volts,
            "power": self.grid_w,
            "frequency": 50.0 + 0.03 * math.sin(self.now.timestamp() / 37.0),
            "import_kwh": self.import_kwh,
        }

    def summary(self) -> str:
        rooms = ", ".join(
            f"{slug} {room.temperature_c:.1f}°C" + (" (window open)" if room.window_open else "")
            for slug, room in self.rooms.items()
        )
        return (
            f"PV {self.pv_w / 1000:.2f} kW, hydro {self.hydro_w / 1000:.2f} kW "
            f"(river {self.river.flow_l_s:.0f} l/s), collector {self.solar_thermal.collector_c:.1f}°C "
            f"tank {self.solar_thermal.tank_c:.1f}°C, boiler flow {self.circuit.flow_c:.1f}°C, "
            f"heating flow {self.mixing.flow_c:.1f}°C, "
            f"outside {self.outside_c:.1f}°C, wind {self.wind.speed_m_s:.1f} m/s; rooms: {rooms}; "
            f"relays: {self.coils.describe()}"
        )


def _hundredths(value: float) -> int:
    return max(-32768, min(32767, round(value * 100)))


def jeelib_line(node_id: int, values: list[int], rssi: int = -60, datacodes: str = "h") -> str:
    """A JeeLib RF12demo/RFM69 serial line: `OK <id> <little-endian value bytes> (<rssi>)`."""
    codes = datacodes * len(values) if len(datacodes) == 1 else datacodes
    payload = struct.pack("<" + codes, *values)
    return f"OK {node_id} {' '.join(str(b) for b in payload)} ({rssi})"


def float32_registers(value: float) -> list[int]:
    """A float32 as two 16-bit registers, high word first (SDM630 order)."""
    high, low = struct.unpack(">HH", struct.pack(">f", value))
    return [high, low]
