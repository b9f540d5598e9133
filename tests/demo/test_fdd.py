"""Fault injection in the demo plant and the detection bench's code path (demo/fdd.py,
bench/fdd.py): on a short simulated run each injected fault of an existing rule is found, late
by less than a day, and the fault-free run has no finding at all."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

MONDAY = datetime(2026, 1, 5, tzinfo=UTC)
H = timedelta(hours=1)


def test_a_fault_acts_only_from_its_start():
    from demo.faults import SENSOR_FLATLINE, VALVE_STUCK_OPEN, Fault, FaultPlan

    plan = FaultPlan.of([Fault(VALVE_STUCK_OPEN, "hall", MONDAY + H),
                         Fault(SENSOR_FLATLINE, "hall", MONDAY + H, MONDAY + 2 * H)])  # fmt: skip
    assert plan.valve_open("hall", False, MONDAY) is False
    assert plan.valve_open("hall", False, MONDAY + H) is True
    assert plan.reading("hall", 18.0, MONDAY) == 18.0
    assert plan.reading("hall", 18.5, MONDAY + H) == 18.5
    assert plan.reading("hall", 19.5, MONDAY + 1.5 * H) == 18.5  # stuck
    assert plan.reading("hall", 20.0, MONDAY + 2 * H) == 20.0  # mended


def test_a_short_cycling_boiler_switches_every_four_minutes_while_there_is_demand():
    from demo.faults import BOILER, BOILER_SHORT_CYCLING, Fault, FaultPlan

    plan = FaultPlan.of([Fault(BOILER_SHORT_CYCLING, BOILER, MONDAY)])
    minute = timedelta(minutes=1)
    states = [plan.boiler(True, MONDAY + i * minute) for i in range(16)]
    assert states == [True] * 4 + [False] * 4 + [True] * 4 + [False] * 4
    assert plan.boiler(False, MONDAY) is False


@pytest.mark.parametrize(
    "text",
    ["nonsense", "window_open:hall", "flood:hall@2026-01-05T00:00+00:00",
     "window_open:hall@2026-01-05T00:00", "boiler_short_cycling:hall@2026-01-05T00:00+00:00",
     "window_open:hall@2026-01-05T01:00+00:00/2026-01-05T00:00+00:00",
     "window_open:boiler@2026-01-05T00:00+00:00", "pv_shaded:hall@2026-01-05T00:00+00:00",
     "night_base_load:boiler@2026-01-05T00:00+00:00", "sensor_flatline:pv-string-1@2026-01-05T00:00+00:00",
     "solar_pump_forced_on:site@2026-01-05T00:00+00:00"],
)  # fmt: skip
def test_a_bad_fault_is_refused_naming_what_is_wrong(text):
    from demo.faults import FaultError, parse

    with pytest.raises(FaultError):
        parse(text)


def test_the_plant_faults_act_on_the_load_a_pv_string_and_the_solar_pump_from_their_start():
    from demo import faults as k
    from demo.faults import Fault, FaultPlan, parse

    plan = FaultPlan.of([Fault(k.NIGHT_BASE_LOAD, k.SITE, MONDAY + H),
                         parse("pv_shaded:pv-string-2@2026-01-05T01:00+00:00"),
                         Fault(k.SOLAR_PUMP_FORCED_ON, k.SOLAR, MONDAY + H)])  # fmt: skip
    assert (plan.extra_load_w(MONDAY), plan.extra_load_w(MONDAY + H)) == (0.0, k.BASE_LOAD_RISE_W)
    assert plan.pv_share("pv-string-2", MONDAY) == 1.0
    assert plan.pv_share("pv-string-2", MONDAY + H) == k.SHADED_SHARE
    assert plan.pv_share("pv-string-1", MONDAY + H) == 1.0
    assert (plan.solar_pump_forced(MONDAY), plan.solar_pump_forced(MONDAY + H)) == (False, True)


def test_the_demo_plant_carries_the_plant_faults():
    from demo import faults as k
    from demo.faults import Fault, FaultPlan
    from demo.plant import Coils, DemoPlant

    noon = MONDAY + 12 * H
    clean, faulty = DemoPlant(noon, seed=3), DemoPlant(noon, seed=3)
    faulty.faults = FaultPlan.of([Fault(k.NIGHT_BASE_LOAD, k.SITE, MONDAY),
                                  Fault(k.PV_SHADED, "pv-string-2", MONDAY),
                                  Fault(k.SOLAR_PUMP_FORCED_ON, k.SOLAR, MONDAY)])  # fmt: skip
    for plant in (clean, faulty):
        plant.step(noon, 60.0, 1.0, Coils())
    one, two = clean.pv_strings_w.values()
    assert one == two > 0 and clean.pv_w == one + two
    assert faulty.pv_strings_w == {"pv-string-1": one, "pv-string-2": two * k.SHADED_SHARE}
    assert faulty.pv_w == one + two * k.SHADED_SHARE
    # the pump held on (60 W) and the heater left on
    assert faulty.coils.solar_pump and not clean.coils.solar_pump
    assert faulty.site_demand_w(noon) - clean.site_demand_w(noon) == k.BASE_LOAD_RISE_W + 60.0


def test_a_plan_is_bounded():
    from demo.faults import MAX_FAULTS, WINDOW_OPEN, Fault, FaultError, FaultPlan

    fault = Fault(WINDOW_OPEN, "hall", MONDAY)
    FaultPlan.of([fault] * MAX_FAULTS)
    with pytest.raises(FaultError):
        FaultPlan.of([fault] * (MAX_FAULTS + 1))


def test_a_short_run_finds_each_injected_fault_within_a_day_and_nothing_when_fault_free(
    db, redis_client
):
    from demo import faults as k
    from demo import fdd
    from demo.faults import FaultPlan

    rig = fdd.build()
    days = 3
    fdd.run(rig, MONDAY, days, FaultPlan())
    clean = fdd.detect(MONDAY, days, every=3 * H)
    assert clean == {}

    injected = [
        k.Fault(k.SENSOR_FLATLINE, "lecture-theatre", MONDAY + 7 * H),
        k.Fault(k.WINDOW_OPEN, "workshop", MONDAY + 9 * H),
        k.Fault(k.VALVE_STUCK_OPEN, "seminar-room", MONDAY + 10 * H),
        k.Fault(k.BOILER_SHORT_CYCLING, k.BOILER, MONDAY + 30.5 * H),
    ]
    fdd.reset()
    fdd.run(rig, MONDAY, days, FaultPlan.of(injected))
    table = fdd.score(rig, injected, fdd.detect(MONDAY, days, every=3 * H))
    for fault in injected:
        rule, _ = fdd.expected_key(rig, fault)
        assert table[rule].found == table[rule].injected, (fault, table)
        assert max(table[rule].delays) <= timedelta(days=1), (rule, table[rule])
    assert {r: row.false for r, row in table.items() if row.false} == {}


def test_a_week_finds_the_plant_faults_within_a_day(db, redis_client):
    """The base load rising in a Monday's office hours is found the morning after, on its
    first night (the rule's short look); the shaded PV string on its first bright hours."""
    from demo import faults as k
    from demo import fdd
    from demo.faults import FaultPlan

    rig = fdd.build()
    days = 7
    injected = [
        k.Fault(k.NIGHT_BASE_LOAD, k.SITE, MONDAY + 6 * H),
        k.Fault(k.PV_SHADED, "pv-string-2", MONDAY + 30 * H),
        k.Fault(k.SOLAR_PUMP_FORCED_ON, k.SOLAR, MONDAY + 59 * H),
    ]
    fdd.run(rig, MONDAY, days, FaultPlan.of(injected))
    table = fdd.score(rig, injected, fdd.detect(MONDAY, days, every=6 * H))
    delays = {}
    for fault in injected:
        rule, _ = fdd.expected_key(rig, fault)
        assert table[rule].found == table[rule].injected == 1, (fault, table[rule])
        delays[fault.kind] = table[rule].delays[0]
    assert max(delays.values()) <= timedelta(days=1), delays
    assert {r: row.false for r, row in table.items() if row.false} == {}
