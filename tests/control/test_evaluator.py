"""The evaluator as a whole: priority order, schedules, bookings, optimum start, plant logic,
overrides, timers and the reasons it gives."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, date, datetime, time, timedelta

from control.engine.evaluator import evaluate
from control.engine.specs import (
    ANTI_SHORT_CYCLE,
    BOOKING,
    FROST,
    HEATING_PLANT,
    IDLE,
    NO_BYPASS,
    NO_OPEN_CIRCUIT,
    OPTIMUM_START,
    OPTIMUM_STOP,
    OVER_TEMPERATURE,
    OVERRIDE,
    PUMP_KICK,
    PUMP_OVERRUN,
    SCHEDULE,
    SENSOR_FALLBACK,
    SETBACK,
    BookingSpec,
    OverrideSpec,
    PeriodSpec,
    Reading,
    ScheduleSpec,
)

from .helpers import (
    NOW,
    actuator_spec,
    at,
    exception_spec,
    plant_spec,
    snapshot,
    solar_spec,
    valve,
    zone,
)

YOGA = BookingSpec("Yoga", at(10), at(12))
OFFICE = ScheduleSpec("Office", periods=(PeriodSpec(2, time(8), time(17), 21.0),))  # Wednesdays


def run(zones, actuators=None, now=NOW, **kw):
    """Evaluate at `now`; a zone built with the default fresh reading is read at `now` too."""
    default_t = NOW.timestamp() - 30
    zones = [
        replace(z, reading=Reading(now.timestamp() - 30, z.reading.value))
        if z.reading is not None and z.reading.t == default_t
        else z
        for z in zones
    ]
    actuators = (valve(),) if actuators is None else actuators
    return evaluate(snapshot(zones, actuators, now=now, **kw))


class TestPriority:
    def test_frost_beats_an_off_override(self):
        off = OverrideSpec(False, NOW + timedelta(hours=1), "maintenance", user_name="eng")
        ev = run([zone(temp=4.0, override=off)])
        assert ev.decisions[10].state is True
        assert ev.decisions[10].strategy == FROST
        assert "Frost protection: 4.0 °C" in ev.decisions[10].reason

    def test_over_temperature_holds_its_band_across_ticks(self):
        on = OverrideSpec(True, NOW + timedelta(hours=1), "drying plaster")
        tripped = run([zone(temp=28.0, override=on)])
        flicker = run([zone(temp=27.9, override=on)], memory=tripped.memory)
        assert flicker.decisions[10].state is False
        assert flicker.decisions[10].strategy == OVER_TEMPERATURE
        cooled = run([zone(temp=27.0, override=on)], memory=flicker.memory)
        assert cooled.decisions[10].state is True and cooled.decisions[10].strategy == OVERRIDE

    def test_over_temperature_beats_an_on_override(self):
        on = OverrideSpec(True, NOW + timedelta(hours=1), "drying plaster")
        ev = run([zone(temp=29.0, override=on)])
        assert ev.decisions[10].state is False
        assert ev.decisions[10].strategy == OVER_TEMPERATURE

    def test_override_beats_a_booking(self):
        off = OverrideSpec(False, at(11), "window open", user_id=7, user_name="ann")
        ev = run([zone(temp=15.0, override=off, bookings=(YOGA,))], now=at(10, 30))
        d = ev.decisions[10]
        assert (d.state, d.strategy, d.user_id) == (False, OVERRIDE, 7)
        assert "Manual override OFF by ann until Wed 14 Jan 2026 11:00: window open" in d.reason

    def test_override_expires(self):
        off = OverrideSpec(False, at(10, 15), "window open")
        ev = run([zone(temp=15.0, override=off, bookings=(YOGA,))], now=at(10, 30))
        assert ev.decisions[10].state is True
        assert ev.decisions[10].strategy == BOOKING

    def test_demand_beats_off(self):
        ev = run([zone(temp=15.0, bookings=(YOGA,))], now=at(10, 30))
        assert ev.decisions[10].state is True
        ev = run([zone(temp=15.0)], now=at(10, 30))
        assert ev.decisions[10].state is False and ev.decisions[10].strategy == IDLE

    def test_actuator_override_beats_zone_demand_but_not_safety(self):
        act = valve(override=OverrideSpec(True, NOW + timedelta(hours=1), "flushing"))
        assert run([zone(temp=15.0)], actuators=(act,)).decisions[10].state is True
        assert run([zone(temp=29.0)], actuators=(act,)).decisions[10].state is False


class TestStaleSensor:
    """A lost sensor falls back (plant frost, fixed duty) and raises an alarm."""

    def test_occupied_zone_with_a_stale_sensor_runs_a_fixed_duty_cycle(self):
        old = Reading(NOW.timestamp() - 3600, 15.0)
        z = zone(bookings=(YOGA,), reading=old, sensor_name="roomnode:hall-t")
        on = run([z], now=at(10, 20))  # first half of a 20 min period: on
        d = on.decisions[10]
        assert d.state is True and d.strategy == SENSOR_FALLBACK
        assert d.reason.startswith("Temperature sensor 'roomnode:hall-t' stale since 08:00")
        assert "fallback: fixed duty 50% of 20 min for Booking 'Yoga'" in d.reason
        assert "— on (10 min left" in d.reason
        off = run([z], now=at(10, 30))  # second half: off
        assert off.decisions[10].state is False and "— off (10 min left" in off.decisions[10].reason
        assert "sensor_fault" in off.zones[1].flags
        assert "stale since 08:00" in on.alarms["zone-sensor:1"]

    def test_the_duty_and_period_are_the_zones(self):
        old = Reading(NOW.timestamp() - 3600, 15.0)
        z = zone(bookings=(YOGA,), reading=old, fallback_duty_pct=25, fallback_period_s=2400)
        states = [run([z], now=at(10, m)).decisions[10].state for m in (0, 9, 11, 30, 39)]
        assert states == [True, True, False, False, False]

    def test_unoccupied_with_outside_frost_heats_as_frost_protection(self):
        old = Reading(NOW.timestamp() - 3600, 15.0)
        z = zone(reading=old)
        plant = plant_spec(1, "Boiler house", 20, (1,), pump_id=21,
                          outside=Reading(NOW.timestamp() - 60, 0.5),
                          outside_name="roof:outside")  # fmt: skip
        boiler = actuator_spec(20, "Boiler", "boiler", 600, 600, False)
        pump_ = actuator_spec(21, "Pump", "pump", 0, 0, False)
        off = OverrideSpec(False, NOW + timedelta(hours=1), "maintenance")
        # The valve is open (its board confirmed it): the boiler may fire.
        ev = run([z], (valve(override=off, is_on=True), boiler, pump_), plants=(plant,))
        d = ev.decisions[10]
        assert d.state is True and d.strategy == FROST  # beats the OFF override
        assert "fallback: plant frost protection, outside 0.5 °C below 1.5 °C" in d.reason
        assert ev.decisions[20].state is True and ev.decisions[20].strategy == FROST
        assert ev.decisions[21].state is True

    def test_without_outside_frost_an_unoccupied_zone_is_off_and_says_why(self):
        old = Reading(NOW.timestamp() - 3600, 15.0)
        plant = plant_spec(1, "Boiler house", 20, (1,),
                          outside=Reading(NOW.timestamp() - 60, 8.0), outside_name="roof:outside")  # fmt: skip
        boiler = actuator_spec(20, "Boiler", "boiler", 0, 0, False)
        ev = run([zone(reading=old)], (valve(), boiler), plants=(plant,))
        assert ev.decisions[10].state is False
        assert "unoccupied, outside 8.0 °C, no plant frost risk — heating off" in ev.zones[1].reason
        alone = run([zone(reading=old)])
        assert "no heating plant with an outside sensor" in alone.zones[1].reason
        assert "zone-sensor:1" in alone.alarms

    def test_a_stale_outside_sensor_is_an_alarm_too(self):
        plant = plant_spec(1, "Boiler house", 20, (1,),
                          outside=Reading(NOW.timestamp() - 7200, 0.0), outside_name="roof:outside")  # fmt: skip
        boiler = actuator_spec(20, "Boiler", "boiler", 0, 0, False)
        ev = run([zone(temp=15.0)], (valve(), boiler), plants=(plant,))
        assert "stale since 07:00" in ev.alarms["plant-outside:1"]
        assert "zone-sensor:1" not in ev.alarms

    def test_a_fresh_sensor_raises_no_alarm(self):
        assert run([zone(temp=15.0)]).alarms == {}

    def test_plant_frost_from_outside_runs_the_pump_and_holds_its_band(self):
        plant = plant_spec(1, "Boiler house", 20, (1,), pump_id=21, outside_name="roof:outside",
                          outside=Reading(NOW.timestamp() - 60, 1.0))  # fmt: skip
        acts = (valve(), actuator_spec(20, "Boiler", "boiler", 0, 0, False),
                actuator_spec(21, "Pump", "pump", 0, 0, False))  # fmt: skip
        ev = run([zone(temp=20.0)], acts, plants=(plant,))
        assert ev.decisions[21].state is True and ev.decisions[21].strategy == FROST
        assert ev.decisions[20].state is False  # no zone calls: the boiler stays off
        warmer = replace(plant, outside=Reading(NOW.timestamp() - 60, 2.0))
        held = run([zone(temp=20.0)], acts, plants=(warmer,), memory=ev.memory)
        assert held.decisions[21].state is True  # 2.0 °C: inside the 1 K band
        warm = replace(plant, outside=Reading(NOW.timestamp() - 60, 2.6))
        released = run([zone(temp=20.0)], acts, plants=(warm,), memory=held.memory)
        assert released.decisions[21].state is False

    def test_missing_sensor_too(self):
        ev = run([zone(temp=None, has_sensor=False, bookings=(YOGA,))], now=at(10, 30))
        assert ev.decisions[10].state is False  # the off half of the fallback duty cycle
        assert "No temperature sensor" in ev.zones[1].reason
        assert "No temperature sensor configured" in ev.alarms["zone-sensor:1"]

    def test_an_explicit_override_still_applies(self):
        on = OverrideSpec(True, NOW + timedelta(hours=3), "sensor being replaced")
        ev = run([zone(temp=None, override=on)])
        assert ev.decisions[10].state is True and "No reading" in ev.decisions[10].reason


class TestThermostatInOccupancy:
    def test_hysteresis_is_remembered_between_ticks(self):
        z = zone(temp=19.9, bookings=(YOGA,))
        first = run([z], now=at(10, 30))
        assert first.decisions[10].state is False  # inside the band, was off
        colder = run([replace(z, reading=Reading(at(10, 31).timestamp(), 19.6))], now=at(10, 31))
        assert colder.decisions[10].state is True
        back = run(
            [replace(z, reading=Reading(at(10, 40).timestamp(), 20.1))],
            now=at(10, 40),
            memory=colder.memory,
        )
        assert back.decisions[10].state is True  # still inside the band: keeps heating
        assert "heating" in back.decisions[10].reason

    def test_setback_outside_occupancy(self):
        ev = run([zone(temp=14.0, setback_setpoint=16.0)])
        assert ev.decisions[10].state is True and ev.decisions[10].strategy == SETBACK


class TestOptimumStart:
    def test_preheat_starts_at_deficit_times_rate_before_the_booking(self):
        # 17 °C, 20 °C wanted, 15 min/K: 45 min pre-heat, from 09:15.
        z = zone(temp=17.0, heating_rate_min_per_k=15.0, bookings=(YOGA,))
        before = run([replace(z, reading=Reading(at(9, 14).timestamp(), 17.0))], now=at(9, 14))
        assert before.decisions[10].state is False
        assert "next: Booking 'Yoga' 10:00–12:00" in before.decisions[10].reason
        during = run([replace(z, reading=Reading(at(9, 15).timestamp(), 17.0))], now=at(9, 15))
        d = during.decisions[10]
        assert d.state is True and d.strategy == OPTIMUM_START
        assert (
            d.reason == "Booking 'Yoga' 10:00–12:00, pre-heat 45 min at 4.0 °C/h (17.0 → 20.0 °C)"
        )

    def test_the_switch_on_time_is_latched_until_occupancy(self):
        """A room warming faster than predicted stays in pre-heat (the
        thermostat alone may close the valve at setpoint); it does not drop out and back in."""
        z = zone(heating_rate_min_per_k=15.0, bookings=(YOGA,))
        memory: dict = {}
        states, modes = [], []
        # 17 °C at 09:15 (45 min pre-heat); then warming 0.5 K a minute, far faster than
        # predicted: a recomputed pre-heat would be shorter than the lead from 09:16.
        for minute, temp in ((15, 17.0), (16, 17.5), (17, 18.0), (18, 18.5), (19, 18.0),
                             (20, 18.5), (21, 19.0)):  # fmt: skip
            now = at(9, minute)
            ev = run([replace(z, reading=Reading(now.timestamp(), temp))], now=now, memory=memory)
            memory = ev.memory
            states.append(ev.decisions[10].state)
            modes.append(ev.zones[1].mode)
        assert states == [True] * 7 and modes == [OPTIMUM_START] * 7
        assert "warming since 09:15 until it starts" in ev.decisions[10].reason
        # At setpoint the thermostat is satisfied; still pre-heat, so it resumes by hysteresis.
        warm = run([replace(z, reading=Reading(at(9, 30).timestamp(), 20.5))], now=at(9, 30),
                   memory=memory)  # fmt: skip
        assert warm.decisions[10].state is False and warm.zones[1].mode == OPTIMUM_START
        assert warm.decisions[10].reason.endswith("— satisfied")

    def test_a_latch_for_a_cancelled_booking_is_dropped(self):
        z = zone(temp=17.0, heating_rate_min_per_k=15.0, bookings=(YOGA,))
        first = run([replace(z, reading=Reading(at(9, 15).timestamp(), 17.0))], now=at(9, 15))
        gone = replace(z, bookings=(), reading=Reading(at(9, 16).timestamp(), 19.0))
        after = run([gone], now=at(9, 16), memory=first.memory)
        assert after.decisions[10].state is False and after.zones[1].mode != OPTIMUM_START

    def test_preheat_is_bounded_by_max_preheat(self):
        z = zone(temp=5.5, heating_rate_min_per_k=60.0, max_preheat_min=180, bookings=(YOGA,))
        assert (
            run([replace(z, reading=Reading(at(6, 59).timestamp(), 5.5))], now=at(6, 59))
            .decisions[10]
            .state
            is False
        )
        assert (
            run([replace(z, reading=Reading(at(7).timestamp(), 5.5))], now=at(7))
            .decisions[10]
            .state
            is True
        )

    def test_no_preheat_when_optimum_start_is_off(self):
        z = zone(temp=17.0, optimum_start=False, bookings=(YOGA,))
        assert (
            run([replace(z, reading=Reading(at(9, 55).timestamp(), 17.0))], now=at(9, 55))
            .decisions[10]
            .state
            is False
        )

    def test_occupancy_start_after_preheat_emits_a_learning_event(self):
        z = zone(temp=17.0, heating_rate_min_per_k=15.0, bookings=(YOGA,))
        pre = run([replace(z, reading=Reading(at(9, 30).timestamp(), 17.0))], now=at(9, 30))
        assert pre.memory["zone:1:preheat"]["temp"] == 17.0
        start = run(
            [replace(z, reading=Reading(at(10).timestamp(), 19.5))], now=at(10), memory=pre.memory
        )
        [event] = start.events
        assert event["kind"] == "occupancy_start" and event["temp_at_start"] == 19.5
        assert event["started"] == at(9, 30).timestamp() and event["setpoint"] == 20.0
        assert "zone:1:preheat" not in start.memory

    def test_optimum_stop_ends_heating_when_the_room_will_coast(self):
        z = zone(temp=20.4, optimum_stop=True, cooling_rate_min_per_k=60.0, bookings=(YOGA,))
        late = run([replace(z, reading=Reading(at(11, 30).timestamp(), 20.4))], now=at(11, 30))
        assert late.decisions[10].state is False and late.decisions[10].strategy == OPTIMUM_STOP
        assert "coasts to the end at 12:00" in late.decisions[10].reason
        early = run([replace(z, reading=Reading(at(10, 30).timestamp(), 20.4))], now=at(10, 30))
        assert early.decisions[10].strategy == BOOKING


class TestSchedule:
    def test_weekly_period_uses_its_setpoint(self):
        ev = run([zone(temp=20.0, schedule=OFFICE, optimum_start=False)], now=at(12))
        assert ev.decisions[10].state is True and ev.decisions[10].strategy == SCHEDULE
        assert "Schedule 'Office' Wed: 20.0 °C, setpoint 21.0 °C" in ev.decisions[10].reason

    def test_holiday_exception_day_is_unoccupied(self):
        holiday = replace(
            OFFICE, exceptions=(exception_spec(date(2026, 1, 14), description="Closed"),)
        )
        ev = run([zone(temp=18.0, schedule=holiday, optimum_start=False)], now=at(12))
        assert ev.decisions[10].state is False
        # The holiday is named.
        assert ev.decisions[10].reason.startswith(
            "Unoccupied, holiday 'Closed' (schedule 'Office'): heating off (18.0 °C)"
        )
        setback = zone(temp=18.0, schedule=holiday, optimum_start=False, setback_setpoint=16.0)
        assert (
            run([setback], now=at(12))
            .decisions[10]
            .reason.startswith(
                "Unoccupied, holiday 'Closed' (schedule 'Office'): 18.0 °C, setback 16.0 °C"
            )
        )

    def test_a_night_period_runs_across_midnight(self):
        """A period ending before it starts ends the next day."""
        night = ScheduleSpec("Night", periods=(PeriodSpec(2, time(22), time(6), 18.0),))  # Wed
        z = zone(temp=15.0, schedule=night, optimum_start=False)
        states = [
            run([z], now=now).decisions[10].state
            for now in (at(21, 59), at(22), at(23, 59), at(0, 1, day=15), at(5, 59, day=15))
        ]
        assert states == [False, True, True, True, True]
        after = run([z], now=at(6, day=15)).decisions[10]
        assert after.state is False
        assert (
            run([z], now=at(0, 1, day=15))
            .decisions[10]
            .reason.startswith("Schedule 'Night' Wed: 15.0 °C, setpoint 18.0 °C")
        )

    def test_a_holiday_replaces_the_night_that_starts_on_it_not_the_one_ending_on_it(self):
        night = ScheduleSpec(
            "Night",
            periods=(PeriodSpec(2, time(22), time(6)), PeriodSpec(3, time(22), time(6))),
            exceptions=(exception_spec(date(2026, 1, 15), description="Closure"),),  # Thursday
        )
        z = zone(temp=15.0, schedule=night, optimum_start=False)
        assert run([z], now=at(3, day=15)).decisions[10].state is True  # Wednesday's night
        thursday = run([z], now=at(23, day=15)).decisions[10]
        assert thursday.state is False and "holiday 'Closure'" in thursday.reason

    def test_special_occupied_day(self):
        special = ScheduleSpec(
            "Office",
            exceptions=(exception_spec(date(2026, 1, 17), True, time(10), time(14), "Open day"),),
        )
        ev = run([zone(temp=18.0, schedule=special, optimum_start=False)], now=at(11, day=17))
        assert ev.decisions[10].state is True
        assert "Open day" in ev.decisions[10].reason


class TestTimers:
    def test_min_run_keeps_a_valve_on(self):
        act = valve(is_on=True, changed_at=NOW.timestamp() - 120, min_on_s=600)
        ev = run([zone(temp=22.0)], actuators=(act,))
        d = ev.decisions[10]
        assert d.state is True and d.strategy == ANTI_SHORT_CYCLE
        assert "Minimum run 10 min: on for 2 min" in d.reason

    def test_frost_is_not_delayed_by_min_off(self):
        act = valve(is_on=False, changed_at=NOW.timestamp() - 60, min_off_s=600)
        assert run([zone(temp=3.0)], actuators=(act,)).decisions[10].state is True


class TestHeatingPlant:
    def setup_method(self):
        self.plant = plant_spec(1, "Boiler house", boiler_id=20, pump_id=21, zone_ids=(1,))

    def acts(self, boiler_on, pump_on, boiler_changed=None, pump_changed=None, boiler_off_at=None,
             valve_open=False, fired=True):  # fmt: skip
        """`fired`: the boiler read back ON in its latest on-period (its board confirmed it)."""
        confirmed_at = at(9).timestamp() if fired else None
        return (
            valve(is_on=valve_open),
            actuator_spec(
                20,
                "Boiler",
                "boiler",
                600,
                600,
                boiler_on,
                boiler_changed,
                boiler_off_at,
                confirmed=True,
                last_on_at=at(9).timestamp(),
                on_confirmed_at=confirmed_at,
            ),  # fmt: skip
            actuator_spec(21, "Pump", "pump", 0, 0, pump_on, pump_changed, None),
        )

    def test_boiler_and_pump_follow_zone_demand(self):
        ev = run(
            [zone(temp=15.0, bookings=(YOGA,))],
            self.acts(False, False, valve_open=True),
            now=at(10, 30),
            plants=(self.plant,),
        )
        assert ev.decisions[20].state and ev.decisions[21].state
        assert ev.decisions[20].reason == "Heat demand from Hall"

    def test_the_boiler_waits_for_the_zone_valve_to_confirm_open(self):
        """Issue #27 A1: demand counts a valve the board confirmed open, not one commanded."""
        zones = [zone(temp=15.0, bookings=(YOGA,))]
        ev = run(zones, self.acts(False, False), now=at(10, 30), plants=(self.plant,))
        assert ev.decisions[10].state is True  # the valve is driven open …
        assert ev.decisions[20].state is False  # … and the boiler waits for it
        assert (
            ev.decisions[20].reason == "No zone can take heat (Hall: valve not yet confirmed open)"
        )
        # Commanded ON but its board never confirmed it (a refused coil, a dead board).
        acts = self.acts(False, False, valve_open=True)
        refused = (replace(acts[0], confirmed=False, fault=True), *acts[1:])
        ev = run(zones, refused, now=at(10, 30), plants=(self.plant,))
        assert ev.decisions[20].state is False
        assert ev.decisions[20].reason == "No zone can take heat (Hall: every valve in fault)"
        assert "every valve is in fault ('Hall valve')" in ev.alarms["zone-valves:1"]
        # Confirmed open: the boiler fires.
        ev = run(zones, acts, now=at(10, 30), plants=(self.plant,))
        assert ev.decisions[20].state is True and "zone-valves:1" not in ev.alarms

    def test_no_overrun_for_a_boiler_that_never_confirmed_on(self):
        """Issue #27 A5: a new plant's boiler, first commanded OFF, ran a 6 min overrun (and
        forced a valve open on a plant without a bypass)."""
        just_off = at(12, 2).timestamp()  # first command: OFF, from an unknown state
        acts = self.acts(False, False, just_off, just_off, boiler_off_at=just_off, fired=False)
        ev = run([zone(temp=20.0)], acts, now=at(12, 3), plants=(self.plant,))
        assert ev.decisions[21].state is False and ev.decisions[21].strategy == HEATING_PLANT
        assert ev.decisions[10].state is False  # no valve forced open
        # Commanded ON at 12:00 and refused by its board, OFF at 12:02: it did not fire in that
        # on-period (it last confirmed ON in an earlier one), so no overrun either.
        refused = replace(acts[1], last_on_at=at(12).timestamp(), on_confirmed_at=at(9).timestamp())
        ev = run([zone(temp=20.0)], (acts[0], refused, acts[2]), now=at(12, 3),
                 plants=(self.plant,))  # fmt: skip
        assert ev.decisions[21].state is False
        # The same boiler confirmed ON before it stopped: the overrun runs.
        fired = self.acts(False, False, just_off, just_off, boiler_off_at=just_off)
        ev = run([zone(temp=20.0)], fired, now=at(12, 3), plants=(self.plant,))
        assert ev.decisions[21].state is True and ev.decisions[21].strategy == PUMP_OVERRUN

    def test_pump_overruns_after_the_boiler_stops(self):
        stopped = at(12, 2).timestamp()
        acts = self.acts(False, True, stopped, at(10).timestamp(), boiler_off_at=stopped)
        ev = run([zone(temp=20.0)], acts, now=at(12, 5), plants=(self.plant,))
        assert ev.decisions[20].state is False
        assert ev.decisions[21].state is True and ev.decisions[21].strategy == PUMP_OVERRUN
        assert "(3 min left)" in ev.decisions[21].reason
        ev = run([zone(temp=20.0)], acts, now=at(12, 8), plants=(self.plant,))
        assert ev.decisions[21].state is False

    def test_overrun_starts_on_the_tick_the_boiler_stops(self):
        acts = self.acts(True, True, at(10).timestamp(), at(10).timestamp())
        ev = run([zone(temp=21.0)], acts, now=at(12, 1), plants=(self.plant,))
        assert ev.decisions[20].state is False and ev.decisions[20].strategy == HEATING_PLANT
        assert ev.decisions[21].strategy == PUMP_OVERRUN

    def test_min_burner_run_beats_the_setpoint(self):
        acts = self.acts(True, True, at(11, 58).timestamp(), at(11, 58).timestamp())
        ev = run([zone(temp=21.0)], acts, now=at(12, 1), plants=(self.plant,))
        assert ev.decisions[20].state is True and ev.decisions[20].strategy == ANTI_SHORT_CYCLE
        assert ev.decisions[21].state is True  # the pump follows a firing boiler

    def test_weekly_pump_kick(self):
        idle_since = NOW.timestamp() - 8 * 86400
        acts = self.acts(False, False, idle_since, idle_since, boiler_off_at=idle_since)
        acts = acts[:2] + (replace(acts[2], last_off_at=idle_since),)
        ev = run([zone(temp=20.0)], acts, plants=(self.plant,))
        assert ev.decisions[21].state is True and ev.decisions[21].strategy == PUMP_KICK
        on = (acts[0], acts[1], replace(acts[2], is_on=True, changed_at=NOW.timestamp()))
        later = run(
            [zone(temp=20.0)],
            on,
            now=NOW + timedelta(seconds=31),
            plants=(self.plant,),
            memory=ev.memory,
        )
        assert (
            later.decisions[21].state is False
            and later.decisions[21].reason == "Pump kick done (30 s)"
        )


