"""Each strategy on its own: thermostat, frost, over-temperature, stale sensor, optimum
start/stop arithmetic, anti-short-cycle, pump overrun, pump kick, solar differential."""

from __future__ import annotations

import math

import pytest

from control.engine.specs import (
    SOLAR_ANTIFREEZE,
    SOLAR_DIFFERENTIAL,
    SOLAR_EMERGENCY,
    SOLAR_TANK_MAX,
    Reading,
)
from control.engine.strategies import (
    anti_short_cycle,
    frost,
    optimum_start,
    overtemp,
    pump,
    pump_kick,
    sensor_health,
    solar,
    thermostat,
)

from .helpers import kick_spec, solar_spec


class TestThermostat:
    @pytest.mark.parametrize("was_on", [True, False])
    def test_it_heats_at_or_below_the_lower_band(self, was_on):
        assert thermostat.calls_for_heat(19.7, 20.0, 0.3, was_on) is True

    @pytest.mark.parametrize("was_on", [True, False])
    def test_it_stops_at_or_above_the_upper_band(self, was_on):
        assert thermostat.calls_for_heat(20.3, 20.0, 0.3, was_on) is False

    @pytest.mark.parametrize("was_on", [True, False])
    def test_inside_the_band_it_keeps_what_it_was_doing(self, was_on):
        assert thermostat.calls_for_heat(20.1, 20.0, 0.3, was_on) is was_on
        assert thermostat.calls_for_heat(19.8, 20.0, 0.3, was_on) is was_on


class TestFrost:
    def test_on_below_5_and_holds_until_7(self):
        assert frost.active(4.9, 5, 7, was_active=False)
        assert frost.active(6.0, 5, 7, was_active=True)
        assert not frost.active(6.0, 5, 7, was_active=False)
        assert not frost.active(7.0, 5, 7, was_active=True)


def test_over_temperature_cuts_off_at_the_maximum():
    assert overtemp.cut_off(28.0, 28.0)
    assert not overtemp.cut_off(27.9, 28.0)


def test_over_temperature_releases_only_a_band_below_the_maximum():
    # Tripped, it holds until the zone is at or below max − band.
    assert overtemp.cut_off(27.9, 28.0, 1.0, was_active=True)
    assert overtemp.cut_off(27.01, 28.0, 1.0, was_active=True)
    assert not overtemp.cut_off(27.0, 28.0, 1.0, was_active=True)
    assert not overtemp.cut_off(27.9, 28.0, 1.0, was_active=False)


class TestSensorHealth:
    def test_fresh_reading_is_fine(self):
        assert sensor_health.problem(Reading(1000, 20.0), True, 1100, 900) == ""

    def test_stale_reading_says_how_old(self):
        text = sensor_health.problem(Reading(0, 20.0), True, 1800, 900)
        assert "stale" in text and "30 min ago" in text and "limit 15 min" in text

    def test_missing_reading_and_missing_sensor_and_nan(self):
        assert "No reading" in sensor_health.problem(None, True, 0, 900)
        assert "No temperature sensor" in sensor_health.problem(None, False, 0, 900)
        assert "not a number" in sensor_health.problem(Reading(0, math.nan), True, 1, 900)


class TestOptimumStartArithmetic:
    def test_preheat_is_deficit_times_rate(self):
        assert optimum_start.preheat_minutes(17.0, 20.0, 15.0, 180) == 45.0

    def test_preheat_is_bounded_by_max(self):
        assert optimum_start.preheat_minutes(5.0, 20.0, 30.0, 180) == 180.0

    def test_no_preheat_when_already_warm(self):
        assert optimum_start.preheat_minutes(20.5, 20.0, 15.0, 180) == 0.0

    def test_rate_in_degrees_per_hour(self):
        assert optimum_start.rate_c_per_h(50.0) == pytest.approx(1.2)

    def test_optimum_stop_only_when_the_room_coasts_to_the_end(self):
        # 20.5 °C, may drop to 19.5 °C: 1 K × 60 min/K = 60 min of coasting.
        assert optimum_start.may_stop_early(20.5, 20.0, 60, 60, 0.5)
        assert not optimum_start.may_stop_early(20.5, 20.0, 61, 60, 0.5)
        assert not optimum_start.may_stop_early(19.9, 20.0, 5, 60, 0.5)


