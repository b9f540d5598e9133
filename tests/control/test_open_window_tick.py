"""Open-window detection through the live tick: a real pymodbus relay board, real Redis and the
test database, on a clock the test moves (time-machine). The relay's coil and the audit rows
show the sequence and its reasons; the status page's data shows the window."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone

from control.drivers.simulated_board import RelayBoard
from control.engine.specs import OPEN_WINDOW
from control.models import ActuatorCommand, Booking, HeatingPlant, WindowDetection
from control.runner import run_tick
from control.schematic import plant_schematic
from control.status import zone_status
from feeds.store import service as feed_service
from sensors.models import Sensor

from . import factories as f

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def feeds_of_this_test(settings, tmp_path):
    # Readings logged ahead of the real clock (on the test's clock) must not outlive the test:
    # a later test's feed with the same id would read them as its latest.
    settings.BMS_DATA_DIR = tmp_path


@pytest.fixture
def board():
    with RelayBoard(coils=8) as b:
        yield b


def _hall(board):
    valve = f.relay("Hall valve", board, coil=2)
    zone = f.zone("Hall", valve, optimum_start=False)
    now = timezone.now()
    Booking.objects.create(
        zone=zone, title="Open day", start=now - timedelta(hours=1), end=now + timedelta(hours=8)
    )
    return valve, zone


def _audit(valve) -> list[tuple[bool, str, str]]:
    """The valve's switching as audited (a keep-alive rewrite of the same state left out)."""
    rows = ActuatorCommand.objects.filter(actuator=valve).exclude(reason__startswith="Keep-alive")
    return [(c.state, c.strategy, c.reason) for c in rows.order_by("requested_at", "pk")]


def test_a_drop_while_heating_closes_the_valve_for_the_pause_and_it_reopens(redis_client, board):
    valve, zone = _hall(board)
    WindowDetection.objects.create(zone=zone)  # the defaults: 0.5 K in 5 min, 30 min pause
    boiler = f.relay("Boiler", board, coil=0, kind="boiler")
    plant = HeatingPlant.objects.create(name="Boiler house", boiler=boiler, has_bypass=True)
    plant.zones.set([zone])
    t0 = timezone.now().replace(microsecond=0)
    with time_machine.travel(t0) as clock:

        def tick_at(seconds: int, temp: float) -> None:
            at = t0 + timedelta(seconds=seconds)
            clock.move_to(at)
            f.set_temperature(zone, temp, at.timestamp() - 5)
            run_tick(now=at)

        tick_at(0, 18.5)
        assert board.coil(2) is True
        # A drop is judged once the zone has heated for a whole look-back (5 min).
        tick_at(240, 18.5)
        tick_at(330, 18.4)
        tick_at(360, 18.2)
        assert board.coil(2) is True  # 0.3 K: not yet
        tick_at(390, 17.9)  # 0.6 K in 150 s: a window
        assert board.coil(2) is False
        [row] = zone_status([zone])
        assert row["mode"] == OPEN_WINDOW
        assert row["flag_labels"] == ["window open: heating paused"]
        assert row["fault"] is False
        # The plant's schematic draws the zone paused (not faulty), with the reason.
        [drawn] = [e for e in plant_schematic(plant)["elements"] if e["key"] == f"zone-{zone.pk}"]
        assert drawn["mode"] == OPEN_WINDOW and drawn["css"] == "off"
        assert drawn["flags"] == ["window open: heating paused"]
        assert drawn["why"].startswith("Window open: temperature fell 0.6 K")
        assert board.coil(0) is False  # the boiler: no zone calls for heat
        tick_at(390 + 29 * 60 + 30, 17.0)
        assert board.coil(2) is False  # 30 s before the pause ends
        tick_at(390 + 30 * 60, 16.9)
        assert board.coil(2) is True
    [on, off, again] = _audit(valve)
    until = timezone.localtime(t0 + timedelta(seconds=390 + 1800))
    assert on[:2] == (True, "booking")
    assert off[:2] == (False, OPEN_WINDOW)
    assert off[2].startswith("Window open: temperature fell 0.6 K in 2 min (18.5 → 17.9 °C")
    assert f"heating off until {until:%H:%M} (30 min), then resumes" in off[2]
    assert again[:2] == (True, "booking")
    assert again[2].endswith(f"(open-window pause ended {until:%H:%M}: heating resumes)")


def test_a_window_contact_closes_the_valve_while_open(redis_client, board):
    valve, zone = _hall(board)
    contact = Sensor.objects.create(
        node=zone.temperature_sensor.node,
        key="hall-window",
        kind="generic",
        feed=f.Feed.objects.create(name="Hall window", tag="test", unit="", interval=10),
    )
    WindowDetection.objects.create(zone=zone, contact_sensor=contact, detect_drop=False)
    t0 = timezone.now().replace(microsecond=0)
    with time_machine.travel(t0) as clock:

        def tick_at(seconds: int, window: float) -> None:
            at = t0 + timedelta(seconds=seconds)
            clock.move_to(at)
            f.set_temperature(zone, 18.0, at.timestamp() - 5)
            feed_service.log_points([(contact.feed_id, int(at.timestamp()) - 5, window)])
            run_tick(now=at)

        tick_at(0, 0.0)
        assert board.coil(2) is True
        tick_at(30, 1.0)
        assert board.coil(2) is False
        tick_at(600, 1.0)
        assert board.coil(2) is False
        tick_at(630, 0.0)
        assert board.coil(2) is True
    [on, off, again] = _audit(valve)
    opened = timezone.localtime(t0 + timedelta(seconds=30))
    assert off[:2] == (False, OPEN_WINDOW)
    assert off[2].startswith(
        f"Window open: contact '{contact}' open since {opened:%H:%M} — heating off while it is open"
    )
    assert again[2].endswith("(window contact closed: heating resumes)")
