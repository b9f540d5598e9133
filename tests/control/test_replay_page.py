"""The replay page: "Step" says its unit, and a replay "to today" stops at now and says
so, judging no booking that has not happened yet."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from control.models import Booking

from . import factories as f

pytestmark = pytest.mark.django_db


def test_a_replay_to_today_stops_at_now_and_judges_no_later_booking(engineer, redis_client):
    hall = f.zone("Hall")
    now = timezone.now()
    for minutes in range(0, 180, 1):  # a cold room all along: any booking judged is a miss
        f.set_temperature(hall, 12.0, t=(now - timedelta(minutes=minutes)).timestamp())
    later = now + timedelta(hours=2)
    Booking.objects.create(zone=hall, title="Tonight", start=later, end=later + timedelta(hours=1))
    today = timezone.localdate()
    client = Client()
    client.force_login(engineer)
    html = client.get(
        "/staff/control/replay/hall/", {"start": str(today - timedelta(days=1)), "end": str(today)}
    ).content.decode()
    assert '<label for="id_step">Step (seconds):</label>' in html
    assert "(now: there is no history after, so later bookings are not judged)" in html
    assert 'id="comfort-misses">0<' in html
    assert "Tonight" not in html


def test_a_replay_of_a_past_day_runs_to_its_end(engineer, redis_client):
    f.zone("Hall")
    client = Client()
    client.force_login(engineer)
    day = timezone.localdate() - timedelta(days=3)
    html = client.get(
        "/staff/control/replay/hall/", {"start": str(day), "end": str(day), "step": "600"}
    ).content.decode()
    assert 'id="replayed-range"' in html and "there is no history after" not in html


@pytest.mark.parametrize("role", ["viewer", "booker"])
def test_only_engineers_may_run_a_replay(role, request, redis_client):
    """Viewers could run replays (seconds of a worker each); CONTROL.md says engineers do."""
    f.zone("Hall")
    client = Client()
    client.force_login(request.getfixturevalue(role))
    day = str(timezone.localdate() - timedelta(days=1))
    for params in ({}, {"start": day, "end": day, "step": "600"}):
        response = client.get("/staff/control/replay/hall/", params)
        assert response.status_code == 403, (role, params)
        assert b'id="replayed-range"' not in response.content


def test_an_engineer_may_run_a_replay(engineer, redis_client):
    f.zone("Hall")
    client = Client()
    client.force_login(engineer)
    day = str(timezone.localdate() - timedelta(days=1))
    response = client.get("/staff/control/replay/hall/", {"start": day, "end": day, "step": "600"})
    assert response.status_code == 200
    assert b'id="replayed-range"' in response.content
