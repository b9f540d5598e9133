"""The plant rules over recorded series (findings/plant_checks.py): each with its fault and
without, through the real feed store and real ActuatorCommand rows; costs checked by hand."""

from __future__ import annotations

from datetime import timedelta

import pytest

from findings import rules
from findings.evaluate import evaluate
from findings.models import Finding
from tests.findings.conftest import GAS_PRICE, MONDAY, WEEK, command, record

H = timedelta(hours=1)
M = timedelta(minutes=1)
DAY = timedelta(days=1)
ELECTRICITY_PRICE = 0.25  # £/kWh
ELECTRICITY_KG = 0.20707  # DESNZ 2023 UK electricity, the default factor (energy/benchmarks.py)


def thermometer(name: str, site=None):
    """A temperature sensor with its own feed, on the site's room node."""
    from feeds.models import Feed
    from sensors.models import Node, Sensor

    feed = Feed.objects.create(name=f"{name} temperature", tag="t", unit="°C", interval=60)
    node = Node.objects.get(name="roomnode")
    return Sensor.objects.create(node=node, key=name, name=name, kind="temperature", feed=feed)


def found(rule: str) -> list[Finding]:
    return list(Finding.objects.filter(rule=rule))


# --- low flow-return ΔT -------------------------------------------------------------------


@pytest.fixture
def measured_plant(site_model):
    plant = site_model["plant"]
    plant.flow_sensor, plant.return_sensor = thermometer("flow"), thermometer("return")
    plant.save()
    return plant


def fire(plant, flow: float, back: float, hours: float, flow_from: float | None = None) -> None:
    """The boiler ON from 06:00 for `hours`, the flow and return recorded from 05:00."""
    command(plant.boiler, MONDAY + 6 * H, True, "heating_plant")
    command(plant.boiler, MONDAY + 6 * H + hours * H, False, "heating_plant")
    record(plant.flow_sensor.feed_id, MONDAY + 5 * H, hours + 2, lambda m: flow)
    record(plant.return_sensor.feed_id, MONDAY + 5 * H, hours + 2, lambda m: back)


def test_a_plant_whose_return_comes_back_nearly_as_hot_as_its_flow_has_a_low_delta_t(
    measured_plant,
):
    fire(measured_plant, 60.0, 57.0, 6)
    evaluate(MONDAY, MONDAY + WEEK)
    (f,) = found(rules.LOW_DELTA_T)
    assert f.subject == "Heating plant 'Plant room'"
    # judged from 30 min after the start: 06:30-12:00
    assert (f.period_start, f.period_end) == (MONDAY + 6.5 * H, MONDAY + 12 * H)
    assert "5.5 h" in f.detail and f.waste_kwh_week is None  # no cost estimate, by design
    assert f.evidence == [
        {"feed": measured_plant.flow_sensor.feed_id, "name": "flow"},
        {"feed": measured_plant.return_sensor.feed_id, "name": "return"},
        {"actuator": measured_plant.boiler.pk, "name": "Boiler 1"},
    ]
    assert "bypass" in f.what_to_check


def test_a_plant_with_a_wide_delta_t_or_a_mild_days_low_flow_is_no_finding(measured_plant):
    fire(measured_plant, 60.0, 42.0, 6)  # ΔT 18 K: the radiators give up their heat
    evaluate(MONDAY, MONDAY + WEEK)
    assert not found(rules.LOW_DELTA_T)
    Finding.objects.all().delete()
    fire(measured_plant, 38.0, 35.0, 6)  # a low curve on a mild day: a small load, not a fault
    evaluate(MONDAY, MONDAY + WEEK)
    assert not found(rules.LOW_DELTA_T)


def test_low_delta_t_for_exactly_two_hours_is_under_the_bound(measured_plant):
    fire(measured_plant, 60.0, 57.0, 2.5)  # 06:30-08:30 judged: 2 h, not more than 2 h
    evaluate(MONDAY, MONDAY + WEEK)
    assert not found(rules.LOW_DELTA_T)


def test_a_plant_without_a_return_sensor_is_not_judged(site_model):
    plant = site_model["plant"]
    plant.flow_sensor = thermometer("flow")
    plant.save()
    command(plant.boiler, MONDAY + 6 * H, True, "heating_plant")
    record(plant.flow_sensor.feed_id, MONDAY + 5 * H, 8, lambda m: 60.0)
    evaluate(MONDAY, MONDAY + WEEK)
    assert not found(rules.LOW_DELTA_T)


# --- solar pump with no gain --------------------------------------------------------------


@pytest.fixture
def solar(site_model):
    from control.models import SolarCircuit
    from energy.models import FuelRate
    from sensors.models import Actuator

    site = site_model["site"]
    FuelRate.objects.create(site=site, fuel="electricity", price_per_unit=ELECTRICITY_PRICE)
    pump = Actuator.objects.create(name="Solar pump", kind="pump", site=site, coil=4)
    return SolarCircuit.objects.create(
        name="Roof", site=site, pump=pump,
        collector_sensor=thermometer("collector"), tank_sensor=thermometer("tank"),
    )  # fmt: skip


