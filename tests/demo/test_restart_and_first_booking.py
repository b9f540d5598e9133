"""A demo restart carries on from the recorded temperatures (no cliffs in the kiosk charts), and
the demo's bookings start late enough for their rooms to be pre-heated."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest

from control.engine.strategies.optimum_start import preheat_minutes
from control.models import Booking
from demo import layout
from demo.plant import Coils, DemoPlant
from demo.site import (
    RESUME_MAX_AGE_S,
    ensure_demo_site,
    last_recorded_temperatures,
)
from feeds.store import service

WINTER_MORNING = datetime(2026, 1, 14, 8, 2, tzinfo=UTC)


@pytest.fixture
def demo(tmp_path, settings, redis_client):
    settings.BMS_DATA_DIR = tmp_path
    return ensure_demo_site(tmp_path / "demo" / "keys.json", now=WINTER_MORNING)


def _log(feed_pk: int, t: float, value: float) -> None:
    service.log_points([(feed_pk, int(t), value)])


@pytest.mark.django_db
def test_a_restarted_demo_resumes_the_last_recorded_temperatures(demo):
    now = WINTER_MORNING.timestamp()
    room = layout.ROOMS[0]
    room_feed = demo.zones[room.slug].temperature_sensor.feed
    _log(room_feed.pk, now - 60, 21.37)
    _log(demo.feeds_by_role["thermal_tank"].pk, now - 60, 52.5)
    stale = demo.zones[layout.ROOMS[1].slug].temperature_sensor.feed
    _log(stale.pk, now - RESUME_MAX_AGE_S - 60, 23.0)  # the demo was off too long: start afresh

    resume = last_recorded_temperatures(demo, now)
    assert resume == {f"room:{room.slug}": 21.37, "tank": 52.5}

    plant = DemoPlant(WINTER_MORNING, seed=1)
    assert plant.resume(resume) == [f"room:{room.slug}", "tank"]
    # The first values the simulator posts continue the chart where it stopped.
    values = plant.http_values()
    assert values[f"emonth-{room.slug}"]["temperature"] == 21.37
    assert values["emontx-solarthermal"]["tank"] == 52.5
    fresh = DemoPlant(WINTER_MORNING, seed=1)
    assert values[f"emonth-{layout.ROOMS[1].slug}"]["temperature"] == round(
        fresh.rooms[layout.ROOMS[1].slug].temperature_c, 2
    )


def test_resume_ignores_values_no_room_could_have():
    plant = DemoPlant(WINTER_MORNING, seed=1)
    before = plant.rooms["workshop"].temperature_c
    assert plant.resume({"room:workshop": 500.0, "room:nowhere": 20.0, "pressure": 1.0}) == []
    assert plant.rooms["workshop"].temperature_c == before


@pytest.mark.django_db
def test_every_demo_booking_can_be_preheated_before_it_starts(demo):
    """Step the simulated plant: rooms coast until optimum start's planned pre-heat begins, then
    boiler, pump and the room's valve run; each room is warm when its booking starts."""
    bookings = Booking.objects.filter(booked_by=layout.BOOKED_BY).select_related("zone")
    assert bookings.count() == len(layout.BOOKINGS)
    for booking in bookings:
        zone = booking.zone
        plant = DemoPlant(WINTER_MORNING, seed=3)
        room = plant.rooms[zone.slug]
        t = WINTER_MORNING
        heating_from = None
        while t < booking.start:
            if heating_from is None:
                lead = preheat_minutes(
                    room.temperature_c,
                    zone.comfort_setpoint,
                    zone.heating_rate_min_per_k,
                    zone.max_preheat_min,
                )
                if t >= booking.start - timedelta(minutes=lead):
                    heating_from = t
            on = heating_from is not None
            coils = Coils(boiler=on, heating_pump=on, valves={zone.slug: on})
            t += timedelta(seconds=60)
            plant.step(t, 60.0, 1.0, coils)
        assert heating_from is not None, booking.title
        assert room.temperature_c >= zone.comfort_setpoint - 0.5, (booking.title, room)


@pytest.mark.django_db
def test_a_warm_room_keeps_its_short_booking_lead(tmp_path, settings, redis_client):
    """A room recorded at its setpoint needs no pre-heat: the layout's offset stands."""
    settings.BMS_DATA_DIR = tmp_path
    demo = ensure_demo_site(tmp_path / "demo" / "keys.json", now=WINTER_MORNING - timedelta(days=1))
    first = layout.BOOKINGS[0]
    feed = demo.zones[first[0]].temperature_sensor.feed
    _log(feed.pk, WINTER_MORNING.timestamp() - 30, 20.5)
    Booking.objects.all().delete()
    ensure_demo_site(tmp_path / "demo" / "keys.json", now=WINTER_MORNING)
    booking = Booking.objects.get(zone__slug=first[0], title=first[1])
    minutes = (booking.start - WINTER_MORNING).total_seconds() / 60
    assert math.isclose(minutes, 3 + first[2]), minutes  # 08:02 rounds up to 08:05
