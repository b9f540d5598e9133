"""Issue #27 A3: a relay board's watchdog register is read back every tick, against a real
pymodbus board (control/drivers/simulated_board.py) restarted on its port or reset behind the
system's back. It used to be written at start and every `rewrite_s` only: after a reboot it
read 0 for minutes while the status said "written 4 min ago"."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from alarms.models import Alarm
from control import outputs
from control.drivers.simulated_board import RelayBoard as Board
from control.models import RelayBoard
from control.runner import run_tick

from . import factories as f

pytestmark = pytest.mark.django_db


@pytest.fixture
def board():
    with Board(coils=16) as b:
        yield b


@pytest.fixture
def plant_room(board):
    valve = f.relay("Hall valve", board, coil=1)
    f.zone("Hall", valve, temp=20.0)  # satisfied: the valve stays OFF, as after a reboot
    return RelayBoard.objects.create(
        name="Plant room", host=board.host, port=board.port, watchdog_register=4,
        watchdog_value=60, rewrite_s=300,
    )  # fmt: skip


def status(wd: RelayBoard) -> dict:
    return outputs.watchdog_status([wd.pk])[wd.pk]


def test_a_rebooted_board_gets_its_watchdog_back_on_the_next_tick(redis_client, board, plant_room):
    t0 = timezone.now()
    run_tick(t0)
    assert board.register(4) == 60
    board.stop()
    board.start()  # rebooted between ticks: relays OFF (as wanted) and the watchdog 0
    assert board.register(4) == 0 and board.coil(1) is False
    later = t0 + timedelta(seconds=30)
    run_tick(later)
    assert board.register(4) == 60
    s = status(plant_room)
    assert s["ok"] and s["written_at"] == later.timestamp()
    assert (s["read_value"], s["read_at"], s["found"]) == (60, later.timestamp(), 0)
    assert s["rewrite_reason"] == "read 0, not 60 (the board reset it)"


def test_a_register_reset_behind_our_back_is_rewritten_and_a_steady_one_only_read(
    redis_client, board, plant_room
):
    t0 = timezone.now()
    run_tick(t0)
    written = status(plant_room)["written_at"]
    run_tick(t0 + timedelta(seconds=30))
    s = status(plant_room)
    assert s["written_at"] == written  # read back 60: nothing to write
    assert s["read_at"] == (t0 + timedelta(seconds=30)).timestamp() and s["read_value"] == 60
    board.set_register(4, 7)
    run_tick(t0 + timedelta(seconds=60))
    assert board.register(4) == 60
    assert status(plant_room)["rewrite_reason"] == "read 7, not 60 (the board reset it)"


def test_a_board_that_was_away_is_rewritten_when_it_answers_again(
    redis_client, board, plant_room, settings
):
    settings.BMS_CONTROL_DEVICE_DEADLINE = 1.0
    t0 = timezone.now()
    run_tick(t0)
    board.stop()
    run_tick(t0 + timedelta(seconds=30))
    s = status(plant_room)
    assert not s["ok"] and s["error"] and s["read_at"] == t0.timestamp()  # last good read
    assert Alarm.objects.filter(key=f"relay-watchdog:{plant_room.pk}", cleared_at__isnull=True)
    board.start()
    board.set_register(4, 60)  # even if it kept its value: a reconnect is a rewrite
    back = t0 + timedelta(seconds=60)
    run_tick(back)
    s = status(plant_room)
    assert s["ok"] and s["written_at"] == back.timestamp()
    assert s["rewrite_reason"] == "after a failed read or write (reconnected)"
    assert not Alarm.objects.filter(key=f"relay-watchdog:{plant_room.pk}", cleared_at__isnull=True)


def test_the_status_page_says_what_was_read_and_when(viewer, redis_client, board, plant_room):
    now = timezone.now()
    run_tick(now)
    board.set_register(4, 0)
    run_tick(now + timedelta(seconds=30))
    client = Client()
    client.force_login(viewer)
    page = client.get("/staff/control/").content.decode()
    row = page[page.index(f'id="board-{plant_room.pk}"') :]
    row = row[: row.index("</tr>")]
    at = timezone.localtime(now + timedelta(seconds=30)).strftime("%H:%M:%S")
    assert f"60 written to register 4; read back 60 at {at}" in row
    assert "last rewritten: read 0, not 60 (the board reset it)" in row
