"""The demo's "Boiler house" is weather-compensated, so the documented "flatter heating curve"
task can be tried on it: outside and heating-flow sensors, and a heating curve steering the
mixing valve on the simulated relay board's holding register. The curve's output is written
to the real pymodbus board by the real register driver, read by the simulated plant, and the
water after the valve follows the curve; no `plant-output` alarm, as the write is confirmed."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from control import mapper
from control.drivers import registers
from control.engine.evaluator import evaluate
from control.engine.specs import BookingSpec, Reading, Snapshot
from control.models import HeatingPlant, WeatherCompensation
from demo import layout
from demo.devices import RelayBoard
from demo.plant import Coils, DemoPlant
from demo.site import ensure_demo_site
from demo.thermal import MixingValve

TICK_S = 30
MORNING = datetime(2026, 1, 14, 7, 0, tzinfo=UTC)


@pytest.fixture
def demo(tmp_path, settings, redis_client):
    settings.BMS_DATA_DIR = tmp_path
    return ensure_demo_site(tmp_path / "demo" / "keys.json", now=MORNING, relay_port=15999)


@pytest.mark.django_db
def test_the_demo_plant_has_an_outside_and_a_flow_sensor_and_a_valid_curve(demo):
    plant = HeatingPlant.objects.get(name="Boiler house")
    assert (plant.outside_sensor.node.name, plant.outside_sensor.key) == ("boilerhouse", "outside")
    assert (plant.flow_sensor.node.name, plant.flow_sensor.key) == ("boilerhouse", "heating")
    weather = plant.weather
    assert weather.enabled and weather.mode == WeatherCompensation.Mode.MIXING_VALVE
    assert (weather.register_host, weather.register_port, weather.register_address) == (
        "127.0.0.1",
        15999,
        layout.REG_MIXING_VALVE,
    )
    weather.full_clean()  # the model's own rules (no clash with the board's coils, sensors set)


@pytest.mark.django_db
def test_setting_up_again_follows_the_board_and_keeps_an_engineers_curve(demo, tmp_path):
    weather = HeatingPlant.objects.get(name="Boiler house").weather
    weather.slope = 1.2  # the flatter curve
    weather.save()
    ensure_demo_site(tmp_path / "demo" / "keys.json", now=MORNING, relay_port=15888)
    weather.refresh_from_db()
    assert (weather.slope, weather.register_port) == (1.2, 15888)
    assert WeatherCompensation.objects.count() == 1


def test_the_valve_after_the_boiler_mixes_towards_the_return_as_it_closes():
    valve = MixingValve(flow_c=40.0)
    settled = {}
    for opening in (0.0, 0.5, 1.0):
        valve.opening = opening
        valve.step(3600, boiler_flow_c=70.0, rooms_c=15.0, pump_on=True, plant_room_c=10.0)
        settled[opening] = round(valve.flow_c, 1)
    # The return is the rooms plus 5 K: 20 °C closed, 45 °C half open, the boiler's 70 °C open.
    assert settled == {0.0: 20.0, 0.5: 45.0, 1.0: 70.0}
    valve.step(600, boiler_flow_c=70.0, rooms_c=15.0, pump_on=False, plant_room_c=10.0)
    assert 10.0 < valve.flow_c < 70.0  # still water cools slowly towards the plant room


@pytest.mark.django_db
def test_the_curve_steers_the_simulated_mixing_valve_through_the_real_board(demo):
    plant_row = HeatingPlant.objects.select_related("weather").get(name="Boiler house")
    site = mapper.site_settings()
    zones = list(demo.zones.values())
    spec = mapper.plant_spec(plant_row, site, zone_ids=[z.pk for z in zones])
    booking = BookingSpec("Open day", MORNING, MORNING + timedelta(hours=8))
    valves = {z.pk: z.actuators.get() for z in zones}
    acts = {
        a.pk: replace(mapper.actuator_spec(a), is_on=True, confirmed=True)
        for a in (*valves.values(), demo.actuators["boiler"], demo.actuators["heating_pump"])
    }
    zone_args = [(z, valves[z.pk].pk) for z in zones]
    plant = DemoPlant(MORNING, seed=3)
    plant.circuit.flow_c = 70.0
    plant.mixing.flow_c = 30.0

    # The board serves in its own thread's event loop; the tick runs here, as the worker does.
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    def on_board(coro):
        return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout=10)

    async def make() -> RelayBoard:
        return RelayBoard("127.0.0.1", 0)  # pymodbus binds the server to the running loop

    board = on_board(make())
    on_board(board.start())
    weather = replace(spec.weather, port=board.port)
    memory: dict = {}
    seen = []
    now = MORNING
    try:
        while now < MORNING + timedelta(minutes=60):
            t = now.timestamp() - 5
            zone_specs = tuple(
                mapper.zone_spec(z, site, bookings=(booking,), actuator_ids=[vid],
                                 reading=Reading(t, round(plant.rooms[z.slug].temperature_c, 1)))
                for z, vid in zone_args
            )  # fmt: skip
            plant_now = replace(
                spec, weather=weather,
                outside=Reading(t, round(plant.outside_c, 1)),
                flow=Reading(t, round(plant.mixing.flow_c, 1)),
            )  # fmt: skip
            result = evaluate(
                Snapshot(now=now, time_zone=site.time_zone, zones=zone_specs, actuators=acts,
                         memory=memory, plants=(plant_now,))
            )  # fmt: skip
            memory = result.memory
            out = result.outputs[spec.id]
            target = registers.RegisterTarget(
                "plant", weather.host, weather.port, weather.device_id, weather.register, out.raw
            )
            written = registers.write([target])["plant"]
            now += timedelta(seconds=TICK_S)
            coils = Coils.from_bits(on_board(board.coils()), on_board(board.holding()))
            coils = replace(coils, boiler=True, heating_pump=True,
                            valves={r.slug: True for r in layout.ROOMS})  # fmt: skip
            plant.step(now, TICK_S, 1.0, coils)
            seen.append((out.flow_setpoint_c, plant.mixing.flow_c, written.confirmed))
    finally:
        on_board(board.stop())
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)

    assert all(confirmed for _, _, confirmed in seen)  # every write read back: no alarm
    setpoint, heating_flow, _ = seen[-1]
    # The curve asks for well under the boiler's 70 °C, and the water after the valve follows.
    assert 30.0 < setpoint < 68.0
    assert abs(heating_flow - setpoint) < 2.0
    assert plant.circuit.flow_c > setpoint + 3.0  # the valve mixes: it is not the boiler water