class TestAntiShortCycle:
    def test_min_run_beats_the_setpoint(self):
        why = anti_short_cycle.hold(
            False, True, changed_at=1000, now_s=1240, min_on_s=600, min_off_s=600
        )
        assert why.startswith("Minimum run 10 min: on for 4 min")

    def test_min_off_time_holds_a_restart(self):
        why = anti_short_cycle.hold(
            True, False, changed_at=1000, now_s=1300, min_on_s=600, min_off_s=600
        )
        assert why.startswith("Minimum off time 10 min")

    def test_switches_once_the_time_is_up(self):
        assert anti_short_cycle.hold(False, True, 1000, 1600, 600, 600) == ""

    def test_unknown_state_is_never_held(self):
        assert anti_short_cycle.hold(True, None, None, 1000, 600, 600) == ""


class TestPumpOverrun:
    def test_runs_on_after_the_boiler_stops(self):
        assert pump.overrun_left_s(False, boiler_last_off_at=1000, now_s=1100, overrun_s=360) == 260

    def test_stops_after_the_overrun(self):
        assert pump.overrun_left_s(False, 1000, 1360, 360) == 0

    def test_no_overrun_while_the_boiler_fires_or_never_ran(self):
        assert pump.overrun_left_s(True, 1000, 1100, 360) == 0
        assert pump.overrun_left_s(False, None, 1100, 360) == 0


class TestPumpKick:
    WEEK = 7 * 86400

    def test_idle_for_a_week_kicks(self):
        assert pump_kick.due(kick_spec(), False, idle_since=0, kick_started=None, now_s=self.WEEK)

    def test_idle_for_less_does_not(self):
        assert not pump_kick.due(kick_spec(), False, 0, None, self.WEEK - 1)

    def test_a_kick_lasts_its_run_time(self):
        assert pump_kick.due(kick_spec(), True, 0, kick_started=100, now_s=129)
        assert not pump_kick.due(kick_spec(), True, 0, kick_started=100, now_s=130)

    def test_disabled_kick(self):
        assert not pump_kick.due(None, False, 0, None, 10 * self.WEEK)


class TestSolar:
    circuit = solar_spec(id=1, name="Roof", pump_id=5, collector=None, tank=None)

    def decide(self, collector, tank, pump_on=False, emergency=False, antifreeze=False, full=False):
        return solar.decide(self.circuit, collector, tank, pump_on, emergency, antifreeze, full)

    def test_on_at_delta_on(self):
        d = self.decide(46.0, 40.0)
        assert d.pump_on and d.strategy == SOLAR_DIFFERENTIAL
        assert "ΔT 6.0 K" in d.reason

    def test_off_at_delta_off(self):
        assert not self.decide(44.0, 40.0, pump_on=True).pump_on

    def test_between_keeps_state(self):
        assert self.decide(45.0, 40.0, pump_on=True).pump_on
        assert not self.decide(45.0, 40.0, pump_on=False).pump_on

    def test_tank_max_stops_the_pump_with_hysteresis(self):
        d = self.decide(90.0, 60.0, pump_on=True)
        assert not d.pump_on and d.strategy == SOLAR_TANK_MAX and d.tank_full
        assert self.decide(90.0, 58.5, full=True).strategy == SOLAR_TANK_MAX
        assert self.decide(90.0, 57.9, full=True).pump_on

    def test_collector_emergency_stop_and_its_10_k_hysteresis(self):
        d = self.decide(130.0, 50.0, pump_on=True)
        assert not d.pump_on and d.strategy == SOLAR_EMERGENCY and d.emergency
        assert self.decide(121.0, 50.0, emergency=True).strategy == SOLAR_EMERGENCY
        assert self.decide(120.0, 50.0, emergency=True).pump_on

    def test_collector_antifreeze(self):
        d = self.decide(3.5, 30.0)
        assert d.pump_on and d.strategy == SOLAR_ANTIFREEZE
        assert self.decide(4.5, 30.0, antifreeze=True).strategy == SOLAR_ANTIFREEZE
        assert not self.decide(5.0, 30.0, antifreeze=True).pump_on

    def test_emergency_beats_tank_max(self):
        assert self.decide(135.0, 65.0).strategy == SOLAR_EMERGENCY
