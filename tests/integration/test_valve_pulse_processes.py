"""A three-point valve's pulse outlives the tick that started it, and the next tick may run in
another process (a control worker with more than one child, or the other control host). The
pulse is recorded in Redis, so whichever process ticks next waits for its end before it
touches a relay, and a pulse whose process died is found by its deadline, alarmed and its
relay written OFF. The board process's own log of writes is the proof.

Each tick here runs in a real process of its own (`python -c`, the site's settings, the test
database and Redis), as a second control worker would."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from alarms.models import Alarm
from control.drivers import three_point
from control.models import ActuatorCommand
from control.runner import run_tick
from core.redis import get_redis
from tests.conftest import test_database_url
from tests.integration.test_weather_worker import ROOT, BoardProcess, set_value, three_point_plant
from tests.processes import stop_process
from tests.wait import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

# One control tick in this process's own Python; with argv[1] "stay" it then stays alive until
# its stdin closes or it is killed (so a pulse it started runs on, as in a worker that goes on
# serving). Either way the interpreter's exit waits for a pulse in flight to end.
_TICK = """
import json, sys
import django
django.setup()
from control.runner import run_tick
print(json.dumps(run_tick()), flush=True)
if sys.argv[1] == "stay":
    sys.stdin.read()
"""


@pytest.fixture
def board(tmp_path):
    b = BoardProcess(tmp_path / "writes.jsonl")
    yield b
    stop_process(b.proc, timeout_s=5)


def tick_elsewhere(stay: bool = False) -> subprocess.Popen:
    env = dict(
        os.environ, DATABASE_URL=test_database_url(), DJANGO_SETTINGS_MODULE="bms.settings_test"
    )
    return subprocess.Popen(
        [sys.executable, "-c", _TICK, "stay" if stay else "go"],
        cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
    )  # fmt: skip


def pulses_on_the_board(board: BoardProcess, coil: int) -> tuple[list[float], bool]:
    """The lengths of the coil's ON spells in the board's log, and whether it is ON at the end."""
    on_since, spells, on = 0.0, [], False
    for w in board.writes():
        if w["fc"] not in (5, 15):
            continue
        for i, v in enumerate(w["values"]):
            if w["address"] + i != coil:
                continue
            if v and not on:
                on_since = w["t"]
            if not v and on:
                spells.append(w["t"] - on_since)
            on = bool(v)
    return spells, on


def open_relay_on(board: BoardProcess) -> bool:
    return any(w["address"] == 2 and w["values"] == [1] for w in board.writes())


def test_a_tick_in_another_process_waits_for_the_pulse_to_end(redis_client, board):
    _plant, flow, opener = three_point_plant(board)
    assert run_tick()["pulses"] == 1  # 65 % from 0 %: an open pulse of 6.5 s, in this process
    wait_for(lambda: open_relay_on(board), 10, "the open relay switched on")
    set_value(flow, 80.0)  # far too hot: the next tick wants the valve closed
    other = tick_elsewhere()
    out, _ = other.communicate(timeout=60)
    assert other.returncode == 0
    assert json.loads(out.splitlines()[-1])["faults"] == 0
    spells, on = pulses_on_the_board(board, coil=2)
    # The other process did not cut the pulse short: it waited for this process's thread.
    assert len(spells) == 1 and spells[0] == pytest.approx(6.5, abs=0.5) and not on
    row = ActuatorCommand.objects.get(actuator=opener, state=True)
    assert row.confirmed_at is not None and row.error == ""  # collected by the other process
    # Not reported again here: what is left is the other process's close pulse (its process
    # ran it to its end before exiting), for whichever process ticks next.
    assert [r.target.coil for r in three_point.collect(wait_s=0)] == [3]


def test_a_pulse_whose_process_died_is_alarmed_and_its_relay_written_off(redis_client, board):
    plant, _flow, opener = three_point_plant(board)
    other = tick_elsewhere(stay=True)
    try:
        wait_for(lambda: open_relay_on(board), 20, "the open relay switched on")
        other.send_signal(signal.SIGKILL)  # dies with the relay ON
        other.wait(timeout=10)
    finally:
        stop_process(other, timeout_s=5)
    assert pulses_on_the_board(board, coil=2) == ([], True)
    assert three_point.in_flight() == {plant.pk}
    # Its deadline passes (moved into the past, as time would).
    record = json.loads(get_redis().hget(three_point.PULSES_KEY, str(plant.pk)))
    record["deadline"] = 0
    get_redis().hset(three_point.PULSES_KEY, str(plant.pk), json.dumps(record))

    report = run_tick()
    assert report["faults"] >= 1
    spells, on = pulses_on_the_board(board, coil=2)
    assert len(spells) == 1 and not on  # this tick wrote the relay OFF
    alarm = Alarm.objects.get(key=f"plant-output:{plant.pk}", cleared_at__isnull=True)
    assert "never reported" in alarm.message
    row = ActuatorCommand.objects.filter(actuator=opener, state=True).earliest("requested_at")
    assert row.confirmed_at is None and "never reported" in row.error