class TestSolarCircuit:
    def test_pump_from_differential_and_fallback_on_stale_sensors(self):
        now_s = NOW.timestamp()
        circuit = solar_spec(1, "Roof", 30, Reading(now_s, 50.0), Reading(now_s, 40.0))
        pump = actuator_spec(30, "Solar pump", "pump", 0, 0, False)
        ev = run([], (pump,), solars=(circuit,))
        assert ev.decisions[30].state is True
        stale = replace(circuit, tank=Reading(now_s - 7200, 40.0))
        ev = run([], (replace(pump, is_on=True),), solars=(stale,))
        assert ev.decisions[30].state is False and ev.decisions[30].strategy == SENSOR_FALLBACK
        assert ev.decisions[30].reason.startswith("Tank: Temperature sensor stale since 07:00")
        assert "safe state, pump off" in ev.decisions[30].reason
        assert "Solar circuit 'Roof': Tank" in ev.alarms["solar-sensor:1"]

    def test_emergency_state_is_remembered(self):
        now_s = NOW.timestamp()
        hot = solar_spec(1, "Roof", 30, Reading(now_s, 131.0), Reading(now_s, 50.0))
        pump = actuator_spec(30, "Solar pump", "pump", 0, 0, True)
        ev = run([], (pump,), solars=(hot,))
        assert ev.decisions[30].state is False
        cooling = replace(hot, collector=Reading(now_s, 125.0))
        assert run([], (pump,), solars=(cooling,), memory=ev.memory).decisions[30].state is False
        assert run([], (pump,), solars=(cooling,)).decisions[30].state is True


