"""manage.py simulate_fault_week: the week's faults found and ranked (the browser test drives the
page: tests/integration/test_fault_week_browser.py); bad options refused naming the option."""

from __future__ import annotations

import io
from datetime import UTC, datetime

import pytest
from django.core.management import CommandError, call_command

MONDAY = "2026-01-05"


def _run(*args: str) -> str:
    out = io.StringIO()
    call_command("simulate_fault_week", *args, stdout=out)
    return out.getvalue()


def test_the_week_ranks_the_short_cycling_boiler_first_and_a_second_run_is_refused(
    db, redis_client
):
    from findings.models import Finding

    out = _run("--start", MONDAY)
    assert "boiler_short_cycling in boiler from Tue 06:30" in out
    ranked = list(Finding.objects.filter(closed_at__isnull=True).values_list("rule", flat=True))
    assert ranked[:2] == ["boiler_short_cycling", "valve_passing"]
    assert "sensor_flatline" in ranked
    with pytest.raises(CommandError, match="there already"):
        _run("--start", MONDAY)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--start", "5 Jan"], "--start"),
        (["--start", "2999-01-01"], "--start"),
        (["--start", MONDAY, "--fault", "flood:hall@2026-01-05T00:00+00:00"], "--fault"),
        (["--start", MONDAY, "--fault", "window_open:workshop@2026-01-12T00:00+00:00"], "--fault"),
    ],
)
def test_a_bad_option_is_refused_naming_it(db, args, message):
    with pytest.raises(CommandError, match=message):
        _run(*args)


def test_at_most_twenty_faults_are_taken(db):
    fault = "window_open:workshop@2026-01-06T09:00+00:00"
    outside = "window_open:workshop@2026-01-12T09:00+00:00"
    with pytest.raises(CommandError, match="at most 20"):
        _run("--start", MONDAY, *["--fault", fault] * 21)
    # twenty pass the count (and are then judged one by one: the last is outside the week)
    with pytest.raises(CommandError, match="outside the week"):
        _run("--start", MONDAY, *["--fault", fault] * 19, "--fault", outside)


def test_the_default_week_is_the_seven_days_before_today():
    from demo.management.commands.simulate_fault_week import default_start

    assert default_start(datetime(2026, 1, 12, 15, 30, tzinfo=UTC)) == datetime(
        2026, 1, 5, tzinfo=UTC
    )


def test_an_engineer_can_change_the_brick_class_of_a_fault_week_actuator(
    db, redis_client, engineer_api, viewer_api
):
    """The week's valves, boiler and pump had a Modbus driver without a relay board host, so
    every edit was refused naming `host` (#30 outside tester): they are driven through the
    week's simulated node, a configuration an edit validates (docs/BRICK.md)."""
    from sensors.models import Actuator

    _run("--start", MONDAY)
    actuators = Actuator.objects.filter(site__slug="fault-week")
    assert actuators.count() == 6
    for actuator in actuators:
        actuator.full_clean()  # each one valid as it stands
    valve = actuators.get(name="Seminar room valve (fault week)")
    refused = viewer_api.patch(f"/api/v1/actuators/{valve.pk}", {"brick_class": "Radiator"})
    assert refused.status_code == 403
    response = engineer_api.patch(
        f"/api/v1/actuators/{valve.pk}", {"brick_class": "Radiator"}, format="json"
    )
    assert response.status_code == 200, response.json()
    valve.refresh_from_db()
    assert valve.brick_class == "Radiator"
