"""scripts/run-site.sh starts BACnet's own processes by the settings (bms/site_processes.py):
COV subscriptions when our plant address is set or the demo controller runs, the site's BACnet
device only when enabled (it refuses to start otherwise, which would stop the whole site)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from bms.site_processes import bacnet_processes
from tests.conftest import ROOT


@pytest.mark.parametrize(
    ("address", "server", "demo_port", "expected"),
    [
        ("0.0.0.0", False, 0, []),  # BACnet not configured, no demo controller
        ("0.0.0.0", False, 47820, ["bacnet-cov"]),  # the demo's controller recorded by COV
        ("192.168.50.20/24", False, 0, ["bacnet-cov"]),
        ("192.168.50.20/24", True, 0, ["bacnet-cov", "bacnet-server"]),
        ("0.0.0.0", True, 0, ["bacnet-server"]),
    ],
)
def test_the_processes_follow_the_settings(address, server, demo_port, expected):
    assert bacnet_processes(address, server, demo_port) == expected


def _run(*args: str, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("BMS_BACNET_")}
    return subprocess.run(
        [sys.executable, "-m", "bms.site_processes", *args], cwd=ROOT,
        env={**clean, "DJANGO_SETTINGS_MODULE": "bms.settings", **env},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_the_script_reads_the_environment_as_the_processes_do(tmp_path):
    done = _run("--demo-bacnet-port", "0", BMS_BACNET_ADDRESS="192.168.50.20/24",
                BMS_BACNET_SERVER_ENABLED="1", BMS_DATA_DIR=str(tmp_path))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["bacnet-cov", "bacnet-server"]
    # A bad BACnet setting stops it (and the site) with the setting named, not a guess.
    bad = _run(BMS_BACNET_BBMD="192.168.60.1:0", BMS_DATA_DIR=str(tmp_path))
    assert bad.returncode != 0 and "BMS_BACNET_BBMD='192.168.60.1:0'" in bad.stderr


def test_run_site_starts_each_named_process_as_its_command():
    script = (ROOT / "scripts" / "run-site.sh").read_text()
    assert '-m bms.site_processes --demo-bacnet-port "${BACNET_PORT:-0}"' in script
    assert 'bacnet-cov) start bacnet-cov "$PY" manage.py bacnet_cov ;;' in script
    assert 'bacnet-server) start bacnet-server "$PY" manage.py bacnet_server ;;' in script
    # After the demo (its port decided), so the demo's controller is known.
    assert script.index("BACNET_PORT=") < script.index("bms.site_processes")