def night(circuit, collector: float, day: int = 0) -> None:
    """19:00-23:30 of Monday (+ `day`): the collector at `collector`; the tank 45 °C until
    20:00, then falling 1 K an hour to 42 °C at 23:00, then flat."""
    at = MONDAY + day * DAY + 19 * H
    record(circuit.collector_sensor.feed_id, at, 4.5, lambda m: collector)

    def tank(m: int) -> float:
        return 45.0 - min(max(m - 60, 0), 180) / 60

    record(circuit.tank_sensor.feed_id, at, 4.5, tank)


def test_a_solar_pump_held_on_at_night_is_found_with_its_electricity_and_the_tanks_heat(solar):
    night(solar, 10.0)
    command(solar.pump, MONDAY + 20 * H, True, "manual_override")
    command(solar.pump, MONDAY + 23 * H, False, "solar_differential")
    evaluate(MONDAY, MONDAY + WEEK)
    (f,) = found(rules.SOLAR_NO_GAIN)
    assert f.subject == "Solar pump 'Solar pump' of solar circuit 'Roof'"
    assert f.subject_url == f"/staff/plants/solar/{solar.pk}/"
    assert (f.period_start, f.period_end) == (MONDAY + 20 * H, MONDAY + 23 * H)
    # by hand: the pump 3 h × 60 W = 0.18 kWh; the tank fell 45 → 42 °C = 3 K × 300 l ×
    # 4.186 kJ/(kg·K) ÷ 3600 = 1.0465 kWh; 1.2265 kWh of electricity in the week;
    # × £0.25 = £0.31; × 0.20707 kg/kWh = 0.254 kg CO₂
    assert f.waste_kwh_week == pytest.approx(1.2265, abs=0.001)
    assert f.waste_money_week == pytest.approx(0.31)
    assert f.waste_kg_co2_week == pytest.approx(1.2265 * ELECTRICITY_KG, abs=0.001)
    assert "3.0 K" in f.detail and "electricity" in f.cost_method


def test_a_solar_pump_running_on_a_warm_collector_or_for_frost_is_no_finding(solar):
    night(solar, 60.0)  # the collector warmer than the tank: gain
    command(solar.pump, MONDAY + 20 * H, True, "solar_differential")
    command(solar.pump, MONDAY + 23 * H, False, "solar_differential")
    evaluate(MONDAY, MONDAY + WEEK)
    assert not found(rules.SOLAR_NO_GAIN)
    night(solar, 10.0, day=1)
    command(solar.pump, MONDAY + DAY + 20 * H, True, "solar_antifreeze")  # on purpose
    command(solar.pump, MONDAY + DAY + 23 * H, False, "solar_antifreeze")
    evaluate(MONDAY, MONDAY + WEEK)
    assert not found(rules.SOLAR_NO_GAIN)


def test_a_solar_pump_on_with_no_gain_for_the_minimum_spell_is_found_and_under_it_not(solar):
    night(solar, 10.0)
    command(solar.pump, MONDAY + 20 * H, True, "manual_override")
    command(solar.pump, MONDAY + 20 * H + 25 * M, False, "solar_differential")
    evaluate(MONDAY, MONDAY + WEEK)
    assert not found(rules.SOLAR_NO_GAIN)
    command(solar.pump, MONDAY + 21 * H, True, "manual_override")
    command(solar.pump, MONDAY + 21 * H + 30 * M, False, "solar_differential")
    evaluate(MONDAY, MONDAY + WEEK)
    (f,) = found(rules.SOLAR_NO_GAIN)
    assert (f.period_start, f.period_end) == (MONDAY + 21 * H, MONDAY + 21.5 * H)


# --- frequent open-window drops -----------------------------------------------------------


