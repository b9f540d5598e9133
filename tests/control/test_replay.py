"""Replay over a recorded feed and bookings: switching times, heating hours, comfort misses,
short cycles; no relay is touched (there is none listening)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import CommandError, call_command

from control.models import ActuatorCommand, Booking
from control.replay import replay
from feeds import service as feed_service
from sensors.models import Actuator

from . import factories as f

pytestmark = pytest.mark.django_db

DAY = datetime(2026, 1, 14, tzinfo=UTC)  # GMT: local = UTC


@pytest.fixture
def hall(redis_client):
    valve = Actuator.objects.create(
        name="Hall valve", kind="valve", host="127.0.0.1", port=1, min_on_s=0, min_off_s=0
    )
    zone = f.zone("Hall", valve, heating_rate_min_per_k=20.0)
    Booking.objects.create(
        zone=zone, title="Yoga", start=DAY + timedelta(hours=10), end=DAY + timedelta(hours=12)
    )
    return zone


def record(zone, temps: dict[int, float]) -> None:
    """temps: minute of the day -> °C, held until the next entry, one point a minute."""
    points, value = [], None
    for minute in range(24 * 60):
        value = temps.get(minute, value)
        points.append(
            (
                zone.temperature_sensor.feed_id,
                int((DAY + timedelta(minutes=minute)).timestamp()),
                value,
            )
        )
    feed_service.log_points(points)


def test_a_cold_day_preheats_misses_comfort_and_reports_hours(hall):
    record(hall, {0: 15.0})
    report = replay(hall, DAY, DAY + timedelta(days=1), step_s=60)
    # 5 K short × 20 min/K = 100 min of pre-heat: on at 08:20, off when the booking ends.
    assert [(s.at.strftime("%H:%M"), s.state) for s in report.switches] == [
        ("08:20", True),
        ("12:00", False),
    ]
    assert "pre-heat 100 min at 3.0 °C/h" in report.switches[0].reason
    assert report.heating_hours == pytest.approx(3 + 40 / 60)
    assert report.occupancies == 1 and len(report.comfort_misses) == 1
    assert report.comfort_misses[0].temperature == 15.0
    assert report.rate_end > report.rate_start  # it learned the zone is slower
    assert ActuatorCommand.objects.count() == 0


def test_a_zone_that_warms_in_time_has_no_miss_and_a_chattering_one_short_cycles(hall):
    # Warms 1 K per 12 min from 08:20, then overshoots and cools around the setpoint.
    temps = {0: 15.0}
    for i in range(0, 61, 12):
        temps[8 * 60 + 20 + i] = 15.0 + i / 12
    temps.update({10 * 60 + 30: 20.5, 10 * 60 + 35: 19.5, 10 * 60 + 38: 20.5})
    record(hall, temps)
    report = replay(hall, DAY, DAY + timedelta(days=1), step_s=60)
    assert report.comfort_misses == []
    assert any(c.minutes < 10 for c in report.short_cycles)


def test_the_command_prints_a_report_and_json(hall, capsys):
    record(hall, {0: 15.0})
    call_command(
        "replay_strategy", "hall", "--from", "2026-01-14", "--to", "2026-01-14", "--step", "60"
    )
    out = capsys.readouterr().out
    assert "Replay of zone 'Hall'" in out and "no relay touched" in out
    assert "Heating hours: 3.67" in out and "comfort misses: 1" in out
    call_command("replay_strategy", "Hall", "--from", "2026-01-14", "--to", "2026-01-14", "--json")
    data = json.loads(capsys.readouterr().out)
    assert data["zone"] == "Hall" and len(data["switches"]) == 2


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["nowhere", "--from", "2026-01-14", "--to", "2026-01-15"],
            "No zone with slug or name 'nowhere'",
        ),
        (["hall", "--from", "14/01/2026", "--to", "2026-01-15"], "'14/01/2026' is not a date"),
        (["hall", "--from", "2026-01-15", "--to", "2026-01-14"], "must end after it starts"),
        (
            ["hall", "--from", "2026-01-14", "--to", "2026-01-15", "--step", "1"],
            "at least 10 seconds",
        ),
    ],
)
def test_bad_arguments_are_clear_errors(hall, args, message):
    with pytest.raises(CommandError, match=message):
        call_command("replay_strategy", *args)
