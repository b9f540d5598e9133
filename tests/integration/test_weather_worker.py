"""Weather compensation and relay board watchdogs in a real Celery worker, against a Modbus
TCP board in its own process that logs every write (tests/control/board_process.py): the
board's log, not our own records, shows what the system did."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pymodbus.client import ModbusTcpClient

from alarms.models import Alarm
from control import outputs
from control.drivers.simulated_board import free_port
from control.models import AnalogueCommand, HeatingPlant, RelayBoard, WeatherCompensation
from feeds.store import service as feed_service
from tests.control import factories as f
from tests.integration.test_control_worker import tick
from tests.processes import stop_process
from tests.wait import wait_for

pytestmark = [pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]


class BoardProcess:
    def __init__(
        self, log: Path, refuse_register: int | None = None, port: int | None = None
    ) -> None:
        self.host, self.port, self.log = "127.0.0.1", port or free_port(), log
        cmd = [sys.executable, "-m", "tests.control.board_process", "--port", str(self.port)]
        cmd += ["--log", str(log)]
        if refuse_register is not None:
            cmd += ["--refuse-register", str(refuse_register)]
        self.proc = subprocess.Popen(cmd, cwd=ROOT)
        wait_for(lambda: self._client().connect(), 10, "the board process to start")

    def _client(self) -> ModbusTcpClient:
        return ModbusTcpClient(self.host, port=self.port, timeout=1)

    def register(self, address: int) -> int:
        c = self._client()
        c.connect()
        try:
            return c.read_holding_registers(address, count=1, device_id=1).registers[0]
        finally:
            c.close()

    def writes(self) -> list[dict]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines() if line]


@pytest.fixture
def worker(transactional_db, celery_worker, redis_client):
    return celery_worker


@pytest.fixture
def board(tmp_path):
    b = BoardProcess(tmp_path / "writes.jsonl", refuse_register=11)
    yield b
    stop_process(b.proc, timeout_s=5)


def set_value(sensor, value: float) -> None:
    feed_service.log_points([(sensor.feed_id, int(time.time()), value)])


def mixing_plant(board, **weather) -> tuple[HeatingPlant, object]:
    """A plant whose zone calls for heat at 20 °C, 0 °C outside, 40 °C flow: the curve
    (slope 1.5) asks 50 °C and the first PI step (Kp 5, Ti 100 s, 30 s) gives 65 %."""
    boiler = f.relay("Boiler", board, coil=0, kind="boiler")
    valve = f.relay("Hall valve", board, coil=1)
    zone = f.zone("Hall", valve, temp=15.0, setback_setpoint=20.0)
    outside, flow = f.temperature_sensor("outside"), f.temperature_sensor("flow")
    set_value(outside, 0.0)
    set_value(flow, 40.0)
    plant = HeatingPlant.objects.create(
        name="Boiler house",
        boiler=boiler,
        outside_sensor=outside,
        flow_sensor=flow,
        frost_outside_c=-5.0,
        has_bypass=True,
    )
    plant.zones.add(zone)
    wc = WeatherCompensation(plant=plant, kp=5.0, ti_s=100.0, **weather)
    wc.full_clean()
    wc.save()
    return plant, flow


def test_the_holding_register_gets_the_computed_valve_position(worker, board):
    plant, _flow = mixing_plant(
        board, output="register", register_host=board.host, register_port=board.port,
        register_address=5, raw_min=0, raw_max=10000,
    )  # fmt: skip
    report = tick()
    assert report["outputs"] == 1
    assert board.register(5) == 6500
    # The board's own log: one register write of the raw counts.
    assert [w["values"] for w in board.writes() if w["fc"] == 6 and w["address"] == 5] == [[6500]]
    row = AnalogueCommand.objects.get(plant=plant)
    assert (row.value, row.unit, row.raw) == (65.0, "%", 6500)
    assert row.confirmed_at is not None and row.error == ""
    assert "flow 50.0 °C" in row.reason and "→ valve 65 %" in row.reason


def three_point_plant(board) -> tuple[HeatingPlant, object, object]:
    """mixing_plant with a three-point valve on coils 2 (open) and 3 (close), a 10 s stroke:
    (plant, flow sensor, open relay)."""
    opener = f.relay("Mix open", board, coil=2, kind="relay")
    closer = f.relay("Mix close", board, coil=3, kind="relay")
    plant, flow = mixing_plant(
        board, output="three_point", open_actuator=opener, close_actuator=closer,
        run_time_s=10.0, min_pulse_s=0.5,
    )  # fmt: skip
    return plant, flow, opener


def test_a_three_point_valve_never_energises_both_relays(worker, board):
    _plant, flow, _opener = three_point_plant(board)
    tick()  # 65 % from 0 %: an open pulse of 6.5 s (the 10 s stroke)
    wait_for(
        lambda: any(w["address"] == 2 and w["values"] == [1] for w in board.writes()),
        10,
        "the open relay switched on",
    )
    set_value(flow, 80.0)  # far too hot: the PI output falls to 0 %, so the valve closes
    tick(timeout_s=30)  # waits for the open pulse to end, then starts closing
    wait_for(
        lambda: any(w["address"] == 3 and w["values"] == [1] for w in board.writes()),
        15,
        "the close relay switched on",
    )
    tick(timeout_s=30)  # collects the close pulse
    state = {2: False, 3: False}
    on_since: dict[int, float] = {}
    pulses: dict[int, list[float]] = {2: [], 3: []}
    for w in board.writes():
        if w["fc"] not in (5, 15):
            continue
        for i, v in enumerate(w["values"]):
            coil = w["address"] + i
            if coil in state:
                if v and not state[coil]:
                    on_since[coil] = w["t"]
                if not v and state[coil]:
                    pulses[coil].append(w["t"] - on_since[coil])
                state[coil] = bool(v)
        assert not (state[2] and state[3]), f"both relays on after {w}"
    assert pulses[2] and pulses[2][0] == pytest.approx(6.5, abs=0.5)
    assert pulses[3], "the valve was never closed"
    assert state == {2: False, 3: False}


def test_the_watchdog_register_is_written_and_a_refusal_alarms(worker, board):
    f.relay("Hall valve", board, coil=1)
    good = RelayBoard.objects.create(
        name="Plant room", host=board.host, port=board.port, watchdog_register=10,
        watchdog_value=30,
    )  # fmt: skip
    # The same board at another unit id, whose watchdog register it refuses.
    bad = RelayBoard.objects.create(
        name="Refusing", host=board.host, port=board.port, device_id=2, watchdog_register=11,
        watchdog_value=30,
    )  # fmt: skip
    tick()
    assert board.register(10) == 30
    status = outputs.watchdog_status([good.pk, bad.pk])
    assert status[good.pk]["ok"] is True and status[bad.pk]["ok"] is False
    alarm = Alarm.objects.get(key=f"relay-watchdog:{bad.pk}", cleared_at__isnull=True)
    assert "refused" in alarm.message and "illegal data value (exception 3)" in alarm.message
    before = len(board.writes())
    tick()  # not due again: written at start, then every rewrite_s
    assert [w for w in board.writes()[before:] if w["address"] == 10 and w["fc"] == 6] == []


def test_a_board_process_restarted_on_its_port_gets_its_watchdog_back(worker, board, tmp_path):
    """Issue #27 A3: the board process is killed and started again on its port (a reboot: every
    register 0, relays OFF as wanted, so no relay is re-asserted). The next tick reads the
    watchdog back as 0 and writes it again, and the board's own log shows that write."""
    valve = f.relay("Hall valve", board, coil=1)
    f.zone("Hall", valve, temp=20.0)  # satisfied: the valve stays OFF
    wd = RelayBoard.objects.create(
        name="Plant room", host=board.host, port=board.port, watchdog_register=10,
        watchdog_value=30, rewrite_s=3600,
    )  # fmt: skip
    tick()
    assert board.register(10) == 30
    stop_process(board.proc, timeout_s=5)
    rebooted = BoardProcess(tmp_path / "after-reboot.jsonl", port=board.port)
    try:
        assert rebooted.register(10) == 0
        tick()
        assert rebooted.register(10) == 30
        assert [w["values"] for w in rebooted.writes() if w["address"] == 10] == [[30]]
        status = outputs.watchdog_status([wd.pk])[wd.pk]
        assert status["ok"] and status["read_value"] == 30 and status["found"] == 0
        assert status["rewrite_reason"] == "read 0, not 30 (the board reset it)"
    finally:
        stop_process(rebooted.proc, timeout_s=5)