class TestNoBypass:
    """Overrun and minimum burner run went on with every zone valve closed."""

    def setup_method(self):
        self.plant = plant_spec(1, "Boiler house", boiler_id=20, pump_id=21, zone_ids=(1, 2))
        self.zones = [zone(temp=20.0), zone(temp=20.0, id=2, name="Annex", actuator_ids=(11,))]

    def acts(self, hall_open: bool, annex_open: bool, **boiler):
        stopped = at(12, 2).timestamp()
        return (
            valve(is_on=hall_open),
            valve(id=11, name="Annex valve", is_on=annex_open),
            actuator_spec(
                20,
                "Boiler",
                "boiler",
                0,
                0,
                False,
                stopped,
                stopped,
                on_confirmed_at=at(10).timestamp(),
                **boiler,
            ),  # it fired
            actuator_spec(21, "Pump", "pump", 0, 0, True, at(10).timestamp()),
        )

    def test_overrun_keeps_the_last_open_valve_open(self):
        ev = run(self.zones, self.acts(False, True), now=at(12, 5), plants=(self.plant,))
        assert ev.decisions[21].strategy == PUMP_OVERRUN
        assert ev.decisions[11].state is True and ev.decisions[11].strategy == NO_BYPASS
        assert ev.decisions[11].reason.startswith(
            "Held open: 'Boiler house' has no bypass and its pump runs (Overrun"
        )
        assert ev.decisions[10].state is False  # only the valve that was open
        done = run(self.zones, self.acts(False, True), now=at(12, 9), plants=(self.plant,))
        assert done.decisions[21].state is False and done.decisions[11].state is False

    def test_with_a_bypass_the_valves_close(self):
        plant = replace(self.plant, has_bypass=True)
        ev = run(self.zones, self.acts(False, True), now=at(12, 5), plants=(plant,))
        assert ev.decisions[21].state is True
        assert ev.decisions[10].state is False and ev.decisions[11].state is False

    def test_minimum_burner_run_keeps_a_circuit_open(self):
        acts = list(self.acts(True, False))
        acts[2] = actuator_spec(20, "Boiler", "boiler", 600, 600, True, at(12, 0).timestamp())
        ev = run(self.zones, acts, now=at(12, 3), plants=(self.plant,))
        assert ev.decisions[20].state is True and ev.decisions[20].strategy == ANTI_SHORT_CYCLE
        assert ev.decisions[10].state is True and ev.decisions[10].strategy == NO_BYPASS

    def test_with_no_valve_open_before_the_first_zones_valve_opens(self):
        idle = NOW.timestamp() - 8 * 86400
        acts = (
            valve(),
            valve(id=11, name="Annex valve"),
            actuator_spec(20, "Boiler", "boiler", 0, 0, False, idle, idle),
            actuator_spec(21, "Pump", "pump", 0, 0, False, idle, idle),
        )
        ev = run(self.zones, acts, plants=(self.plant,))
        assert ev.decisions[21].strategy == PUMP_KICK
        assert ev.decisions[10].state is True and ev.decisions[11].state is False

    def test_a_valve_commanded_open_that_never_confirmed_is_not_an_open_circuit(self):
        """Issue #27 A1: Hall's only valve was refused by its board; Hall still called, the
        no-bypass rule counted the commanded valve as open, and for 5 min 43 s boiler and pump
        ran against every valve of the plant shut (coils 0-4 read [1, 1, 0, 0, 0])."""
        plant = replace(self.plant, index_zone_id=2)
        zones = [zone(temp=15.0, bookings=(YOGA,)), self.zones[1]]
        firing = at(10, 27).timestamp()
        acts = (
            valve(is_on=True, confirmed=False, fault=True),  # commanded ON, coil refused
            valve(id=11, name="Annex valve"),  # closed, confirmed
            actuator_spec(
                20,
                "Boiler",
                "boiler",
                600,
                600,
                True,
                firing,
                None,
                confirmed=True,
                last_on_at=firing,
                on_confirmed_at=firing,
            ),  # fmt: skip
            actuator_spec(21, "Pump", "pump", 0, 0, True, firing, confirmed=True),
        )
        ev = run(zones, acts, now=at(10, 30), plants=(plant,))
        # Hall cannot take heat: it no longer calls; the minimum burner run holds the boiler …
        assert ev.decisions[20].strategy == ANTI_SHORT_CYCLE
        assert "No zone can take heat (Hall: every valve in fault)" in ev.decisions[20].reason
        # … so the index circuit's valve is opened, whatever Hall's valve was commanded.
        assert ev.decisions[11].state is True and ev.decisions[11].strategy == NO_BYPASS
        assert ev.decisions[10].state is True  # Hall's valve is still retried
        assert "zone-valves:1" in ev.alarms and "plant-circuit:1" not in ev.alarms

    def test_a_plant_none_of_whose_circuits_can_be_shown_open_stops_its_boiler_and_alarms(self):
        firing = at(10, 27).timestamp()
        acts = (
            valve(is_on=True, confirmed=False, fault=True),
            valve(id=11, name="Annex valve", is_on=False, confirmed=False, fault=True),
            actuator_spec(
                20,
                "Boiler",
                "boiler",
                600,
                600,
                True,
                firing,
                None,
                confirmed=True,
                last_on_at=firing,
                on_confirmed_at=firing,
            ),  # fmt: skip
            actuator_spec(21, "Pump", "pump", 0, 0, True, firing, confirmed=True),
        )
        zones = [zone(temp=15.0, bookings=(YOGA,)), self.zones[1]]
        ev = run(zones, acts, now=at(10, 30), plants=(self.plant,))
        boiler = ev.decisions[20]
        assert boiler.state is False and boiler.strategy == NO_OPEN_CIRCUIT  # beats min run
        assert boiler.reason.startswith("No circuit of 'Boiler house' can be shown open")
        assert ev.alarms["plant-circuit:1"].startswith(
            "Heating plant 'Boiler house' has no bypass and none of its circuits can be shown "
            "open: 'Hall valve' (fault), 'Annex valve' (fault)"
        )
        # With a bypass the boiler may fire against shut valves: no alarm, min run holds.
        ev = run(zones, acts, now=at(10, 30), plants=(replace(self.plant, has_bypass=True),))
        assert ev.decisions[20].state is True and "plant-circuit:1" not in ev.alarms

    def test_a_valve_an_engineer_closed_stays_closed(self):
        off = OverrideSpec(False, at(18), "valve head removed")
        acts = list(self.acts(False, True))
        acts[1] = replace(acts[1], override=off)
        ev = run(self.zones, acts, now=at(12, 5), plants=(self.plant,))
        assert ev.decisions[11].state is False and ev.decisions[11].strategy == OVERRIDE
        assert ev.decisions[10].state is True  # the index circuit instead


def test_an_actuator_nothing_drives_is_held_at_its_idle_state():
    """Issue #15.5: it used to get no decision at all, so it stayed wherever it was left."""
    lone = actuator_spec(99, "Spare relay", is_on=True)
    decision = run([zone(temp=15.0)], actuators=(valve(), lone)).decisions[99]
    assert (decision.state, decision.reason) == (False, "Not controlled: idle state OFF")
    pump = actuator_spec(98, "Pump", is_on=False, idle_state=True, owner="zone 'Hall'")
    decision = run([], actuators=(pump,)).decisions[98]
    assert decision.state is True and decision.released_from == "zone 'Hall'"
    assert decision.reason == "Released from zone 'Hall': idle state ON" and decision.owner == ""


def test_unoccupied_reason_in_utc_day():
    ev = run([zone(temp=18.0)], now=datetime(2026, 1, 14, 23, 0, tzinfo=UTC))
    assert ev.decisions[10].reason == "Unoccupied: heating off (18.0 °C)"
