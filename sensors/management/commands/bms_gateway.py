"""manage.py bms_gateway: JeeLib / LLAP radio lines from a serial port (or a file / stdin)
posted to the ingest API with each node's key."""

from __future__ import annotations

import signal
import sys
import time
from collections.abc import Iterator

from django.core.management.base import BaseCommand, CommandError

from sensors.devices.gateways.config import GatewayConfigError, load_config
from sensors.devices.gateways.runner import Gateway, HttpPoster


class Command(BaseCommand):
    help = (
        "Read JeeLib RFM12B/RFM69 lines ('OK 10 0 1 2 3 (-65)') and Ciseco LLAP messages "
        "('aXXTMPA22.5-') from a serial port, a file or stdin, and post them to "
        "/api/v1/readings with each node's write key, as set in the JSON --config file. "
        "Unparseable lines are counted and logged, never fatal."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--config", required=True, help="JSON config (see docs/GATEWAYS.md)")
        source = parser.add_mutually_exclusive_group()
        source.add_argument("--serial", metavar="PORT", help="Serial port, e.g. /dev/ttyAMA0")
        source.add_argument("--file", metavar="PATH", help="Read lines from a file ('-': stdin)")
        parser.add_argument("--baud", type=int, default=38400, help="Serial speed (38400)")
        parser.add_argument("--url", help="Site URL (overrides the config's url)")
        parser.add_argument(
            "--batch-seconds", type=float, default=0.0,
            help="Gather readings this long before posting (0: post each line)",
        )  # fmt: skip
        parser.add_argument("--timeout", type=float, default=10.0, help="HTTP timeout (s)")

    def handle(self, *args, **opts) -> None:
        try:
            config = load_config(opts["config"])
        except GatewayConfigError as exc:
            raise CommandError(str(exc)) from exc
        poster = HttpPoster(opts["url"] or config.url, timeout_s=opts["timeout"])
        gateway = Gateway(config, poster)
        stopping = {"now": False}

        def stop(*_args) -> None:
            stopping["now"] = True

        signal.signal(signal.SIGTERM, stop)
        last_flush = time.monotonic()
        for line in self._lines(opts, stopping):
            if line:
                gateway.feed_line(line)
            if time.monotonic() - last_flush >= opts["batch_seconds"]:
                gateway.flush()
                last_flush = time.monotonic()
        gateway.flush()
        s = gateway.stats
        self.stdout.write(
            f"{s.lines} lines, {s.readings} readings, {s.posted_rows} rows posted, "
            f"{s.unparseable} unparseable, {s.unknown_radio_nodes} from unknown radio nodes, "
            f"{gateway.pending_rows} rows not delivered"
        )

    def _lines(self, opts: dict, stopping: dict) -> Iterator[str]:
        if opts["serial"]:
            import serial  # pyserial

            try:
                port = serial.Serial(opts["serial"], opts["baud"], timeout=1)
            except serial.SerialException as exc:
                raise CommandError(f"cannot open {opts['serial']}: {exc}") from exc
            with port:
                while not stopping["now"]:
                    # timeout=1: an empty read lets batching and SIGTERM be noticed.
                    yield port.readline().decode("ascii", errors="replace")
            return
        path = opts["file"] or "-"
        try:
            stream = sys.stdin if path == "-" else open(path, encoding="ascii", errors="replace")
        except OSError as exc:
            raise CommandError(f"cannot read {path}: {exc}") from exc
        try:
            for line in stream:
                if stopping["now"]:
                    break
                yield line
        finally:
            if stream is not sys.stdin:
                stream.close()
