"""manage.py bacnet_server: the site as a BACnet/IP device on the plant LAN (control/bacnet_server.py).

    BMS_BACNET_SERVER_ENABLED=1 BMS_BACNET_ADDRESS=192.168.50.20/24 manage.py bacnet_server

Off unless BMS_BACNET_SERVER_ENABLED. Refreshes the zones' objects every
BMS_BACNET_SERVER_REFRESH_S seconds from what the control tick left; stops on SIGTERM. Every
write from the network is refused (docs/BACNET.md section 7).
"""

from __future__ import annotations

import logging
import signal
import threading

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError, connection
from redis.exceptions import RedisError

from control.bacnet_server import SiteDevice, zone_points

log = logging.getLogger(__name__)


class Command(BaseCommand):
    help = "Serve the zones as BACnet objects (read-only) until SIGTERM."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--once", action="store_true", help="Start, load the zones, stop")

    def handle(self, *args, **opts) -> None:
        if not settings.BMS_BACNET_SERVER_ENABLED:
            raise CommandError(
                "The BACnet server is off: set BMS_BACNET_SERVER_ENABLED=1 (and "
                "BMS_BACNET_ADDRESS to our address on the plant network) to run it."
            )
        host = settings.BMS_BACNET_ADDRESS
        local = f"{host}:{settings.BMS_BACNET_SERVER_PORT}"
        device = SiteDevice(
            local, settings.BMS_BACNET_SERVER_INSTANCE, settings.BMS_BACNET_SERVER_NAME
        )
        try:
            device.start()
        except RuntimeError as exc:
            raise CommandError(str(exc)) from exc
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        self.stdout.write(
            f"BACnet device {settings.BMS_BACNET_SERVER_INSTANCE} "
            f"'{settings.BMS_BACNET_SERVER_NAME}' on {local}: writes refused"
        )
        try:
            while True:
                try:
                    served = device.update(zone_points())
                    self.stdout.write(f"{served} zones served")
                except (DatabaseError, RedisError) as exc:
                    # Keep answering with the last values; the next refresh tries again.
                    log.error("BACnet server: cannot refresh the zones (%s)", exc)
                    connection.close_if_unusable_or_obsolete()
                if opts["once"] or stop.wait(settings.BMS_BACNET_SERVER_REFRESH_S):
                    break
        finally:
            device.stop()
