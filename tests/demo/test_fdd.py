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
     "window_open:hall@2026-01-05T01:00+00:00/2026-01-05T00:00+00:00"],
)  # fmt: skip
def test_a_bad_fault_is_refused_naming_what_is_wrong(text):
    from demo.faults import FaultError, parse

    with pytest.raises(FaultError):
        parse(text)


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
