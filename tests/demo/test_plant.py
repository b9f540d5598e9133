"""The whole simulated plant: relays in, node values out."""

from datetime import UTC, datetime, timedelta

import pytest

from demo import layout
from demo.plant import Coils, DemoPlant, float32_registers, jeelib_line
from sensors.devices.gateways.jeelib import decode_values, parse_line

WINTER_MORNING = datetime(2025, 1, 15, 8, 0, tzinfo=UTC)


def _all_heating_on() -> Coils:
    return Coils(boiler=True, heating_pump=True, valves={r.slug: True for r in layout.ROOMS})


def _run(plant: DemoPlant, coils: Coils, minutes: int, speed: float = 1.0) -> None:
    t = plant.now
    for _ in range(minutes):
        t += timedelta(seconds=60)
        plant.step(t, 60.0, speed, coils)


def test_rooms_warm_only_while_the_relay_board_heats_them():
    plant = DemoPlant(WINTER_MORNING, seed=1)
    start = {slug: room.temperature_c for slug, room in plant.rooms.items()}
    valves = {r.slug: r.slug == "lecture-theatre" for r in layout.ROOMS}
    _run(plant, Coils(boiler=True, heating_pump=True, valves=valves), minutes=90)
    assert plant.rooms["lecture-theatre"].temperature_c > start["lecture-theatre"] + 3
    for slug in ("seminar-room", "workshop", "straw-bale-room"):
        assert plant.rooms[slug].temperature_c < start[slug]


def test_speed_makes_the_rooms_warm_faster_for_the_same_wall_clock_time():
    slow, fast = DemoPlant(WINTER_MORNING, seed=2), DemoPlant(WINTER_MORNING, seed=2)
    _run(slow, _all_heating_on(), minutes=5, speed=1)
    _run(fast, _all_heating_on(), minutes=5, speed=60)
    start = DemoPlant(WINTER_MORNING, seed=2).rooms["workshop"].temperature_c
    # Five real minutes at 60× are five simulated hours of heating.
    assert fast.rooms["workshop"].temperature_c > start + 5
    assert abs(slow.rooms["workshop"].temperature_c - start) < 0.5


def test_speed_does_not_change_counter_rates():
    """Anemometer pulses and meter kWh integrate over real time, so derived rates stay true."""
    plant = DemoPlant(WINTER_MORNING, seed=3)
    before_kwh = plant.import_kwh
    plant.step(WINTER_MORNING + timedelta(seconds=10), 10.0, 60.0, Coils())
    pulses = plant.anemometer.counter
    assert pulses == pytest.approx(plant.wind.speed_m_s * 10 * plant.anemometer.pulses_per_m, abs=2)
    assert plant.import_kwh - before_kwh == pytest.approx(max(0, plant.grid_w) * 10 / 3.6e6)


def test_pv_is_zero_at_night_and_the_grid_meter_sees_demand_minus_generation():
    night = DemoPlant(datetime(2025, 6, 21, 0, 30, tzinfo=UTC), seed=4)
    assert night.http_values()["emontx-pv"]["power"] == 0.0
    noon = DemoPlant(datetime(2025, 6, 21, 12, 15, tzinfo=UTC), seed=4)
    assert noon.pv_w > 1000
    meter = noon.meter_values()
    assert meter["power"] == pytest.approx(noon.site_demand_w(noon.now) - noon.pv_w - noon.hydro_w)
    assert meter["current"] == pytest.approx(abs(meter["power"]) / meter["voltage"])


def test_every_http_node_of_the_layout_gets_values_under_its_input_keys():
    values = DemoPlant(WINTER_MORNING, seed=5).http_values()
    assert set(values) == {spec.name for spec in layout.HTTP_NODES}
    for spec in layout.HTTP_NODES:
        assert set(values[spec.name]) == {i.key for i in spec.inputs}


def test_tank_charges_when_the_relay_board_runs_the_solar_pump():
    noon = datetime(2025, 6, 21, 11, 0, tzinfo=UTC)
    pumped, idle = DemoPlant(noon, seed=6), DemoPlant(noon, seed=6)
    pumped.clouds.latent.value = idle.clouds.latent.value = 5.0  # clear sky
    _run(pumped, Coils(solar_pump=True), minutes=60)
    _run(idle, Coils(solar_pump=False), minutes=60)
    assert pumped.solar_thermal.tank_c > idle.solar_thermal.tank_c + 2


def test_jeelib_line_round_trips_through_the_gateway_parser():
    line = jeelib_line(10, [6512, -215])
    assert line == "OK 10 112 25 41 255 (-60)"
    packet = parse_line(line)
    assert packet.node_id == 10
    assert decode_values(packet.data, "h") == [6512.0, -215.0]


def test_jeelib_frames_carry_hundredths_and_the_raw_counter():
    plant = DemoPlant(WINTER_MORNING, seed=7)
    plant.anemometer.counter = 40000
    frames = plant.jeelib_frames()
    assert frames[10] == [
        round(plant.circuit.flow_c * 100),
        round(plant.outside_c * 100),
        round(plant.mixing.flow_c * 100),
    ]
    assert frames[11] == [40000]  # sent as uint16 (datacodes "H")
    packet = parse_line(jeelib_line(11, frames[11], datacodes="H"))
    assert decode_values(packet.data, "H") == [40000.0]


def test_float32_registers_are_high_word_first():
    assert float32_registers(230.5) == [0x4366, 0x8000]


def test_coils_from_bits_map_the_relay_board():
    bits = [False] * 16
    bits[layout.COIL_BOILER] = True
    bits[layout.ROOMS[2].coil] = True
    coils = Coils.from_bits(bits)
    assert coils.boiler and not coils.heating_pump and not coils.solar_pump
    assert coils.valves == {r.slug: r.slug == layout.ROOMS[2].slug for r in layout.ROOMS}
    assert coils.describe() == f"boiler, valve {layout.ROOMS[2].slug}"
    assert Coils.from_bits([]).describe() == "all off"


def test_the_boards_holding_register_sets_the_mixing_valve_and_out_of_range_is_clamped():
    holding = [0] * layout.RELAY_HOLDING_COUNT
    holding[layout.REG_MIXING_VALVE] = 2500
    coils = Coils.from_bits([False] * 16, holding)
    assert coils.describe() == "all off; mixing valve 25%"
    plant = DemoPlant(WINTER_MORNING, seed=7)
    plant.step(WINTER_MORNING + timedelta(seconds=60), 60.0, 1.0, coils)
    assert plant.mixing.opening == 0.25
    # A raw count past the scale (an engineer's raw max above 10000) is a fully open valve.
    holding[layout.REG_MIXING_VALVE] = 65535
    plant.step(WINTER_MORNING + timedelta(seconds=120), 60.0, 1.0, Coils.from_bits([], holding))
    assert plant.mixing.opening == 1.0


def test_the_store_serves_the_rooms_and_cools_while_its_discharge_pump_runs():
    """The store's top and bottom stayed constant while its discharge pump ran (#27 item 5):
    the boiler-house water was hotter than the store, so it exchanged nothing."""
    plant = DemoPlant(WINTER_MORNING, seed=7)
    plant.store.top_c, plant.store.bottom_c = 72.0, 68.0
    plant.circuit.flow_c = 74.0
    serving = Coils(heating_pump=True, store_discharge=True,
                    valves={r.slug: True for r in layout.ROOMS})  # fmt: skip
    _run(plant, serving, 60)
    assert plant.store.bottom_c < 66.0 and plant.store.top_c < 71.5
    assert plant.store.last_exchange_w < -1000  # heat out to the rooms' water
