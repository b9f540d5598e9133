"""manage.py bacnet_cov: subscribe to the BACnet points we record (COV) and record what the
controllers notify, so the poll need not ask (sensors/devices/bacnet_cov_service.py).

    BMS_BACNET_ADDRESS=192.168.50.20/24 manage.py bacnet_cov

A long-running process of its own (like bms_mqtt), never a web request or a Celery task: it
must be there to hear the notifications. Points a controller refuses to subscribe are polled
as before; without this process every point is polled. Stops on SIGTERM, cancelling its
subscriptions (each also ends by itself after BMS_BACNET_COV_LIFETIME_S) and removing its
"covered" entries from Redis, so the poll reads those points again at once.
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

from sensors.devices.bacnet_cov import CovClient, Plan
from sensors.devices.bacnet_cov_service import CovService

log = logging.getLogger(__name__)

RELOAD_S = 30.0  # points added or removed are picked up within this
STEP_S = 0.2  # between passes: notifications wait at most this long to be recorded


class Command(BaseCommand):
    help = "Subscribe to the recorded BACnet points (COV) and record their notifications."

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--for", type=float, default=0.0, dest="run_for", metavar="SECONDS",
            help="Stop after this long (0: until SIGTERM)",
        )  # fmt: skip

    def handle(self, *args, **opts) -> None:
        local = f"{settings.BMS_BACNET_ADDRESS}:{settings.BMS_BACNET_COV_PORT}"
        client = CovClient(local, int(settings.BMS_BACNET_INSTANCE))
        try:
            client.start()
        except RuntimeError as exc:
            raise CommandError(str(exc)) from exc
        service = CovService(
            client,
            Plan(settings.BMS_BACNET_COV_LIFETIME_S),
            max_per_device=settings.BMS_BACNET_COV_MAX_PER_DEVICE,
            min_interval_s=settings.BMS_BACNET_COV_MIN_INTERVAL_S,
        )
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        ends = time.monotonic() + opts["run_for"] if opts["run_for"] else None
        reload_at = 0.0
        watched: int | None = None
        self.stdout.write(f"BACnet COV client on {local}")
        try:
            while not stop.is_set() and (ends is None or time.monotonic() < ends):
                try:
                    if time.monotonic() >= reload_at:
                        count = service.load()
                        reload_at = time.monotonic() + RELOAD_S
                        if count != watched:  # at the first load and on change, not each one
                            watched = count
                            log.info("BACnet COV: %d points watched", watched)
                    service.step()
                except (DatabaseError, RedisError) as exc:
                    # Subscriptions run on; what arrives meanwhile waits in the bounded queue.
                    log.error("BACnet COV: %s", exc)
                    connection.close_if_unusable_or_obsolete()
                stop.wait(STEP_S)
        finally:
            try:
                service.close()
            except (DatabaseError, RedisError) as exc:  # covered entries then expire by time
                log.error("BACnet COV: on stop: %s", exc)
            finally:
                client.stop()
