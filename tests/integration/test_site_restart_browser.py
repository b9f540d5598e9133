"""Restart the whole site under a logged-in wall screen: the overview is still
the overview afterwards, not a login form, and the restart raised no critical alarm.

The processes are the ones scripts/run-site.sh starts, each a real process on free ports:
`manage.py ensure_admin`, gunicorn (bms.gunicorn_conf), a control worker, an ingest worker,
beat, and the demo simulator with its Modbus relay board, meter and JeeLib gateway. Nothing is
mocked; the alarm start-up grace and the beat watchdog are the site's own defaults, not the test
suite's (which turns the grace off).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.request
from datetime import datetime
from pathlib import Path

import pytest
from django.conf import settings
from django.utils import timezone
from playwright.sync_api import Page, expect

from alarms.models import Alarm
from tests.browser import logged_in_page
from tests.conftest import ROOT, test_database_url
from tests.live_http import free_port
from tests.processes import stop_process
from tests.wait import wait_for

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]

ADMIN_PASSWORD = "restart-test-password"
RUN_SITE = ROOT / "scripts" / "run-site.sh"


class Site:
    """The processes of scripts/run-site.sh, started and stopped as a whole."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.port, self.relay_port, self.meter_port = free_port(), free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = dict(
            os.environ,
            DATABASE_URL=test_database_url(),
            DJANGO_SETTINGS_MODULE="bms.settings_test",
            BMS_DATA_DIR=str(settings.BMS_DATA_DIR),
            # The site's own defaults, which the test settings turn off for other tests.
            BMS_ALARM_STARTUP_GRACE="120",
            BMS_WATCHDOG_WATCH_BEAT="true",
            DJANGO_SUPERUSER_PASSWORD=ADMIN_PASSWORD,
            # The page polls every 2 s instead of 60 s, so the outage shows within the test.
            BMS_STAFF_LIVE_S="2",
        )
        self.procs: list[tuple[str, subprocess.Popen]] = []
        self.starts = 0

    def _manage(self, *argv: str) -> None:
        subprocess.run(
            [sys.executable, "manage.py", *argv], cwd=ROOT, env=self.env, check=True, timeout=60
        )

    def _start(self, name: str, *argv: str) -> None:
        log = open(self.tmp / f"{name}-{self.starts}.log", "wb")
        proc = subprocess.Popen(
            [sys.executable, *argv], cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT
        )
        log.close()  # the child holds its own copy
        self.procs.append((name, proc))

    def start(self) -> None:
        self.starts += 1
        # run-site.sh: --reset only when it has just written a new password file (first start).
        self._manage("ensure_admin", "-v0", *(["--reset"] if self.starts == 1 else []))
        tag = f"{os.getpid()}-{self.starts}"
        self._start("web", "-m", "gunicorn", "-c", "python:bms.gunicorn_conf",
                    "bms.wsgi:application", "--bind", f"127.0.0.1:{self.port}",
                    "--workers", "3", "--threads", "4", "--timeout", "30")  # fmt: skip
        self._start("worker-control", "-m", "celery", "-A", "bms", "worker", "-Q", "control",
                    "-c", "1", "-n", f"control-{tag}@%h", "-l", "INFO")  # fmt: skip
        self._start("worker-ingest", "-m", "celery", "-A", "bms", "worker", "-Q", "ingest,commit",
                    "-c", "2", "-n", f"ingest-{tag}@%h", "-l", "INFO")  # fmt: skip
        self._start("beat", "-m", "celery", "-A", "bms", "beat", "-l", "INFO",
                    "-s", str(self.tmp / "beat-schedule"), "--pidfile=")  # fmt: skip
        wait_for(self._answers, 90, f"gunicorn to answer (start {self.starts})", every_s=0.25,
                 state=lambda: self.log("web")[-3000:])  # fmt: skip
        self._start("demo", "manage.py", "simulate_site", "--base-url", self.url,
                    "--speed", "1", "--relay-port", str(self.relay_port),
                    "--meter-port", str(self.meter_port), "--seed", "7",
                    "--history-days", "0")  # fmt: skip
        wait_for(lambda: "Simulating at" in self.log("demo"), 90, "the simulator", every_s=0.25,
                 state=lambda: self.log("demo")[-3000:])  # fmt: skip

    def _answers(self) -> bool:
        self.check_alive()
        try:
            with urllib.request.urlopen(f"{self.url}/admin/login/", timeout=2):
                return True
        except OSError:
            return False  # an HTTP error status is an OSError too: not up yet

    def log(self, name: str) -> str:
        path = self.tmp / f"{name}-{self.starts}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def check_alive(self) -> None:
        for name, proc in self.procs:
            assert proc.poll() is None, f"{name} exited {proc.returncode}: {self.log(name)[-3000:]}"

    def stop(self) -> None:
        """SIGTERM to every process at once, then wait for each: what Ctrl-C on run-site.sh
        does (its stop_all kills every pid, then waits)."""
        for _name, proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for _name, proc in self.procs:
            stop_process(proc, timeout_s=20)  # already asked: waits, kills a straggler
        self.procs = []


def assert_overview_without_critical_alarm(page: Page) -> None:
    expect(page.locator("#id_username")).to_have_count(0)  # not the login form
    expect(page.get_by_role("heading", name="Site overview")).to_be_visible()
    expect(page.locator("#live-status")).to_contain_text("Live")
    # Severity pills of open alarms: none of them critical.
    critical = page.locator("#alarms tr", has=page.locator(".pill.bad"))
    assert critical.count() == 0, critical.all_inner_texts()


def test_a_restart_keeps_the_overview_logged_in_and_raises_no_critical_alarm(tmp_path):
    assert "ensure_admin" in RUN_SITE.read_text()  # the admin step this test repeats per start
    site = Site(tmp_path)
    started_at: datetime = timezone.now()
    try:
        site.start()
        with logged_in_page(
            site.url, "admin", ADMIN_PASSWORD, "/staff/", {"width": 1280, "height": 900}
        ) as (page, seen):
            assert_overview_without_critical_alarm(page)
            # The demo reached the site: its rooms are on the overview.
            expect(page.get_by_text("Lecture theatre").first).to_be_visible(timeout=20_000)

            site.stop()
            expect(page.locator("#live-status")).to_contain_text("Connection lost", timeout=90_000)
            site.start()

            # The open page picks up again by itself, then a reload is still the overview.
            expect(page.locator("#live-status")).to_contain_text("Live · updated", timeout=60_000)
            page.reload()
            assert page.url == f"{site.url}/staff/", page.url
            assert_overview_without_critical_alarm(page)
            site.check_alive()
            page.goto(f"{site.url}/staff/alarms/")
            expect(page.locator(".pill.bad")).to_have_count(0)
    finally:
        site.stop()
    critical = Alarm.objects.filter(severity=Alarm.Severity.CRITICAL, raised_at__gte=started_at)
    assert list(critical.values_list("key", "message")) == []
