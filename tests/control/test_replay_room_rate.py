"""Replay learns the optimum-start rate from the room (its rise under heat actually applied in
the relay log), not from the controller that was running (issue 27, item 6)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import call_command

from control.models import ActuatorCommand, Booking
from control.replay import replay
from feeds.store import service as feed_service
from sensors.models import Actuator

from . import factories as f

pytestmark = pytest.mark.django_db

MONDAY = datetime(2026, 1, 12, tzinfo=UTC)  # GMT: local = UTC
TRUE_RATE = 20.0  # min/K: the room rises 3 K/h under heat
# The old controller started the heat at varying times: too early, late, right, very late.
OLD_STARTS = [(6, 0), (8, 0), (7, 20), (8, 30)]


def _history(zone, valve) -> None:
    """Four days: 15 °C at night, heat from the old controller's start rising 1 K per 20 min to
    20 °C, held until the booking ends at 12:00; a confirmed ON and an OFF in the relay log."""
    points = []
    for day, (h, m) in enumerate(OLD_STARTS):
        base = MONDAY + timedelta(days=day)
        on = base + timedelta(hours=h, minutes=m)
        off = base + timedelta(hours=12)
        for minute in range(24 * 60):
            t = base + timedelta(minutes=minute)
            if on <= t < off:
                temp = min(20.0, 15.0 + (t - on).total_seconds() / 60 / TRUE_RATE)
            elif off <= t < off + timedelta(hours=1):
                temp = 20.0 - (t - off).total_seconds() / 60 / 12  # cools back to 15 °C
            else:
                temp = 15.0
            points.append((zone.temperature_sensor.feed_id, int(t.timestamp()), temp))
        ActuatorCommand.objects.create(
            actuator=valve, state=True, reason="old BMS", requested_at=on, confirmed_at=on
        )
        ActuatorCommand.objects.create(
            actuator=valve, state=False, reason="old BMS", requested_at=off, confirmed_at=off
        )
        Booking.objects.create(
            zone=zone, title=f"Class {day}", start=base + timedelta(hours=9), end=off
        )
    feed_service.log_points(points)


@pytest.fixture
def studio(redis_client):
    valve = Actuator.objects.create(
        name="Studio valve", kind="valve", host="127.0.0.1", port=1, min_on_s=0, min_off_s=0
    )
    zone = f.zone("Studio", valve, heating_rate_min_per_k=30.0, comfort_setpoint=20.0)
    _history(zone, valve)
    return zone


def test_the_rate_is_the_rooms_and_mornings_are_not_misses(studio):
    report = replay(studio, MONDAY, MONDAY + timedelta(days=4), step_s=60)
    assert report.rate_start == 30.0
    assert report.rate_end == pytest.approx(TRUE_RATE, abs=1.0)
    assert report.heat_runs == 4
    assert report.learned_from.startswith("the room: 4 run(s) of heat applied")
    assert report.occupancies == 4
    assert report.comfort_misses == []
    # Monday's recording is warm before the replay would start; from Tuesday on the replay
    # pre-heats 5 K × 20 min (the room's rate, learned from Monday): on at 07:20 every morning.
    ons = [s.at for s in report.switches if s.state]
    assert [t.strftime("%a %H:%M") for t in ons] == ["Tue 07:20", "Wed 07:20", "Thu 07:20"]


def test_the_report_says_what_it_learned_from(studio, capsys):
    call_command(
        "replay_strategy", "studio", "--from", "2026-01-12", "--to", "2026-01-15", "--step", "60"
    )
    out = capsys.readouterr().out
    assert "30.0 → 20.0 min/K (learned from the room: 4 run(s)" in out
    assert "comfort misses: 0" in out


def test_without_heat_in_the_relay_log_the_stored_rate_is_kept(studio):
    """A preheat the replay only imagined heated nothing: it is not a measurement."""
    ActuatorCommand.objects.all().delete()
    report = replay(studio, MONDAY, MONDAY + timedelta(days=4), step_s=60)
    assert report.rate_end == report.rate_start == 30.0
    assert report.learned_from.startswith("nothing: no heat applied")


def test_an_on_never_confirmed_is_not_heat(studio):
    """A refused coil applied no heat: its ON does not make a run."""
    ActuatorCommand.objects.filter(state=True).update(confirmed_at=None)
    report = replay(studio, MONDAY, MONDAY + timedelta(days=4), step_s=60)
    assert report.heat_runs == 0