def window_week(site_model, events: int) -> None:
    """`events` open-window pauses, two a day (10:00 and 14:00, 30 min each) from Monday,
    each with the room falling from 20 to 18.5 °C; the valve ON 09:00-17:00 otherwise."""
    valve, feed = site_model["valve"], site_model["feed"]
    for day in range((events + 1) // 2):
        d = MONDAY + day * DAY
        command(valve, d + 9 * H, True)
        pauses = [10, 14][: min(2, events - 2 * day)]
        for hour in pauses:
            command(valve, d + hour * H, False, "open_window")
            command(valve, d + hour * H + 15 * M, False, "open_window")  # a keep-alive
            command(valve, d + hour * H + 30 * M, True)
        command(valve, d + 17 * H, False)

        def room(m: int, pauses=pauses) -> float:
            minute = 8 * 60 + m
            return 18.5 if any(0 <= minute - h * 60 < 30 for h in pauses) else 20.0

        record(feed.pk, d + 8 * H, 10, room)


def test_a_zone_paused_for_an_open_window_eight_times_a_week_is_found_and_costed(site_model):
    window_week(site_model, 8)
    evaluate(MONDAY, MONDAY + WEEK)
    (f,) = found(rules.WINDOW_DROPS)
    assert f.subject == "Zone 'Hall'" and "8 times" in f.detail
    # by hand: 8 drops × 1.5 K = 12 K × 1.333 kWh/K (60 m² at 80 kJ/m²K) = 16 kWh of heat put
    # back ÷ 0.85 = 18.824 kWh of gas a week; × £0.07 = £1.32
    assert f.waste_kwh_week == pytest.approx(18.824, abs=0.001)
    assert f.waste_money_week == pytest.approx(round(18.8235 * GAS_PRICE, 2))


def test_seven_open_window_pauses_a_week_is_airing_not_a_fault(site_model):
    window_week(site_model, 7)
    evaluate(MONDAY, MONDAY + WEEK)
    assert not found(rules.WINDOW_DROPS)


# --- optimum start pinned -----------------------------------------------------------------


def preheats(zone, leads_min: list[float], rates: list[float] | None = None) -> None:
    from control.models import OptimumStartLog

    for day, lead in enumerate(leads_min):
        occupancy = MONDAY + day * DAY + 8 * H
        OptimumStartLog.objects.create(
            zone=zone, occupancy_start=occupancy, setpoint=20.0,
            preheat_started=occupancy - lead * M, temp_at_preheat=14.0, temp_at_start=18.0,
            miss_k=2.0, rate_before=30.0, rate_after=(rates or [30.0] * 7)[day],
        )  # fmt: skip


@pytest.fixture
def optimum_zone(site_model):
    zone = site_model["zone"]
    zone.optimum_start, zone.max_preheat_min = True, 180
    zone.save()
    return zone


def test_optimum_start_at_its_maximum_lead_on_most_days_is_found(optimum_zone):
    preheats(optimum_zone, [179.5, 180, 180, 90, 180])  # a tick late counts as the maximum
    evaluate(MONDAY, MONDAY + WEEK)
    (f,) = found(rules.OPTIMUM_PINNED)
    assert f.subject == "Optimum start of zone 'Hall'" and "4 of 5 days" in f.detail
    assert f.waste_kwh_week is None


def test_optimum_start_with_its_learned_rate_at_the_bound_is_found(optimum_zone):
    preheats(optimum_zone, [60, 60, 60], rates=[600.0, 600.0, 600.0])
    evaluate(MONDAY, MONDAY + WEEK)
    assert "3 of 3 days" in found(rules.OPTIMUM_PINNED)[0].detail


def test_optimum_start_pinned_on_half_the_days_or_on_two_is_no_finding(optimum_zone):
    preheats(optimum_zone, [180, 180, 180, 60, 60, 60])  # half: not most
    evaluate(MONDAY, MONDAY + WEEK)
    assert not found(rules.OPTIMUM_PINNED)
    Finding.objects.all().delete()
    optimum_zone.optimum_log.all().delete()
    preheats(optimum_zone, [180, 180])  # most, but two days only
    evaluate(MONDAY, MONDAY + WEEK)
    assert not found(rules.OPTIMUM_PINNED)


# --- sensor out of range ------------------------------------------------------------------


def test_a_sensor_reading_85_degrees_for_three_hours_is_out_of_range(site_model):
    feed = site_model["feed"]
    record(feed.pk, MONDAY + 6 * H, 3, lambda m: 85.0)  # a DS18B20's power-on value
    evaluate(MONDAY, MONDAY + WEEK)
    (f,) = found(rules.SENSOR_RANGE)
    assert f.subject == "Temperature sensor 'Hall thermometer' of zone 'Hall'"
    assert (f.period_start, f.period_end) == (MONDAY + 6 * H, MONDAY + 9 * H)


def test_out_of_range_for_exactly_two_hours_is_found_and_under_it_not(site_model):
    feed = site_model["feed"]
    record(feed.pk, MONDAY + 6 * H, 115 / 60, lambda m: -127.0)  # 1 h 55 min
    evaluate(MONDAY, MONDAY + WEEK)
    assert not found(rules.SENSOR_RANGE)
    record(feed.pk, MONDAY + 30 * H, 2, lambda m: -127.0)
    evaluate(MONDAY, MONDAY + WEEK)
    assert len(found(rules.SENSOR_RANGE)) == 1


def test_a_room_from_cold_to_warm_is_in_range(site_model):
    record(site_model["feed"].pk, MONDAY, 48, lambda m: 0.0 + m / 72)  # 0 → 40 °C
    evaluate(MONDAY, MONDAY + WEEK)
    assert not found(rules.SENSOR_RANGE)


# --- drift against neighbours -------------------------------------------------------------


def neighbourhood(site_model, hall_on_day, others: int = 3) -> None:
    """`others` more zones of the site, steady at 20, 20.5 and 21 °C all week; the hall's
    daily temperature hall_on_day(day)."""
    from control.models import Zone

    for name, value in (("Office", 20.0), ("Library", 20.5), ("Shop", 21.0))[:others]:
        sensor = thermometer(name)
        Zone.objects.create(
            name=name, slug=name.lower(), site=site_model["site"], temperature_sensor=sensor
        )
        record(sensor.feed_id, MONDAY, 7 * 24, lambda m, v=value: v)
    record(site_model["feed"].pk, MONDAY, 7 * 24, lambda m: hall_on_day(m // 1440))


def test_a_sensor_drifting_away_from_its_neighbours_is_found(site_model):
    neighbourhood(site_model, lambda day: 20.0 + 0.6 * day)
    evaluate(MONDAY, MONDAY + WEEK)
    (f,) = found(rules.SENSOR_DRIFT)
    assert f.subject == "Temperature sensor 'Hall thermometer' of zone 'Hall'"
    # Sunday: 23.6 °C against the median 20.5 °C; 0.6 K a day
    assert "3.1 K above" in f.detail and "0.60 K a day over 7 days" in f.detail
    assert [e["name"] for e in f.evidence] == ["Hall thermometer", "Office", "Library", "Shop"]


def test_a_steady_offset_from_the_neighbours_is_no_drift(site_model):
    neighbourhood(site_model, lambda day: 23.5)  # a sunny room, 3 K warmer all week
    evaluate(MONDAY, MONDAY + WEEK)
    assert not found(rules.SENSOR_DRIFT)


def test_a_small_gap_growing_is_no_drift_until_it_passes_the_band(site_model):
    neighbourhood(site_model, lambda day: 20.5 + 0.3 * day)  # 1.8 K by Sunday: in the band
    evaluate(MONDAY, MONDAY + WEEK)
    assert not found(rules.SENSOR_DRIFT)


def test_two_faulty_rooms_of_four_make_no_healthy_room_seem_to_drift(site_model):
    """The demo's fault week (an outside tester, #30): of four rooms one sensor is stuck and
    one room is warmed by a stuck-open valve. The stuck reading is the median of each healthy
    room's three neighbours, so against the median the two healthy rooms, cooling together,
    seemed to drift; against each healthy neighbour they do not."""
    from control.models import Zone

    for name, value_on_day in (
        ("Office", lambda day: 20.3 - 0.5 * day),  # healthy: cools with the hall
        ("Library", lambda day: 20.0),  # its sensor stuck
        ("Shop", lambda day: 23.0),  # a stuck-open valve keeps it warm
    ):
        sensor = thermometer(name)
        Zone.objects.create(
            name=name, slug=name.lower(), site=site_model["site"], temperature_sensor=sensor
        )
        record(sensor.feed_id, MONDAY, 7 * 24, lambda m, f=value_on_day: f(m // 1440))
    record(site_model["feed"].pk, MONDAY, 7 * 24, lambda m: 20.0 - 0.5 * (m // 1440))
    evaluate(MONDAY, MONDAY + WEEK)
    assert not found(rules.SENSOR_DRIFT)


@pytest.mark.parametrize(("tracking", "drifts"), [(2, True), (3, False)])
def test_the_hall_must_drift_from_most_of_its_neighbours_one_by_one(site_model, tracking, drifts):
    """The bound: the hall drifts from three steady neighbours; `tracking` more read as it
    does. Three of five is most of them, three of six is not."""
    from control.models import Zone

    neighbourhood(site_model, lambda day: 20.0 + 0.6 * day)
    for i in range(tracking):
        sensor = thermometer(f"Annex {i}")
        Zone.objects.create(
            name=f"Annex {i}", slug=f"annex-{i}", site=site_model["site"],
            temperature_sensor=sensor,
        )  # fmt: skip
        record(sensor.feed_id, MONDAY, 7 * 24, lambda m, i=i: 20.1 + 0.1 * i + 0.6 * (m // 1440))
    evaluate(MONDAY, MONDAY + WEEK)
    hall = [f for f in found(rules.SENSOR_DRIFT) if "'Hall'" in f.subject]
    assert len(hall) == (1 if drifts else 0)


def test_with_two_neighbours_only_no_drift_is_judged(site_model):
    """The median of two is their mean, which the drifting one pulls: each would seem to
    drift, so three neighbours at least are needed."""
    neighbourhood(site_model, lambda day: 20.0 + 0.6 * day, others=2)
    evaluate(MONDAY, MONDAY + WEEK)
    assert not found(rules.SENSOR_DRIFT)
