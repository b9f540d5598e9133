"""A schedule at 01:30 on the days the clocks change in Europe/London."""

from __future__ import annotations

from datetime import UTC, datetime, time
from zoneinfo import ZoneInfo

from control.engine.evaluator import evaluate
from control.engine.specs import PeriodSpec, Reading, ScheduleSpec
from control.engine.strategies import schedule

from .helpers import snapshot, valve, zone

LONDON = ZoneInfo("Europe/London")
SUNDAY_0130 = ScheduleSpec("Night", periods=(PeriodSpec(6, time(1, 30), time(3, 0)),))


def windows_on(day_start: datetime, day_end: datetime):
    return schedule.windows(SUNDAY_0130, day_start, day_end, LONDON, 20.0)


def test_spring_forward_01_30_does_not_exist_so_it_starts_when_the_clocks_jump():
    [w] = windows_on(datetime(2026, 3, 28, 12, tzinfo=UTC), datetime(2026, 3, 29, 12, tzinfo=UTC))
    # The jump: 01:00 UTC = 02:00 BST; 03:00 BST = 02:00 UTC (tests/control/test_dst_gap.py).
    assert w.start == datetime(2026, 3, 29, 1, 0, tzinfo=UTC)
    assert w.end == datetime(2026, 3, 29, 2, 0, tzinfo=UTC)
    assert w.start.astimezone(LONDON).strftime("%H:%M %Z") == "02:00 BST"


def test_fall_back_01_30_happens_twice_but_the_period_starts_once():
    found = windows_on(
        datetime(2026, 10, 24, 12, tzinfo=UTC), datetime(2026, 10, 25, 12, tzinfo=UTC)
    )
    assert len(found) == 1
    [w] = found
    assert w.start == datetime(2026, 10, 25, 0, 30, tzinfo=UTC)  # the first 01:30 (BST)
    assert w.end == datetime(2026, 10, 25, 3, 0, tzinfo=UTC)  # 03:00 GMT
    assert (w.end - w.start).total_seconds() == 2.5 * 3600  # the repeated hour is heated too


def heating_at(now: datetime) -> bool:
    z = zone(temp=15.0, schedule=SUNDAY_0130, optimum_start=False, now=now)
    z = z.__class__(**{**z.__dict__, "reading": Reading(now.timestamp(), 15.0)})
    return evaluate(snapshot(now=now, zones=(z,), actuators=(valve(),))).decisions[10].state


def test_evaluator_on_the_spring_day():
    assert not heating_at(datetime(2026, 3, 29, 0, 59, tzinfo=UTC))  # 00:59 GMT
    assert heating_at(datetime(2026, 3, 29, 1, 45, tzinfo=UTC))  # 02:45 BST
    assert not heating_at(datetime(2026, 3, 29, 2, 1, tzinfo=UTC))  # 03:01 BST


def test_evaluator_on_the_autumn_day():
    assert not heating_at(datetime(2026, 10, 25, 0, 29, tzinfo=UTC))  # 01:29 BST
    assert heating_at(datetime(2026, 10, 25, 0, 45, tzinfo=UTC))  # first 01:45 BST
    assert heating_at(datetime(2026, 10, 25, 1, 45, tzinfo=UTC))  # second 01:45 GMT
    assert not heating_at(datetime(2026, 10, 25, 3, 1, tzinfo=UTC))  # 03:01 GMT


NIGHTS = ScheduleSpec("Nights", periods=(PeriodSpec(5, time(22), time(6)),))  # Saturday night


def test_a_night_period_over_the_spring_forward_is_seven_hours():
    """Sat 28 March 2026 22:00 GMT to Sun 06:00 BST: one window, 7 real hours."""
    [w] = schedule.windows(
        NIGHTS, datetime(2026, 3, 28, 12, tzinfo=UTC), datetime(2026, 3, 29, 12, tzinfo=UTC),
        LONDON, 20.0,
    )  # fmt: skip
    assert (w.start, w.end) == (
        datetime(2026, 3, 28, 22, tzinfo=UTC),
        datetime(2026, 3, 29, 5, tzinfo=UTC),
    )


def test_a_night_period_over_the_fall_back_is_nine_hours():
    """Sat 24 October 2026 22:00 BST (21:00 UTC) to Sun 06:00 GMT (06:00 UTC)."""
    [w] = schedule.windows(
        NIGHTS, datetime(2026, 10, 24, 12, tzinfo=UTC), datetime(2026, 10, 25, 12, tzinfo=UTC),
        LONDON, 20.0,
    )  # fmt: skip
    assert (w.start, w.end) == (
        datetime(2026, 10, 24, 21, tzinfo=UTC),
        datetime(2026, 10, 25, 6, tzinfo=UTC),
    )
    # The evaluator heats through the repeated hour 01:00–02:00.
    snap = snapshot(
        now=datetime(2026, 10, 25, 1, 30, tzinfo=UTC),  # 01:30 GMT, the second 01:30
        zones=(zone(temp=15.0, schedule=NIGHTS, optimum_start=False,
                    reading=Reading(datetime(2026, 10, 25, 1, 29, tzinfo=UTC).timestamp(), 15.0)),),
        actuators=(valve(),),
    )  # fmt: skip
    assert evaluate(snap).decisions[10].state is True
