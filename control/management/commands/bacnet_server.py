"""manage.py bacnet_server: the site as a BACnet/IP device on the plant LAN (control/bacnet_server.py).

    BMS_BACNET_SERVER_ENABLED=1 BMS_BACNET_ADDRESS=192.168.50.20/24 manage.py bacnet_server

Off unless BMS_BACNET_SERVER_ENABLED. Refreshes the zones', the chosen feeds' and the alarm
objects every BMS_BACNET_SERVER_REFRESH_S seconds from what the control tick, the feeds and
the alarms left (logging how many are served at the first refresh and when that changes),
and between refreshes
decides the writes from the network (refused unless an engineer enabled them on the zone;
docs/BACNET.md section 7); stops on SIGTERM.
"""

from __future__ import annotations

import logging
import signal
import threading
import time

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError, connection
from redis.exceptions import RedisError

from control import bacnet_writes
from control.bacnet_server import (
    SiteDevice,
    alarm_state,
    feed_points,
    site_location,
    zone_points,
)

log = logging.getLogger(__name__)


class Command(BaseCommand):
    help = "Serve the zones as BACnet objects (writes only where enabled) until SIGTERM."

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
            local,
            settings.BMS_BACNET_SERVER_INSTANCE,
            settings.BMS_BACNET_SERVER_NAME,
            subscriptions_per_sender=settings.BMS_BACNET_SERVER_SUBSCRIPTIONS_PER_SENDER,
            writes_per_minute=settings.BMS_BACNET_SERVER_WRITES_PER_MINUTE,
            location=self._location() or "",
        )
        try:
            device.start()
        except RuntimeError as exc:
            raise CommandError(str(exc)) from exc
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        self.stdout.write(
            f"BACnet device {settings.BMS_BACNET_SERVER_INSTANCE} "
            f"'{settings.BMS_BACNET_SERVER_NAME}' on {local}: writes refused unless "
            "enabled on the zone"
        )
        counts: tuple[int, int] | None = None
        try:
            while True:
                try:
                    served = device.update(zone_points(), feed_points(), alarm_state())
                    location = self._location()
                    if location is not None and location != device.location:
                        device.set_location(location)
                    # Said at the first refresh and when a count changes, not at every one:
                    # a line each 10 s was 8,600 lines a day saying the same.
                    if counts != (device.feeds_served, served):
                        counts = (device.feeds_served, served)
                        log.info("BACnet server: %d feeds, %d zones served", *counts)
                except (DatabaseError, RedisError) as exc:
                    # Keep answering with the last values; the next refresh tries again.
                    log.error("BACnet server: cannot refresh the objects (%s)", exc)
                    connection.close_if_unusable_or_obsolete()
                if opts["once"]:
                    break
                self._decide_writes(device, stop)
                if stop.is_set():
                    break
        finally:
            device.stop()

    @staticmethod
    def _location() -> str | None:
        try:
            return site_location()
        except DatabaseError as exc:  # the device keeps the one it has; the next refresh reads it
            log.error("BACnet server: cannot read the site's name for its location (%s)", exc)
            connection.close_if_unusable_or_obsolete()
            return None

    @staticmethod
    def _decide_writes(device: SiteDevice, stop: threading.Event) -> None:
        """Until the next refresh (or SIGTERM), decide the writes as they come."""
        deadline = time.monotonic() + settings.BMS_BACNET_SERVER_REFRESH_S
        while not stop.is_set() and (left := deadline - time.monotonic()) > 0:
            try:
                device.handle_writes(bacnet_writes.apply, wait_s=min(0.5, left))
            except DatabaseError as exc:
                # That writer was answered operational-problem; the next one tries again.
                log.error("BACnet server: cannot decide a write (%s)", exc)
                connection.close_if_unusable_or_obsolete()
