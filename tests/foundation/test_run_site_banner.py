"""The run command's banner says how to see the demo rooms warm: the speed it runs at
and the BMS_SPEED command to make the physics faster."""

from __future__ import annotations

import subprocess

from tests.conftest import ROOT


def _banner(speed: str | None, py: str = "") -> str:
    """The banner as the script prints it; with `py`, a stand-in for Python whose
    bms.site_processes answer is the BACnet processes' names, one a line, as the real one's."""
    script = (ROOT / "scripts" / "run-site.sh").read_text()
    heredoc = script[script.index("cat <<INFO\n") : script.index("\nINFO\n") + len("\nINFO\n")]
    env = {"PATH": "/usr/bin:/bin", "URL": "http://127.0.0.1:8000", "ADMIN_PASSWORD": "x"}
    if speed is not None:
        env["BMS_SPEED"] = speed
    if py:
        start = script.index('BACNET_PROCS="')
        heredoc = script[start : script.index("\n", start) + 1] + heredoc
        env["PY"] = py
    done = subprocess.run(
        ["bash", "-c", heredoc], env=env, capture_output=True, text=True, check=True, timeout=10
    )
    return done.stdout


def test_the_banner_says_how_to_see_rooms_warm():
    text = _banner(None)
    assert "runs at 1x" in text
    assert "BMS_SPEED=60 bash scripts/run-site.sh" in text


def test_the_banner_shows_the_speed_it_was_started_with():
    assert "runs at 60x" in _banner("60")


def test_the_banner_names_the_bacnet_processes_on_one_line(tmp_path):
    py = tmp_path / "python"
    py.write_text("#!/bin/sh\nprintf 'bacnet-cov\\nbacnet-server\\n'\n")
    py.chmod(0o755)
    lines = _banner(None, str(py)).splitlines()
    assert (
        "    BACnet processes bacnet-cov bacnet-server (logs: bacnet-cov.log, bacnet-server.log)"
        in lines
    )
    assert "    BACnet processes none (logs: bacnet-cov.log, bacnet-server.log)" in _banner(None)
