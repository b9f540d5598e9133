"""Which long-running BACnet processes a site runs beside its workers (scripts/run-site.sh,
docs/BACNET.md): printed one name a line, so the shell script decides by the same settings
(the environment and .env, validated as at any start) as the processes themselves.

    python -m bms.site_processes --demo-bacnet-port 47820
    bacnet-cov        manage.py bacnet_cov: our address on the plant network is set, or the
                      demo's legacy controller runs (its points recorded by COV)
    bacnet-server     manage.py bacnet_server: BMS_BACNET_SERVER_ENABLED (it refuses to start
                      otherwise, which would stop the whole site)
"""

from __future__ import annotations

import argparse
import os

ANY_ADDRESS = "0.0.0.0"  # BMS_BACNET_ADDRESS's default: BACnet not configured


def bacnet_processes(address: str, server_enabled: bool, demo_bacnet_port: int) -> list[str]:
    names = []
    if address != ANY_ADDRESS or demo_bacnet_port:
        names.append("bacnet-cov")
    if server_enabled:
        names.append("bacnet-server")
    return names


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bms.site_processes")
    parser.add_argument("--demo-bacnet-port", type=int, default=0, metavar="PORT",
                        help="the demo controller's UDP port (0: no demo controller)")  # fmt: skip
    args = parser.parse_args(argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bms.settings")
    from django.conf import settings  # after the settings module is named

    for name in bacnet_processes(
        settings.BMS_BACNET_ADDRESS, settings.BMS_BACNET_SERVER_ENABLED, args.demo_bacnet_port
    ):
        print(name)


if __name__ == "__main__":
    main()
