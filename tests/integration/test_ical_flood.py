"""An iCal flood must not stall the boiler's worker.

The workers are laid out as scripts/run-site.sh and docker/entrypoint.sh lay them out: one on
`control` (-c 1) and one on `ingest,commit` (-c 2). The flood is the 1.5 KB calendar of the
issue (10 events, FREQ=MINUTELY), served by a real local HTTP server that takes a few seconds
to send it, so the sync is certainly running while control ticks are sent every half second.
Each tick must finish within its period: before the fix the sync ran on the control worker and
the ticks waited behind it (20,000 bookings, 11 s).
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

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        replies = app.control.ping(timeout=0.5) or []
        answered = {name.split("-")[0] for reply in replies for name in reply}
        if names <= answered:
            return
    raise RuntimeError(f"workers {names} did not answer a ping in time")


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
                time.sleep(SEND_FOR_S / pieces)

        def log_message(self, *_args):
            return

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/flood.ics", asked
    server.shutdown()
    server.server_close()


def _tick(timeout_s: float = 30.0) -> float:
    """Send one tick; the seconds until the control worker reported it."""
    before = runtime.load_last_tick()
    sent = time.monotonic()
    control_tick.apply_async()
    while time.monotonic() - sent < timeout_s:
        report = runtime.load_last_tick()
        if report is not None and report != before:
            return time.monotonic() - sent
        time.sleep(0.01)
    return timeout_s


def test_an_ical_flood_does_not_delay_the_control_tick(site_workers, slow_flood_server):
    url, asked = slow_flood_server
    zone = Zone.objects.create(name="Hall", slug="hall")
    Zone.objects.filter(pk=zone.pk).update(ical_url=url)
    _tick()  # the control worker is warm

    sync_ical_feeds.apply_async()
    started = time.monotonic()
    latencies: list[float] = []
    done_at = None
    while time.monotonic() - started < 60:
        latencies.append(_tick())
        if Alarm.objects.filter(key=f"ical-capped:{zone.pk}", cleared_at__isnull=True).exists():
            done_at = time.monotonic()
            break
        time.sleep(TICK_EVERY_S)
    made = Booking.objects.filter(zone=zone, source="ical").count()
    print(
        f"\nflood sync: {made} bookings, done {done_at - started if done_at else None} s after "
        f"sending, ticks sent {len(latencies)}, slowest tick {max(latencies):.2f} s"
    )
    assert asked, "the feed was never fetched"
    assert done_at is not None, "the sync did not finish (no cap alarm) within 60 s"
    assert made == 2000
    # Ticks overlapped the sync (it takes SEND_FOR_S at least) and none waited behind it.
    assert done_at - asked[0] >= SEND_FOR_S * 0.9
    assert len(latencies) >= 4
    assert max(latencies) < TICK_EVERY_S * 3, latencies