def test_an_operator_holds_the_output_frost_still_wins_and_the_hold_ends(worker, board, engineer):
    """The override through the API, the ticks in the real worker, the board's log as proof."""
    from datetime import timedelta

    from django.utils import timezone
    from rest_framework.test import APIClient

    from control.models import OutputOverride

    plant, _flow = mixing_plant(
        board, output="register", register_host=board.host, register_port=board.port,
        register_address=5, raw_min=0, raw_max=10000,
    )  # fmt: skip
    tick()
    assert board.register(5) == 6500
    api = APIClient()
    api.force_authenticate(engineer)
    r = api.post("/api/v1/output-overrides", {
        "plant": plant.pk, "value": 25.0, "reason": "Balancing the circuit",
        "expires": (timezone.now() + timedelta(minutes=30)).isoformat()}, format="json")  # fmt: skip
    assert r.status_code == 201, r.content
    tick()
    assert board.register(5) == 2500
    held = AnalogueCommand.objects.filter(plant=plant).first()
    assert (held.raw, held.strategy, held.user) == (2500, "manual_override", engineer)
    assert "Manual override by engineer" in held.reason and "Balancing the circuit" in held.reason
    assert outputs.output_status([plant.pk])[plant.pk]["owner"] == "manual override by engineer"

    # Frost beats the hold: outside far below the plant's frost limit opens the valve.
    set_value(plant.outside_sensor, -12.0)
    tick()
    assert board.register(5) == 10000
    frost = AnalogueCommand.objects.filter(plant=plant).first()
    assert frost.strategy == "frost_protection" and "beats the manual override" in frost.reason
    set_value(plant.outside_sensor, 0.0)
    tick()
    assert board.register(5) == 2500

    # It ends by itself: the expiry passes (moved into the past, as time would), no one cancels.
    OutputOverride.objects.filter(pk=r.json()["id"]).update(
        expires=timezone.now() - timedelta(seconds=1)
    )
    tick()
    assert board.register(5) != 2500
    back = AnalogueCommand.objects.filter(plant=plant).first()
    assert back.strategy == "weather_compensation" and back.user is None
    # Every value the board got is a row with its reason (the board's log is the truth).
    written = [w["values"][0] for w in board.writes() if w["fc"] == 6 and w["address"] == 5]
    rows = list(AnalogueCommand.objects.filter(plant=plant).order_by("requested_at"))
    assert [r.raw for r in rows] == written
    assert not OutputOverride.objects.get(pk=r.json()["id"]).cancelled
