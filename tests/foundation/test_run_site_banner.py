"""The run command's banner says how to see the demo rooms warm: the speed it runs at
and the BMS_SPEED command to make the physics faster."""

from __future__ import annotations

import subprocess

from tests.conftest import ROOT


def _banner(speed: str | None) -> str:
    script = (ROOT / "scripts" / "run-site.sh").read_text()
    heredoc = script[script.index("cat <<INFO\n") : script.index("\nINFO\n") + len("\nINFO\n")]
    env = {"PATH": "/usr/bin:/bin", "URL": "http://127.0.0.1:8000", "ADMIN_PASSWORD": "x"}
    if speed is not None:
        env["BMS_SPEED"] = speed
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
