"""manage.py simulate_site: create the demo site (once) and run its simulated plant."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
import time
from pathlib import Path

from django.conf import settings
from django.core.management import get_commands
from django.core.management.base import BaseCommand, CommandError
from django.db import connections

from demo.bacnet_controller import DEMO_INSTANCE
from demo.bacnet_controller import HOST as BACNET_HOST
from demo.bacnet_setup import ensure_demo_bacnet
from demo.devices import DeviceStartError
from demo.displays import ensure_energy_display
from demo.energy import ensure_demo_energy, ensure_generation_meters, hourly_extender
from demo.faults import FaultError, FaultPlan, parse
from demo.history import backfill
from demo.keystore import gateway_config, write_private_json
from demo.ports import BACNET_BASE, udp_free
from demo.simulator import Simulator, SimulatorConfig
from demo.site import DemoSite, ensure_demo_site, last_recorded_temperatures

log = logging.getLogger("demo")
MANAGE_PY = Path(settings.BASE_DIR) / "manage.py"


class Command(BaseCommand):
    help = (
        "Create (if absent) a demo site like the Centre for Alternative Technology and run it: "
        "simulated PV, solar thermal, hydro, wind, a boiler house and four bookable rooms, "
        "posting through the real interfaces (/input/bulk, the JeeLib gateway, a Modbus meter) "
        "and heating only when the control loop switches the simulated relay board. "
        "Stop with Ctrl-C (or SIGTERM)."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--base-url",
            default="http://127.0.0.1:8000",
            help="Where the BMS web server answers (default http://127.0.0.1:8000)",
        )
        parser.add_argument(
            "--speed",
            type=float,
            default=1.0,
            help="Physics speed-up, e.g. 60: rooms, tank, clouds and river change 60× faster. "
            "Readings are still posted at wall-clock time (the server refuses future "
            "timestamps) and the sun follows the real time of day. Default 1.",
        )
        parser.add_argument("--relay-host", default="127.0.0.1", help="Relay board bind address")
        parser.add_argument(
            "--relay-port", type=int, default=15020, help="Relay board Modbus TCP port (15020)"
        )
        parser.add_argument("--meter-host", default="127.0.0.1", help="Grid meter bind address")
        parser.add_argument(
            "--meter-port", type=int, default=15021, help="Grid meter Modbus TCP port (15021)"
        )
        parser.add_argument(
            "--bacnet-port",
            type=int,
            default=BACNET_BASE,
            help=f"The legacy BACnet boiler controller's UDP port on 127.0.0.1 ({BACNET_BASE}); "
            "0: none. When the port is taken the demo runs without it.",
        )
        parser.add_argument(
            "--setup-only", action="store_true", help="Create the demo objects and exit"
        )
        parser.add_argument(
            "--duration",
            type=float,
            help="Stop after this many seconds (default: run until stopped)",
        )
        parser.add_argument(
            "--no-gateway",
            action="store_true",
            help="Do not start `manage.py bms_gateway` for the JeeLib nodes",
        )
        parser.add_argument("--seed", type=int, help="Random seed for clouds, river and wind")
        parser.add_argument(
            "--fault",
            action="append",
            default=[],
            metavar="KIND:TARGET@START[/END]",
            help="Inject a fault from a known time (docs/DEMO.md, Faults), e.g. "
            "window_open:workshop@2030-01-08T09:00+00:00; repeat for more. Kinds: "
            "valve_stuck_open, window_open, sensor_flatline (a room's slug), "
            "boiler_short_cycling (target: boiler), night_base_load (site), "
            "pv_shaded (pv-string-1 or pv-string-2), solar_pump_forced_on (solar).",
        )
        parser.add_argument(
            "--history-days",
            type=int,
            default=8,
            help="On a brand-new site, fill this many past days of PV, solar thermal and hydro "
            "history into the feeds so the kiosk charts are not empty (default 8; 0: none)",
        )

    def handle(self, *args, **opts) -> None:
        if opts["speed"] <= 0:
            raise CommandError("--speed must be greater than 0.")
        try:
            faults = FaultPlan.of(parse(text) for text in opts["fault"])
        except FaultError as exc:
            raise CommandError(f"--fault: {exc}") from exc
        if not 0 <= opts["history_days"] <= 60:
            raise CommandError("--history-days must be between 0 and 60.")
        if opts["duration"] is not None and opts["duration"] <= 0:
            raise CommandError("--duration must be greater than 0 seconds.")
        for name in ("relay_port", "meter_port"):
            if not 0 <= opts[name] <= 65535:
                raise CommandError(f"--{name.replace('_', '-')} must be a port 0–65535.")
        if not 0 <= opts["bacnet_port"] <= 65535:
            raise CommandError("--bacnet-port must be a port 0–65535 (0: no BACnet controller).")
        if opts["relay_port"] == opts["meter_port"] and opts["relay_port"] != 0:
            raise CommandError("The relay board and the meter need different ports.")
        base_url = opts["base_url"].rstrip("/")
        if not base_url.startswith(("http://", "https://")):
            raise CommandError("--base-url must start with http:// or https://")

        demo_dir = Path(settings.BMS_DATA_DIR) / "demo"
        demo = ensure_demo_site(
            demo_dir / "keys.json",
            relay_host=_client_host(opts["relay_host"]),
            relay_port=opts["relay_port"],
            meter_host=_client_host(opts["meter_host"]),
            meter_port=opts["meter_port"],
        )
        bacnet_port = self._bacnet_port(opts["bacnet_port"])
        ensure_demo_bacnet(
            demo.site,
            BACNET_HOST,
            bacnet_port or opts["bacnet_port"] or BACNET_BASE,
            running=bacnet_port is not None,
        )
        written = backfill(demo.feeds_by_role, opts["history_days"], seed=opts["seed"])
        if written:
            self.stdout.write(
                f"Filled {_history_days(opts['history_days'])} days "
                "of history into the demo feeds "
                f"({written} points)."
            )
        energy, points, days = ensure_demo_energy(demo.site)
        ensure_generation_meters(demo.site, demo.feeds_by_role)
        ensure_energy_display(demo.site, energy.lecture_block.pk, energy.lecture_block.name)
        if points or days:
            self.stdout.write(
                f"Energy: metering tree and hourly meter history since {energy.first} "
                f"({points} points, {days} meter-days computed)."
            )
        self._report_setup(demo, base_url)
        if opts["setup_only"]:
            return

        gateway = None
        if not opts["no_gateway"]:
            config_path = demo_dir / "gateway.json"
            write_private_json(config_path, gateway_config(base_url, demo.keys))
            gateway = _gateway_argv(config_path)
        # Carry on from what the feeds last recorded: no cliffs in the kiosk charts on restart.
        resume = last_recorded_temperatures(demo, time.time())
        config = SimulatorConfig(
            base_url=base_url,
            keys=demo.keys,
            speed=opts["speed"],
            relay_host=opts["relay_host"],
            relay_port=opts["relay_port"],
            meter_host=opts["meter_host"],
            meter_port=opts["meter_port"],
            duration_s=opts["duration"],
            gateway_argv=gateway,
            jeelib_log=demo_dir / "jeelib.log",
            seed=opts["seed"],
            hourly=hourly_extender(energy, demo.site.time_zone or settings.TIME_ZONE),
            resume=resume,
            bacnet_host=BACNET_HOST,
            bacnet_port=bacnet_port,
            faults=faults,
        )
        # pymodbus logs every listen and reconnect at INFO; our own lines say what matters.
        logging.getLogger("pymodbus").setLevel(logging.WARNING)
        connections.close_all()  # the loop below never touches the database
        try:
            asyncio.run(_run(Simulator(config)))
        except (DeviceStartError, OSError) as exc:
            raise CommandError(
                f"Could not start the simulated devices ({exc}). Is another simulator running, "
                "or is --relay-port/--meter-port in use?"
            ) from exc

    def _bacnet_port(self, port: int) -> int | None:
        """The controller's port, or None (off) when none is wanted or the port is taken."""
        if port == 0:
            return None
        if not udp_free(port, BACNET_HOST):
            self.stdout.write(
                f"Demo BACnet controller off: UDP {BACNET_HOST}:{port} is taken "
                "(the rest of the demo runs without it)."
            )
            return None
        self.stdout.write(
            f"Demo BACnet controller: device {DEMO_INSTANCE} at {BACNET_HOST}:{port} "
            "(its points on the staff page /staff/bacnet/)."
        )
        return port

    def _report_setup(self, demo: DemoSite, base_url: str) -> None:
        if demo.created:
            self.stdout.write(f"Demo site '{demo.site.name}': created {len(demo.created)} objects:")
            for item in demo.created:
                self.stdout.write(f"  + {item}")
        else:
            self.stdout.write(f"Demo site '{demo.site.name}' already set up; nothing to create.")
        slugs = [d.slug for d in demo.displays] or ["pv", "thermal", "hydro"]
        slugs.append("energy")
        self.stdout.write("Open:")
        self.stdout.write(f"  Staff overview   {base_url}/staff/")
        self.stdout.write(f"  Admin            {base_url}/admin/")
        self.stdout.write(f"  Energy           {base_url}/staff/energy/")
        for slug in slugs:
            self.stdout.write(f"  Kiosk            {base_url}/kiosk/{slug}/")
        self.stdout.write(f"  Rotating kiosk   {base_url}/kiosk/?rotate={','.join(slugs)}")


def _client_host(bind_host: str) -> str:
    """The address the BMS should dial: a wildcard bind is reached on loopback."""
    return "127.0.0.1" if bind_host in ("", "0.0.0.0", "::") else bind_host


def _gateway_argv(config_path: Path) -> list[str] | None:
    """The JeeLib gateway command, reading the serial lines on its stdin."""
    if "bms_gateway" not in get_commands():
        log.warning("manage.py bms_gateway is not available: the JeeLib nodes will not post")
        return None
    return [sys.executable, str(MANAGE_PY), "bms_gateway", "--config", str(config_path),
            "--file", "-"]  # fmt: skip


async def _run(simulator: Simulator) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, _stop_on_signal, stop, sig)
    await simulator.run(stop)


def _stop_on_signal(stop: asyncio.Event, sig: signal.Signals) -> None:
    log.info("Received %s; shutting down", sig.name)
    stop.set()


def _history_days(asked: int) -> int:
    """The days of history written: all asked for, unless the optional backfill bound is set."""
    bound = settings.BMS_FEED_MAX_BACKFILL_DAYS
    return min(asked, bound) if bound else asked
