"""The simulator keeps running, and says why once, when the server cannot take its posts."""

import asyncio
import logging
import socket

import pytest

from demo import layout
from demo.simulator import Simulator, SimulatorConfig


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(base_url: str, keys: dict[str, str]) -> Simulator:
    config = SimulatorConfig(
        base_url=base_url, keys=keys, relay_port=0, meter_port=0, duration_s=2.2, tick_s=0.1,
        post_interval_s=0.5, summary_interval_s=60, seed=3,
    )  # fmt: skip
    simulator = Simulator(config)
    asyncio.run(simulator.run(asyncio.Event()))
    return simulator


def _post_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "/input/bulk failed" in r.getMessage()]


def test_an_unreachable_server_is_reported_once_per_node_and_the_run_goes_on(caplog):
    caplog.set_level(logging.INFO, logger="demo")
    keys = {spec.name: "0" * 32 for spec in layout.HTTP_NODES}
    simulator = _run(f"http://127.0.0.1:{_closed_port()}", keys)
    nodes = len(layout.HTTP_NODES)
    assert simulator.stats.ok == 0
    assert simulator.stats.failed >= 3 * nodes  # it kept trying every interval
    warnings = _post_warnings(caplog)
    assert len(warnings) == nodes  # one line per node, not one per post
    assert all("Connection refused" in w for w in warnings)
    assert any("Simulator stopped" in r.getMessage() for r in caplog.records)


@pytest.mark.django_db
def test_a_refused_key_is_reported_with_the_servers_reason(live_server, caplog):
    caplog.set_level(logging.INFO, logger="demo")
    keys = {spec.name: "f" * 32 for spec in layout.HTTP_NODES}  # no such node key
    keys.pop(layout.HTTP_NODES[0].name)  # and one node without a key at all
    simulator = _run(live_server.url, keys)
    assert simulator.stats.ok == 0
    warnings = _post_warnings(caplog)
    assert len(warnings) == len(layout.HTTP_NODES)
    assert sum("HTTP 401" in w and "apikey" in w for w in warnings) == len(layout.HTTP_NODES) - 1
    assert sum("no write key on file" in w for w in warnings) == 1


@pytest.mark.django_db
def test_a_relay_port_in_use_is_a_clear_error_not_a_traceback(tmp_path, settings):
    from io import StringIO

    from django.core.management import CommandError, call_command

    settings.BMS_DATA_DIR = tmp_path
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(CommandError, match=f"Relay board could not listen on 127.0.0.1:{port}"):
            call_command(
                "simulate_site", "--relay-port", str(port), "--meter-port", "0", "--no-gateway",
                "--duration", "1", stdout=StringIO(),
            )  # fmt: skip


def test_the_jeelib_log_is_kept_to_two_bounded_files(tmp_path, monkeypatch):
    from demo import simulator

    monkeypatch.setattr(simulator, "JEELIB_LOG_MAX_BYTES", 100)
    log_path = tmp_path / "jeelib.log"
    for i in range(30):
        simulator._append_rotating(log_path, [f"OK 10 {i} 0 (-60)"])
    rotated = tmp_path / "jeelib.log.1"
    assert rotated.exists()
    assert log_path.stat().st_size <= 100 + 20 and rotated.stat().st_size <= 100 + 20
    assert log_path.read_text().splitlines()[-1] == "OK 10 29 0 (-60)"
