"""The rules run over recorded history through the site model, findings kept and closed
(findings/evaluate.py), costs checked against hand computations."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.core.management import CommandError, call_command

from findings import rules
from findings.evaluate import MAX_RANGE, RangeError, evaluate, evaluate_range
from findings.models import Finding
from tests.findings.conftest import GAS_PRICE, MONDAY, WEEK, command, record

H = timedelta(hours=1)
GAS_KG = 0.18293  # DESNZ 2023 natural gas, the default factor (energy/benchmarks.py)


def test_a_valve_left_on_four_hours_after_the_schedule_is_found_and_costed(site_model):
    valve = site_model["valve"]
    command(valve, MONDAY + 8 * H, True)
    command(valve, MONDAY + 21 * H, False)  # four hours past 17:00
    summary = evaluate(MONDAY, MONDAY + WEEK)
    assert summary.opened == 1
    f = Finding.objects.get(rule=rules.HEATING_UNOCCUPIED)
    assert f.subject == "Zone 'Hall'"
    assert (f.period_start, f.period_end) == (MONDAY + 17 * H, MONDAY + 21 * H)
    # by hand: 4 h × 3 kW ÷ 0.85 = 14.118 kWh in the week; × £0.07 = £0.99; × 0.18293 = 2.583 kg
    assert f.waste_kwh_week == pytest.approx(14.118, abs=0.001)
    assert f.waste_money_week == pytest.approx(0.99)
    assert f.waste_kg_co2_week == pytest.approx(14.1176 * GAS_KG, abs=0.001)
    assert f.currency == "GBP"
    assert "schedule" in f.detail and "the zone's schedule" in f.what_to_check
    assert f.detail.startswith("Valve ON 4.0 h outside occupancy in 1 spell (")  # not "1 spells"
    assert f.evidence == [{"actuator": valve.pk, "name": "Hall valve"}]


def test_two_evenings_are_two_spells(site_model):
    valve = site_model["valve"]
    for day in (0, 1):
        command(valve, MONDAY + day * 24 * H + 8 * H, True)
        command(valve, MONDAY + day * 24 * H + 19 * H, False)
    evaluate(MONDAY, MONDAY + WEEK)
    detail = Finding.objects.get(rule=rules.HEATING_UNOCCUPIED).detail
    assert detail.startswith("Valve ON 4.0 h outside occupancy in 2 spells (")


def test_a_valve_on_only_while_occupied_is_no_finding(site_model):
    valve = site_model["valve"]
    for day in range(5):
        command(valve, MONDAY + day * 24 * H + 8 * H, True)
        command(valve, MONDAY + day * 24 * H + 17 * H, False)
    assert evaluate(MONDAY, MONDAY + WEEK).opened == 0
    assert not Finding.objects.exists()


def test_frost_protection_at_night_is_no_finding_and_a_failed_command_is_not_heat(site_model):
    valve = site_model["valve"]
    command(valve, MONDAY + 1 * H, True, "frost_protection")
    command(valve, MONDAY + 4 * H, False, "frost_protection")
    command(valve, MONDAY + 30 * H, True, error="board did not answer")  # never reached it
    assert evaluate(MONDAY, MONDAY + WEEK).opened == 0


def test_a_booking_makes_an_evening_occupied(site_model):
    from control.models import Booking

    zone, valve = site_model["zone"], site_model["valve"]
    Booking.objects.create(zone=zone, title="Yoga", start=MONDAY + 18 * H, end=MONDAY + 21 * H)
    command(valve, MONDAY + 18 * H, True, "booking")
    command(valve, MONDAY + 21 * H, False, "booking")
    assert evaluate(MONDAY, MONDAY + WEEK).opened == 0


def test_a_finding_is_updated_while_it_recurs_and_closes_when_a_week_passes_without_it(
    site_model, engineer
):
    valve = site_model["valve"]
    command(valve, MONDAY + 8 * H, True)
    command(valve, MONDAY + 21 * H, False)
    evaluate(MONDAY, MONDAY + WEEK)
    f = Finding.objects.get()
    f.mark(Finding.State.ACKNOWLEDGED, engineer)
    # the hourly run, an hour later, still sees Monday evening: the same finding, state kept
    assert evaluate(MONDAY + H, MONDAY + WEEK + H).updated == 1
    f.refresh_from_db()
    assert f.closed_at is None and f.state == Finding.State.ACKNOWLEDGED
    # the first run whose week starts after Monday 21:00 has not seen it: closed at its end
    later = evaluate(MONDAY + 22 * H, MONDAY + WEEK + 22 * H)
    f.refresh_from_db()
    assert later.closed == 1 and f.closed_at == MONDAY + WEEK + 22 * H
    assert f.state == Finding.State.ACKNOWLEDGED and f.state_by == engineer


def test_a_fault_again_after_fixed_opens_a_new_finding(site_model, engineer):
    valve = site_model["valve"]
    command(valve, MONDAY + 8 * H, True)
    command(valve, MONDAY + 21 * H, False)
    evaluate(MONDAY, MONDAY + WEEK)
    Finding.objects.get().mark(Finding.State.FIXED, engineer)
    command(valve, MONDAY + WEEK + 8 * H, True)
    command(valve, MONDAY + WEEK + 22 * H, False)
    assert evaluate(MONDAY + WEEK, MONDAY + 2 * WEEK).opened == 1
    assert Finding.objects.filter(closed_at__isnull=True).get().waste_kwh_week == pytest.approx(
        5 * 3 / 0.85, abs=0.001
    )


def test_a_fixed_finding_stays_fixed_when_the_next_run_sees_the_same_evidence(site_model, engineer):
    """The hourly run looks back a week: Monday evening's spell, fixed on Wednesday, is the
    fault that was fixed, not a recurrence (an outside tester saw it reopen every hour)."""
    valve = site_model["valve"]
    command(valve, MONDAY + 8 * H, True)
    command(valve, MONDAY + 21 * H, False)
    evaluate(MONDAY, MONDAY + 2 * 24 * H)
    with time_machine.travel(MONDAY + 2 * 24 * H + 10 * H, tick=False):
        Finding.objects.get().mark(Finding.State.FIXED, engineer)
    again = evaluate(MONDAY, MONDAY + WEEK)
    assert (again.opened, again.updated) == (0, 0)
    assert again.keys == []
    (fixed,) = Finding.objects.all()
    assert fixed.state == Finding.State.FIXED and fixed.closed_at is not None
    # the fault again after the fix, in the same week's look: a new finding of it alone
    command(valve, MONDAY + 3 * 24 * H + 8 * H, True)
    command(valve, MONDAY + 3 * 24 * H + 20 * H, False)  # three hours past 17:00
    assert evaluate(MONDAY, MONDAY + WEEK).opened == 1
    new = Finding.objects.get(closed_at__isnull=True)
    assert new.pk != fixed.pk and new.state == Finding.State.NEW
    assert (new.period_start, new.period_end) == (MONDAY + 3 * 24 * H + 17 * H, new.last_seen)
    # its cost is the recurrence's 3 h, not the fixed spell's 4 h as well
    assert new.waste_kwh_week == pytest.approx(3 * 3 / 0.85, abs=0.001)
    # and its words say which of the spells the rule saw are new
    assert new.detail.endswith(
        "; new since the finding before it (marked fixed Wed 09 Jan 10:00): 1 spell, 3.0 h"
    )


def test_a_span_ending_at_the_fix_is_no_recurrence(site_model, engineer):
    valve = site_model["valve"]
    command(valve, MONDAY + 8 * H, True)
    command(valve, MONDAY + 21 * H, False)
    evaluate(MONDAY, MONDAY + WEEK)
    with time_machine.travel(MONDAY + 21 * H, tick=False):  # the bound: ends at the fix
        Finding.objects.get().mark(Finding.State.FIXED, engineer)
    assert evaluate(MONDAY, MONDAY + WEEK).opened == 0
    assert Finding.objects.count() == 1


def test_a_false_alarm_stays_open_and_is_not_reopened_as_a_new_finding(site_model, engineer):
    valve = site_model["valve"]
    command(valve, MONDAY + 8 * H, True)
    command(valve, MONDAY + 21 * H, False)
    evaluate(MONDAY, MONDAY + WEEK)
    Finding.objects.get().mark(Finding.State.FALSE_ALARM, engineer)
    assert evaluate(MONDAY + H, MONDAY + WEEK + H).updated == 1
    (f,) = Finding.objects.all()
    assert f.closed_at is None and f.state == Finding.State.FALSE_ALARM
    assert f.state_by == engineer


def test_a_rerun_over_a_week_a_closed_finding_saw_opens_nothing(site_model):
    valve = site_model["valve"]
    command(valve, MONDAY + 8 * H, True)
    command(valve, MONDAY + 21 * H, False)
    evaluate(MONDAY, MONDAY + WEEK)
    assert evaluate(MONDAY + WEEK, MONDAY + 2 * WEEK).closed == 1  # stopped recurring
    assert evaluate(MONDAY, MONDAY + WEEK).opened == 0  # find_waste over the old week again
    assert Finding.objects.count() == 1


def test_a_stuck_sensor_while_heating_is_found_with_no_cost_and_what_to_check(site_model):
    valve, feed = site_model["valve"], site_model["feed"]
    command(valve, MONDAY + 8 * H, True)
    command(valve, MONDAY + 10 * H, False)
    record(feed.pk, MONDAY + 6 * H, 6, lambda m: 19.0)
    evaluate(MONDAY, MONDAY + WEEK)
    f = Finding.objects.get(rule=rules.SENSOR_FLATLINE)
    assert f.subject == "Temperature sensor 'Hall thermometer' of zone 'Hall'"
    assert f.waste_kwh_week is None and f.waste_money_week is None
    assert "hand thermometer" in f.what_to_check
    assert {"feed": feed.pk, "name": "Hall thermometer"} in f.evidence


def test_a_sensor_that_warms_while_heating_is_no_flatline(site_model):
    valve, feed = site_model["valve"], site_model["feed"]
    command(valve, MONDAY + 8 * H, True)
    command(valve, MONDAY + 10 * H, False)
    record(feed.pk, MONDAY + 6 * H, 6, lambda m: 17.0 + m / 100)
    evaluate(MONDAY, MONDAY + WEEK)
    assert not Finding.objects.filter(rule=rules.SENSOR_FLATLINE).exists()


def _cycle(boiler, start, hours: int, per_hour: int) -> None:
    step = 60 / per_hour
    for i in range(hours * per_hour):
        at = start + timedelta(minutes=i * step)
        command(boiler, at, True, "heating_plant")
        command(boiler, at + timedelta(minutes=step / 2), False, "heating_plant")


def test_a_boiler_starting_nine_times_an_hour_for_two_hours_is_short_cycling(site_model):
    _cycle(site_model["boiler"], MONDAY + 6 * H, 2, 9)
    evaluate(MONDAY, MONDAY + WEEK)
    f = Finding.objects.get(rule=rules.SHORT_CYCLING)
    assert f.subject == "Boiler 'Boiler 1' of heating plant 'Plant room'"
    # by hand: (9 − 6) × 2 h = 6 extra starts × 2 min of 30 kW = 6 kWh of heat ÷ 0.85
    # = 7.059 kWh of gas a week; × £0.07 = £0.49
    assert f.waste_kwh_week == pytest.approx(7.059, abs=0.001)
    assert f.waste_money_week == pytest.approx(0.49)
    assert f.waste_kg_co2_week == pytest.approx(7.0588 * GAS_KG, abs=0.001)
    assert "6 extra" not in f.detail and "6 starts beyond" in f.detail


def test_a_boiler_at_six_starts_an_hour_or_cycling_for_one_hour_only_is_no_finding(site_model):
    boiler = site_model["boiler"]
    _cycle(boiler, MONDAY + 6 * H, 4, 6)
    _cycle(boiler, MONDAY + 30 * H, 1, 12)  # one bad hour: under the two-hour minimum
    evaluate(MONDAY, MONDAY + WEEK)
    assert not Finding.objects.filter(rule=rules.SHORT_CYCLING).exists()


def test_a_site_without_a_gas_tariff_has_kwh_and_co2_but_no_money(site_model):
    from energy.models import FuelRate

    FuelRate.objects.all().delete()
    valve = site_model["valve"]
    command(valve, MONDAY + 8 * H, True)
    command(valve, MONDAY + 21 * H, False)
    evaluate(MONDAY, MONDAY + WEEK)
    f = Finding.objects.get()
    assert f.waste_money_week is None and f.waste_kwh_week == pytest.approx(14.118, abs=0.001)


def test_a_range_is_bounded_and_must_run_forwards(site_model):
    with pytest.raises(RangeError):
        evaluate(MONDAY, MONDAY + MAX_RANGE + timedelta(seconds=1))
    with pytest.raises(RangeError):
        evaluate(MONDAY, MONDAY)
    assert len(evaluate_range(MONDAY, MONDAY + 3 * WEEK + H)) == 4  # cut into weeks


def test_find_waste_runs_a_history_range_and_refuses_bad_dates(site_model, capsys):
    valve = site_model["valve"]
    command(valve, MONDAY + 8 * H, True)
    command(valve, MONDAY + 21 * H, False)
    call_command("find_waste", "--from", "2030-01-07", "--to", "2030-01-21")
    assert "2 weeks evaluated: 1 findings opened" in capsys.readouterr().out
    with pytest.raises(CommandError, match="--from"):
        call_command("find_waste", "--from", "2030-13-01", "--to", "2030-01-21")
    with pytest.raises(CommandError, match="after"):
        call_command("find_waste", "--from", "2030-01-21", "--to", "2030-01-07")
    with pytest.raises(CommandError, match="at most"):
        call_command("find_waste", "--from", "2000-01-01", "--to", "2030-01-21")


def test_the_price_is_the_sites_own(site_model):
    from energy.models import FuelRate

    FuelRate.objects.filter(fuel="gas").update(price_per_unit=GAS_PRICE * 2)
    valve = site_model["valve"]
    command(valve, MONDAY + 8 * H, True)
    command(valve, MONDAY + 21 * H, False)
    evaluate(MONDAY, MONDAY + WEEK)
    assert Finding.objects.get().waste_money_week == pytest.approx(1.98)


def test_two_valves_of_one_zone_on_together_count_their_hours_once(site_model):
    from sensors.models import Actuator

    zone, valve = site_model["zone"], site_model["valve"]
    second = Actuator.objects.create(name="Hall valve 2", kind="valve", coil=3)
    zone.actuators.add(second)
    for v in (valve, second):
        command(v, MONDAY + 8 * H, True)
        command(v, MONDAY + 21 * H, False)
    evaluate(MONDAY, MONDAY + WEEK)
    assert Finding.objects.get().waste_kwh_week == pytest.approx(4 * 3 / 0.85, abs=0.001)


def test_an_actuators_audit_rows_are_read_up_to_the_bound(site_model, monkeypatch):
    from findings import points as evaluate_module

    monkeypatch.setattr(evaluate_module, "MAX_COMMANDS", 5)
    valve = site_model["valve"]
    command(valve, MONDAY - H, False)  # the state the week opens in: read besides the bound
    for i in range(8):
        command(valve, MONDAY + i * H, i % 2 == 0)
    rows = evaluate_module.commands(valve, MONDAY, MONDAY + WEEK)
    assert len(rows) == 1 + 5 + 1 and rows[0].at == MONDAY - H and rows[5].at == MONDAY + 4 * H
    # the row left out ends the judged log as an OFF: the ON at 04:00 holds one hour, not a week
    assert (rows[-1].at, rows[-1].state) == (MONDAY + 5 * H, False)
    assert len(evaluate_module.commands(valve, MONDAY, MONDAY + 5 * H)) == 1 + 5  # at the bound


def test_a_heated_zone_three_hours_cold_in_its_occupancy_does_not_reach_its_setpoint(site_model):
    valve, feed = site_model["valve"], site_model["feed"]
    command(valve, MONDAY + 7 * H, True)
    command(valve, MONDAY + 17 * H, False)
    # comfort 20 °C; 18.5 °C from 08:00 to 11:00, then 20 °C
    record(feed.pk, MONDAY + 7 * H, 10, lambda m: 18.5 if m < 240 else 20.0)
    evaluate(MONDAY, MONDAY + WEEK)
    f = Finding.objects.get(rule=rules.UNDER_SETPOINT)
    assert f.subject == "Zone 'Hall'"
    assert (f.period_start, f.period_end) == (MONDAY + 8 * H, MONDAY + 11 * H)
    assert "3.0 h of occupied time" in f.detail
    assert f.waste_kwh_week is None and "flow temperature" in f.what_to_check
    assert {"feed": feed.pk, "name": "Hall thermometer"} in f.evidence


def test_a_zone_that_warms_to_its_setpoint_within_the_hour_is_no_finding(site_model):
    valve, feed = site_model["valve"], site_model["feed"]
    command(valve, MONDAY + 7 * H, True)
    command(valve, MONDAY + 17 * H, False)
    record(feed.pk, MONDAY + 7 * H, 10, lambda m: min(17.0 + m / 40, 20.5))
    evaluate(MONDAY, MONDAY + WEEK)
    assert not Finding.objects.filter(rule=rules.UNDER_SETPOINT).exists()


def test_a_bookings_own_setpoint_is_the_one_judged(site_model):
    from control.models import Booking

    zone, valve, feed = site_model["zone"], site_model["valve"], site_model["feed"]
    Booking.objects.create(
        zone=zone, title="Yoga", start=MONDAY + 18 * H, end=MONDAY + 22 * H, setpoint=23.0
    )
    command(valve, MONDAY + 18 * H, True, "booking")
    command(valve, MONDAY + 22 * H, False, "booking")
    record(feed.pk, MONDAY + 18 * H, 4, lambda m: 21.0)  # fine for 20 °C, 2 K short of 23
    evaluate(MONDAY, MONDAY + WEEK)
    f = Finding.objects.get(rule=rules.UNDER_SETPOINT)
    assert (f.period_start, f.period_end) == (MONDAY + 18 * H, MONDAY + 22 * H)


def _shut_valve_and_a_running_boiler(site_model) -> None:
    command(site_model["valve"], MONDAY - H, False)  # shut all week
    command(site_model["boiler"], MONDAY + 6 * H, True, "heating_plant")
    command(site_model["boiler"], MONDAY + 10 * H, False, "heating_plant")


def _rising(rate_k_per_h: float, from_min: int, to_min: int):
    """16 °C, rising in quarter-hour steps (exact in binary) from `from_min` to `to_min`."""
    return lambda m: 16.0 + rate_k_per_h / 4 * ((min(max(m, from_min), to_min) - from_min) // 15)


def test_a_zone_warming_with_its_valve_shut_and_the_boiler_on_is_a_passing_valve(site_model):
    _shut_valve_and_a_running_boiler(site_model)
    feed = site_model["feed"]
    record(feed.pk, MONDAY + 5 * H, 6, _rising(1.5, 60, 180))  # 06:00–08:00, 16 → 19 °C
    evaluate(MONDAY, MONDAY + WEEK)
    f = Finding.objects.get(rule=rules.VALVE_PASSING)
    assert f.subject == "Valve of zone 'Hall'"
    assert "Warmed 3.0 K" in f.detail
    # by hand: 3 K × (60 m² × 80 kJ/m²K = 4,800 kJ/K = 1.3333 kWh/K) = 4 kWh of heat ÷ 0.85
    # = 4.706 kWh of gas a week; × £0.07 = £0.33; × 0.18293 = 0.861 kg CO₂
    assert f.waste_kwh_week == pytest.approx(4.706, abs=0.001)
    assert f.waste_money_week == pytest.approx(0.33)
    assert f.waste_kg_co2_week == pytest.approx(4.7059 * GAS_KG, abs=0.001)
    boiler = site_model["boiler"]
    assert {"actuator": boiler.pk, "name": "Boiler 1"} in f.evidence


def test_warming_with_the_valve_open_or_the_boiler_off_is_no_passing_valve(site_model):
    valve, boiler, feed = site_model["valve"], site_model["boiler"], site_model["feed"]
    command(valve, MONDAY + 6 * H, True)  # the valve heats the room: it should warm
    command(valve, MONDAY + 8 * H, False)
    command(boiler, MONDAY + 6 * H, True, "heating_plant")
    command(boiler, MONDAY + 8 * H, False, "heating_plant")
    record(feed.pk, MONDAY + 5 * H, 6, _rising(1.5, 60, 180))
    # Tuesday: the valve shut and the boiler off, the sun warms the room
    record(feed.pk, MONDAY + 29 * H, 6, _rising(1.5, 60, 180))
    evaluate(MONDAY, MONDAY + WEEK)
    assert not Finding.objects.filter(rule=rules.VALVE_PASSING).exists()


def test_a_radiator_still_warming_the_room_just_after_its_valve_shut_is_no_passing_valve(
    site_model, monkeypatch
):
    valve, boiler, feed = site_model["valve"], site_model["boiler"], site_model["feed"]
    command(boiler, MONDAY + 5 * H, True, "heating_plant")
    command(valve, MONDAY + 5 * H, True)
    command(valve, MONDAY + 6 * H, False)  # shut at 06:00; the room goes on warming 30 min
    record(feed.pk, MONDAY + 5 * H, 4, _rising(3.0, 0, 90))  # 05:00–06:30, 16 → 20.5 °C
    evaluate(MONDAY, MONDAY + WEEK)
    assert not Finding.objects.filter(rule=rules.VALVE_PASSING).exists()
    # the settling time is what spares it: judged from the OFF itself, 06:00–07:00 rises 1.5 K
    monkeypatch.setattr(rules, "PASSING_SETTLE", timedelta())
    evaluate(MONDAY, MONDAY + WEEK)
    assert Finding.objects.filter(rule=rules.VALVE_PASSING).exists()


def _glitches(n: int):
    """20 °C with `n` one-reading spikes to 28 °C, two hours apart from 01:00."""
    at = {60 + 120 * k for k in range(n)}
    return lambda m: 28.0 if m in at else 20.0


def test_a_sensor_spiking_four_times_in_a_day_is_found_with_no_cost(site_model):
    feed = site_model["feed"]
    record(feed.pk, MONDAY, 24, _glitches(4))
    evaluate(MONDAY, MONDAY + WEEK)
    f = Finding.objects.get(rule=rules.SENSOR_SPIKES)
    assert f.subject == "Temperature sensor 'Hall thermometer' of zone 'Hall'"
    assert (f.period_start, f.period_end) == (MONDAY, MONDAY + 24 * H)
    assert "4 spikes" in f.detail and f.waste_kwh_week is None
    assert "wiring" in f.what_to_check


def test_three_spikes_a_day_is_the_bound_and_no_finding(site_model):
    feed = site_model["feed"]
    record(feed.pk, MONDAY, 24, _glitches(3))
    record(feed.pk, MONDAY + 24 * H, 24, _glitches(3))
    evaluate(MONDAY, MONDAY + WEEK)
    assert not Finding.objects.filter(rule=rules.SENSOR_SPIKES).exists()
