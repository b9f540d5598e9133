"""An iCal flood must not stall the boiler's worker.

The workers are laid out as scripts/run-site.sh and docker/entrypoint.sh lay them out: one on
`control` (-c 1) and one on `ingest,commit` (-c 2). The flood is the 1.5 KB calendar of the
issue (10 events, FREQ=MINUTELY), served by a real local HTTP server that takes a few seconds
to send it, so the sync is certainly running while control ticks are sent every half second.
Ticks must finish while the sync is still running: before the fix the sync ran on the control
worker and the ticks waited behind it (20,000 bookings, 11 s).
"""

from __future__ import annotations

import http.server
import os
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta

import pytest

from alarms.models import Alarm
from control import runtime
from control.models import Booking, Zone
from control.tasks import control_tick, sync_ical_feeds
from tests.conftest import ROOT, test_database_url
from tests.control.test_ical_security import flood
from tests.processes import stop_process
from tests.wait import wait_for

pytestmark = [pytest.mark.integration]

TICK_EVERY_S = 0.5
SEND_FOR_S = 3.0  # the server trickles the feed over this long


def _worker(queues: str, concurrency: int, name: str, log_path) -> subprocess.Popen:
    env = dict(
        os.environ,
        DATABASE_URL=test_database_url(),
        DJANGO_SETTINGS_MODULE="bms.settings_test",
        BMS_ICAL_ALLOWED_HOSTS="127.0.0.1",
    )
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "bms", "worker", "-Q", queues,
             "-c", str(concurrency), "--without-gossip", "--without-mingle", "-l", "INFO",
             "-n", f"{name}-{os.getpid()}@%h"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip


def _wait_for(names: set[str], timeout_s: float = 30.0) -> None:
    from bms.celery import app

    def answered() -> set[str]:
        replies = app.control.ping(timeout=0.5) or []
        return names <= {name.split("-")[0] for reply in replies for name in reply}

    wait_for(answered, timeout_s, f"workers {names} to answer a ping", every_s=0)


@pytest.fixture
def site_workers(transactional_db, redis_client, tmp_path):
    procs = [
        _worker("control", 1, "control", tmp_path / "control.log"),
        _worker("ingest,commit", 2, "ingest", tmp_path / "ingest.log"),
    ]
    try:
        _wait_for({"control", "ingest"})
        yield procs
    finally:
        for proc in procs:
            stop_process(proc, timeout_s=15)


@pytest.fixture
def slow_flood_server():
    """Serves the flood calendar in pieces over SEND_FOR_S; records when it was asked."""
    first = datetime.now(UTC) - timedelta(minutes=30)
    body = flood(10, dtstart=f"{first:%Y%m%dT%H%M00Z}").encode()
    asked: list[float] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            asked.append(time.monotonic())
            self.send_response(200)
            self.send_header("Content-Type", "text/calendar")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            pieces = 10
            step = len(body) // pieces + 1
            for i in range(0, len(body), step):
                self.wfile.write(body[i : i + step])
                self.wfile.flush()
                time.sleep(SEND_FOR_S / pieces)  # a real pause: a slow server, by design

        def log_message(self, *_args):
            return

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/flood.ics", asked
    server.shutdown()
    server.server_close()


def _tick(timeout_s: float = 30.0) -> None:
    """Send one tick and wait until the control worker reported it."""
    before = runtime.load_last_tick()
    control_tick.apply_async()
    wait_for(lambda: runtime.load_last_tick() not in (None, before), timeout_s,
             "the control worker to report a tick", every_s=0.01)  # fmt: skip


def test_an_ical_flood_does_not_delay_the_control_tick(site_workers, slow_flood_server):
    url, asked = slow_flood_server
    zone = Zone.objects.create(name="Hall", slug="hall")
    Zone.objects.filter(pk=zone.pk).update(ical_url=url)
    _tick()  # the control worker is warm

    sync_ical_feeds.apply_async()
    capped = Alarm.objects.filter(key=f"ical-capped:{zone.pk}", cleared_at__isnull=True)
    ticks_during_sync = 0

    def tick_then_check() -> bool:
        """One tick; true once the sync is done (its cap alarm is raised)."""
        nonlocal ticks_during_sync
        fetching = bool(asked)  # the sync had begun before this tick was sent
        _tick()
        if capped.exists():
            return True
        ticks_during_sync += fetching  # ... and had not finished when the tick had
        return False

    # Ticks every TICK_EVERY_S, as beat sends them, until the sync is done.
    wait_for(tick_then_check, 60, "the flood sync to finish (its cap alarm)", every_s=TICK_EVERY_S)
    made = Booking.objects.filter(zone=zone, source="ical").count()
    print(f"\nflood sync: {made} bookings, {ticks_during_sync} ticks done while it ran")
    assert asked, "the feed was never fetched"
    assert made == 2000
    # A tick sent once the sync was running finished before the sync did: none waited behind
    # it (before the fix none could, the sync holding the control worker's only slot).
    assert ticks_during_sync >= 1
