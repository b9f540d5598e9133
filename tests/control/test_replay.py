"""Replay over a recorded feed and bookings: switching times, heating hours, comfort misses,
short cycles; no relay is touched (there is none listening)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import CommandError, call_command

from control.models import ActuatorCommand, Booking
from control.replay import replay
from feeds.store import service as feed_service
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
    # The replay's own pre-heat heated nothing (no relay): nothing to learn from.
    assert report.rate_end == report.rate_start
    assert report.learned_from.startswith("nothing")
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


def test_a_coarse_step_does_not_invent_a_stale_sensor(redis_client):
    """A year's replay steps 1,920 s; with a feed whose slots do not divide the
    step (45 s) the windows drifted off the steps and a healthy sensor read 'stale'."""
    from feeds.models import Feed

    valve = Actuator.objects.create(
        name="Hall valve", kind="valve", host="127.0.0.1", port=1, min_on_s=0, min_off_s=0
    )
    zone = f.zone("Hall", valve)
    Feed.objects.filter(pk=zone.temperature_sensor.feed_id).update(interval=45)
    zone.temperature_sensor.feed.refresh_from_db()
    start = DAY
    feed_id = zone.temperature_sensor.feed_id
    feed_service.log_points(
        [(feed_id, int(start.timestamp()) + 45 * i, 19.0) for i in range(2 * 86400 // 45)]
    )
    report = replay(zone, start, start + timedelta(days=2), step_s=1920)
    assert report.samples == 90 and report.missing_samples == 0
    assert not [s for s in report.switches if "stale" in s.reason]
    # A real gap of two hours is still a stale sensor.
    gap = [
        (feed_id, int(start.timestamp()) + 45 * i, 19.0)
        for i in range(2 * 86400 // 45)
        if not 36_000 <= 45 * i < 43_200
    ]
    Feed.objects.filter(pk=feed_id).delete()
    zone.temperature_sensor.feed = Feed.objects.create(name="t2", tag="test", interval=45)
    zone.temperature_sensor.save()
    feed_service.log_points([(zone.temperature_sensor.feed_id, t, v) for _, t, v in gap])
    Booking.objects.create(
        zone=zone, title="Late", start=DAY + timedelta(hours=10), end=DAY + timedelta(hours=12)
    )
    report = replay(zone, start, start + timedelta(days=2), step_s=1920)
    assert report.missing_samples >= 2
    assert any("stale" in s.reason for s in report.switches)


def test_the_replay_stops_at_now_and_future_bookings_are_not_misses(hall):
    record(hall, {0: 21.0})
    now = DAY + timedelta(hours=13)
    Booking.objects.create(
        zone=hall, title="Tomorrow", start=DAY + timedelta(hours=34), end=DAY + timedelta(hours=36)
    )
    report = replay(hall, DAY, DAY + timedelta(days=3), step_s=60, now=now)
    assert report.end == now and report.samples == 13 * 60
    assert report.occupancies == 1 and report.comfort_misses == []  # Yoga at 10:00, warm
    with pytest.raises(ValueError, match="must start in the past"):
        replay(hall, now, now + timedelta(days=1), now=now)
