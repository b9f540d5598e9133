"""A schedule period inside the spring-forward gap (issue 27, item 7): Sun 01:30–02:15 in
Europe/London heated not at all on the change day (01:30 read as 02:30 BST, after its own end
at 02:15 BST), with no warning when saved. It now heats from the jump (02:00 BST) and saving it
warns, in the admin and the API."""

from __future__ import annotations

from datetime import UTC, datetime, time
from zoneinfo import ZoneInfo

import pytest
import time_machine
from django.test import Client

from control.engine.evaluator import evaluate
from control.engine.specs import PeriodSpec, Reading, ScheduleSpec
from control.engine.strategies import schedule
from control.models import Schedule, SchedulePeriod

from .helpers import snapshot, valve, zone

LONDON = ZoneInfo("Europe/London")
GAP_PERIOD = ScheduleSpec("Early", periods=(PeriodSpec(6, time(1, 30), time(2, 15)),))
SPRING_DAY = (datetime(2026, 3, 28, 12, tzinfo=UTC), datetime(2026, 3, 29, 12, tzinfo=UTC))


def bst(w) -> str:
    return f"{w.start.astimezone(LONDON):%H:%M %Z}–{w.end.astimezone(LONDON):%H:%M %Z}"


def test_a_period_starting_in_the_gap_heats_from_the_jump():
    [w] = schedule.windows(GAP_PERIOD, *SPRING_DAY, LONDON, 20.0)
    assert bst(w) == "02:00 BST–02:15 BST"
    assert w.start == datetime(2026, 3, 29, 1, 0, tzinfo=UTC)


def test_a_period_wholly_inside_the_gap_runs_its_length_from_the_jump():
    inside = ScheduleSpec("Inside", periods=(PeriodSpec(6, time(1, 15), time(1, 45)),))
    [w] = schedule.windows(inside, *SPRING_DAY, LONDON, 20.0)
    assert bst(w) == "02:00 BST–02:30 BST"


def test_other_sundays_are_untouched():
    [w] = schedule.windows(
        GAP_PERIOD,
        datetime(2026, 3, 21, 12, tzinfo=UTC),
        datetime(2026, 3, 22, 12, tzinfo=UTC),
        LONDON,
        20.0,
    )
    assert f"{w.start.astimezone(LONDON):%H:%M}–{w.end.astimezone(LONDON):%H:%M}" == "01:30–02:15"


def test_a_zone_whose_gap_is_two_to_three_heats_from_three():
    paris = ZoneInfo("Europe/Paris")  # clocks go 02:00 CET -> 03:00 CEST
    night = ScheduleSpec("Night", periods=(PeriodSpec(6, time(2, 30), time(3, 15)),))
    [w] = schedule.windows(night, *SPRING_DAY, paris, 20.0)
    assert f"{w.start.astimezone(paris):%H:%M %Z}" == "03:00 CEST"
    assert f"{w.end.astimezone(paris):%H:%M %Z}" == "03:15 CEST"


def heating_at(now: datetime) -> bool:
    z = zone(temp=15.0, schedule=GAP_PERIOD, optimum_start=False, now=now)
    z = z.__class__(**{**z.__dict__, "reading": Reading(now.timestamp(), 15.0)})
    return evaluate(snapshot(now=now, zones=(z,), actuators=(valve(),))).decisions[10].state


def test_the_evaluator_heats_on_the_change_day():
    assert not heating_at(datetime(2026, 3, 29, 0, 59, tzinfo=UTC))  # 00:59 GMT
    assert heating_at(datetime(2026, 3, 29, 1, 5, tzinfo=UTC))  # 02:05 BST
    assert not heating_at(datetime(2026, 3, 29, 1, 16, tzinfo=UTC))  # 02:16 BST


WARNING = (
    "01:30 does not exist on Sun 29 Mar 2026 (the clocks go forward): that day the period "
    "starts when they do, at 02:00 BST."
)


@pytest.mark.django_db
def test_the_api_warns_when_a_gap_period_is_saved(engineer_api, settings):
    settings.TIME_ZONE = "Europe/London"
    week = Schedule.objects.create(name="Week")
    with time_machine.travel(datetime(2026, 3, 1, 12, tzinfo=UTC)):
        response = engineer_api.post(
            "/api/v1/schedule-periods",
            {"schedule": week.pk, "weekday": 6, "start": "01:30", "end": "02:15"},
            format="json",
        )
        assert response.status_code == 201, response.content
        assert response.json()["warnings"] == [WARNING]  # 02:15 exists: only the start
        ordinary = engineer_api.post(
            "/api/v1/schedule-periods",
            {"schedule": week.pk, "weekday": 6, "start": "09:00", "end": "12:00"},
            format="json",
        )
        assert ordinary.json()["warnings"] == []
        # Next year's change day, once this year's has passed.
    with time_machine.travel(datetime(2026, 4, 1, 12, tzinfo=UTC)):
        [period] = engineer_api.get(f"/api/v1/schedules/{week.pk}").json()["periods"][:1]
        assert "Sun 28 Mar 2027" in period["warnings"][0]


@pytest.mark.django_db
def test_the_admin_warns_when_a_gap_period_is_saved(superuser, settings):
    settings.TIME_ZONE = "Europe/London"
    c = Client()
    c.force_login(superuser)
    form = {
        "name": "Early", "description": "",
        "periods-TOTAL_FORMS": 1, "periods-INITIAL_FORMS": 0, "periods-MIN_NUM_FORMS": 0,
        "periods-MAX_NUM_FORMS": 1000,
        "periods-0-weekday": 6, "periods-0-start": "01:30", "periods-0-end": "02:15",
        "periods-0-setpoint": "",
        "exceptions-TOTAL_FORMS": 0, "exceptions-INITIAL_FORMS": 0,
        "exceptions-MIN_NUM_FORMS": 0, "exceptions-MAX_NUM_FORMS": 1000,
    }  # fmt: skip
    with time_machine.travel(datetime(2026, 3, 1, 12, tzinfo=UTC)):
        response = c.post("/admin/control/schedule/add/", form, follow=True)
    assert response.status_code == 200
    assert SchedulePeriod.objects.filter(schedule__name="Early").count() == 1
    msgs = [str(m) for m in response.context["messages"]]
    assert f"Sunday 01:30–02:15: {WARNING}" in msgs, msgs
