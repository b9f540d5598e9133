"""Room, boiler circuit and solar thermal models."""

import pytest

from demo.thermal import BoilerCircuit, Room, SolarThermal, Store

HOUR = 3600.0


def _run_room(
    valve: bool, boiler: bool, pump: bool, hours: float = 2.0
) -> tuple[Room, BoilerCircuit]:
    room = Room(temperature_c=14.0)
    circuit = BoilerCircuit(flow_c=20.0)
    for _ in range(int(hours * 60)):
        circuit.step(60.0, boiler_on=boiler, pump_on=pump, load_w=room.last_heat_w)
        room.step(60.0, outside_c=6.0, valve_open=valve, flow_c=circuit.flow_c, circulating=pump)
    return room, circuit


def test_room_warms_when_valve_boiler_and_pump_are_on():
    room, circuit = _run_room(valve=True, boiler=True, pump=True)
    assert circuit.flow_c > 60
    assert room.temperature_c > 19.0  # a booking two hours away is comfortable in time


@pytest.mark.parametrize(
    "valve,boiler,pump", [(False, True, True), (True, False, True), (True, True, False)]
)
def test_room_cools_unless_all_of_valve_boiler_and_pump_are_on(valve, boiler, pump):
    room, _ = _run_room(valve=valve, boiler=boiler, pump=pump)
    assert room.temperature_c < 14.0


def test_room_cools_towards_outside_and_never_below_it():
    room = Room(temperature_c=20.0)
    for _ in range(48 * 60):
        room.step(60.0, outside_c=5.0, valve_open=False, flow_c=70.0, circulating=False)
    assert 5.0 <= room.temperature_c < 6.0


def test_one_big_step_matches_many_small_steps():
    big, small = Room(temperature_c=14.0), Room(temperature_c=14.0)
    big.step(HOUR, outside_c=5.0, valve_open=True, flow_c=70.0, circulating=True)
    for _ in range(3600):
        small.step(1.0, outside_c=5.0, valve_open=True, flow_c=70.0, circulating=True)
    assert big.temperature_c == pytest.approx(small.temperature_c, abs=0.05)


def test_boiler_holds_its_setpoint_and_cools_when_off():
    circuit = BoilerCircuit(flow_c=20.0)
    for _ in range(120):
        circuit.step(60.0, boiler_on=True, pump_on=True, load_w=3000.0)
    assert circuit.flow_c == pytest.approx(circuit.boiler_setpoint_c, abs=3.0)
    for _ in range(240):
        circuit.step(60.0, boiler_on=False, pump_on=True, load_w=3000.0)
    assert circuit.flow_c < 40.0


def _sunny_hour(pump_on: bool) -> SolarThermal:
    plant = SolarThermal(collector_c=20.0, tank_c=40.0, backup_w=0.0)
    for _ in range(60):
        plant.step(60.0, irradiance_w_m2=800.0, ambient_c=15.0, pump_on=pump_on)
    return plant


def test_tank_charges_only_while_the_pump_runs():
    pumped = _sunny_hour(pump_on=True)
    stagnant = _sunny_hour(pump_on=False)
    assert pumped.tank_c > 45.0
    assert pumped.last_power_w > 1000.0
    assert stagnant.tank_c < 40.0  # standing loss only
    assert stagnant.last_power_w == 0.0
    assert stagnant.collector_c > 80.0  # stagnating in the sun


def test_collector_cools_to_ambient_at_night():
    plant = SolarThermal(collector_c=60.0, tank_c=50.0)
    for _ in range(6 * 60):
        plant.step(60.0, irradiance_w_m2=0.0, ambient_c=8.0, pump_on=False)
    assert plant.collector_c == pytest.approx(8.0, abs=0.5)
    assert 45.0 < plant.tank_c < 50.0


def test_backup_heater_keeps_the_tank_between_its_thermostat_points():
    plant = SolarThermal(collector_c=5.0, tank_c=30.0)
    temps = []
    for _ in range(24 * 60):
        plant.step(60.0, irradiance_w_m2=0.0, ambient_c=5.0, pump_on=False, draw_w=400.0)
        temps.append(plant.tank_c)
    assert 41.5 < min(temps[6 * 60 :]) and max(temps) < 45.5
    assert plant.last_power_w == 0.0  # backup heat is not solar heat


def test_store_discharge_cools_its_bottom_first_then_its_top_giving_the_rooms_load():
    """The tester saw the store's top and bottom constant while its discharge pump ran: the
    return of the rooms' radiators now enters its bottom and its top goes out to the main."""
    store = Store(top_c=70.0, bottom_c=66.0)
    store.step(600, flow_c=72.0, charging=False, discharging=True, return_c=30.0, load_w=10_000)
    assert store.last_exchange_w == pytest.approx(-10_000, rel=0.01)  # the load, no more
    assert store.bottom_c < 64.0 and store.top_c > 69.0  # the bottom cools first
    # 10 kW for 10 min from 1 m³: the mean falls by ~1.4 K (and a little standing loss).
    assert 66.5 < store.temperature_c < 66.7
    for _ in range(6):
        store.step(600, flow_c=72.0, charging=False, discharging=True, return_c=30.0,
                   load_w=10_000)  # fmt: skip
    assert store.top_c < 66.0 and store.bottom_c < 55.0  # then the top: both fall


def test_store_charge_warms_its_top_first_then_its_bottom_and_stands_still_when_idle():
    store = Store(top_c=50.0, bottom_c=46.0)
    store.step(600, flow_c=75.0, charging=True, discharging=False)
    assert store.top_c > 57.0 and 47.0 < store.bottom_c < store.top_c - 8.0  # top first
    assert store.last_exchange_w > 0
    for _ in range(12):
        store.step(600, flow_c=75.0, charging=True, discharging=False)
    assert 72.0 < store.bottom_c <= store.top_c <= 75.0  # charged through
    before = (store.top_c, store.bottom_c)
    store.step(600, flow_c=75.0, charging=False, discharging=False)
    assert store.last_exchange_w == 0.0
    assert before[0] - 0.1 < store.top_c < before[0] and before[1] - 0.1 < store.bottom_c
    # A discharge pump with no room drawing heat moves no water either.
    store.step(600, flow_c=40.0, charging=False, discharging=True, return_c=30.0, load_w=0.0)
    assert store.last_exchange_w == 0.0
