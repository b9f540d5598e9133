"""Open-window detection replays over recorded history (control/replay.py): the same
evaluator, its memory carried from step to step, finds a drop in the recorded room while the
replayed strategy heats, and the report lists the pause and the resume with their reasons."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from control.models import Booking, WindowDetection
from control.replay import replay
from feeds.store import service as feed_service
from sensors.models import Actuator

from . import factories as f

pytestmark = pytest.mark.django_db

DAY = datetime(2026, 1, 14, tzinfo=UTC)  # GMT: local = UTC


@pytest.fixture(autouse=True)
def feeds_of_this_test(settings, tmp_path):
    settings.BMS_DATA_DIR = tmp_path


def test_a_recorded_drop_while_heating_replays_as_a_pause_and_a_resume(redis_client):
    valve = Actuator.objects.create(
        name="Hall valve", kind="valve", host="127.0.0.1", port=1, min_on_s=0, min_off_s=0
    )
    zone = f.zone("Hall", valve, optimum_start=False)
    WindowDetection.objects.create(zone=zone)
    Booking.objects.create(
        zone=zone, title="Yoga", start=DAY + timedelta(hours=10), end=DAY + timedelta(hours=12)
    )
    # Warming slowly under the booking from 10:00 (17.78 °C at 10:39), then the window.
    temps = {m: 17.0 + 0.02 * (m - 600) for m in range(600, 640)}
    temps |= {640: 17.4, 641: 17.0, 642: 16.6, 643: 16.2}
    temps |= {m: 16.2 + 0.02 * (m - 643) for m in range(644, 720)}
    sensor_feed = zone.temperature_sensor.feed_id
    feed_service.log_points(
        [(sensor_feed, int((DAY + timedelta(minutes=m)).timestamp()), v) for m, v in temps.items()]
    )
    report = replay(
        zone,
        DAY + timedelta(hours=10),
        DAY + timedelta(hours=12),
        step_s=60,
        now=DAY + timedelta(days=1),
    )
    assert [(s.at.strftime("%H:%M"), s.state) for s in report.switches] == [
        ("10:00", True),
        ("10:41", False),
        ("11:11", True),
    ]
    assert report.switches[1].reason.startswith(
        "Window open: temperature fell 0.8 K in 2 min (17.8 → 17.0 °C"
    )
    assert report.switches[2].reason.endswith("(open-window pause ended 11:11: heating resumes)")
