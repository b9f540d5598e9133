"""Dates are written one way on every staff page: "Mon 24 Nov 2026 15:01" (core/dates.py).

The demo site gives every kind of page something dated to show (bookings, schedules, a heating
plant, a solar circuit); on top come an override, relay commands, alarms open, acknowledged,
cleared and node-silent (from the real check), and a replay with switching. The visible text of
each page is scanned for any other way of writing a date.
"""

from __future__ import annotations

import re
import time
from datetime import timedelta
from html.parser import HTMLParser

import pytest
from django.test import Client
from django.utils import timezone

from alarms.lifecycle import clear_alarm, raise_alarm
from alarms.models import Alarm
from control.models import ActuatorCommand, Booking, HeatingPlant, Override, SolarCircuit
from core.dates import day_text, when_text
from demo.site import ensure_demo_site
from feeds.store import service
from sensors.models import Actuator, Node
from sensors.tasks import check_silent_nodes

pytestmark = pytest.mark.django_db

WEEKDAY = r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)"
MONTH = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
CANONICAL = re.compile(rf"\b{WEEKDAY} [1-9]\d? {MONTH} \d{{4}}\b")
OTHER_WAYS = [
    re.compile(r"\b\d{4}-\d{2}-\d{2}\b"),  # ISO, as a person reads it
    re.compile(r"\b\d{1,2}/\d{1,2}/\d{2,4}\b"),  # 24/11/2026 (or 11/24/2026)
    re.compile(rf"\b{WEEKDAY} \d{{1,2}}:\d\d"),  # "Mon 09:00": which Monday?
    re.compile(rf"\b\d{{1,2}} {MONTH}\b"),  # "24 Nov" with no weekday or year (checked below)
    re.compile(rf"\b{MONTH} \d{{1,2}}\b(?!:)"),  # "Nov 24"
    re.compile(r"\b(?:a\.m\.|p\.m\.)", re.I),  # Django's default "3 p.m."
    re.compile(r"\b\d{1,2}:\d\d:\d\d\b"),  # seconds: staff times are to the minute
    re.compile(r"\bt=\d{9,}\b"),  # a raw Unix time
    re.compile(r"\bUTC\b"),  # the site's zone is the one shown
    # Django's timesince ("3\xa0minutes", "1\xa0hour, 2\xa0minutes"): ages are written as
    # live.js keeps them ("3 min", "1 h 2 min"; core/dates.py duration_text), one way.
    re.compile(r"\b\d+\s(?:minute|hour|week|month|year)s?\b"),
]


class _VisibleText(HTMLParser):
    """Text a person sees: no script or style bodies, no attribute values (inputs carry ISO)."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs) -> None:
        if tag in {"script", "style", "template"}:
            self._skip += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in {"script", "style", "template"} and self._skip:
            self._skip -= 1

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.parts.append(data)


def visible_text(html: str) -> str:
    parser = _VisibleText()
    parser.feed(html)
    return re.sub(r"\s+", " ", " ".join(parser.parts))


def other_ways(text: str) -> list[str]:
    """Every date-like piece of `text` not written the one way."""
    rest = CANONICAL.sub("<date>", text)
    return [m.group(0) for pattern in OTHER_WAYS for m in pattern.finditer(rest)]


def test_the_scanner_finds_each_other_way_and_accepts_the_one_way():
    found = other_ways(
        "2026-11-24, 24/11/2026, Mon 09:00, 24 Nov 15:01, Nov 24, 3 p.m., Mon 24 Nov 2026 15:01,"
        " Mon 24 Nov 2026 15:01:07, latest: t=1794861900, 21:02 UTC"
    )
    assert found == [
        "2026-11-24", "24/11/2026", "Mon 09:00", "24 Nov", "Nov 24", "p.m.", "15:01:07",
        "t=1794861900", "UTC",
    ]  # fmt: skip


@pytest.fixture
def dated_world(tmp_path, settings, engineer, redis_client) -> dict:
    settings.BMS_DATA_DIR = tmp_path
    demo = ensure_demo_site(tmp_path / "demo" / "keys.json")
    now = timezone.now()
    zone = next(iter(demo.zones.values()))
    service.log_points(
        (zone.temperature_sensor.feed_id, int(time.time()) - 7200 + i * 60, 17 + i / 60)
        for i in range(120)
    )
    boiler = Actuator.objects.get(name="Boiler")
    Override.objects.create(
        actuator=boiler, state=True, expires=now + timedelta(hours=2), reason="commissioning"
    )
    for minutes, state in ((50, True), (20, False)):
        ActuatorCommand.objects.create(
            actuator=boiler,
            state=state,
            reason="test",
            requested_at=now - timedelta(minutes=minutes),
        )
    raise_alarm("relay:x", "Relay 'Boiler' did not confirm", source="relay", severity="critical")
    acked, _ = raise_alarm("meter:x", "Meter silent", source="meter")
    Alarm.objects.filter(pk=acked.pk).update(acknowledged_at=now, acknowledged_by=engineer)
    raise_alarm("feed:x", "Feed late", source="feeds")
    clear_alarm("feed:x")
    node = Node.objects.filter(site=demo.site).first()
    Node.objects.filter(pk=node.pk).update(interval=10)
    service.log_points([(node.sensors.first().feed_id, int(time.time()) - 3600, 1.0)])
    check_silent_nodes(now=time.time())
    # The plant status's last control tick, and a feed's refused points (their alarm).
    from alarms.watchdog import check_refused
    from control import runtime
    from feeds.store.service import get_buffer

    runtime.save_last_tick({"at": now.isoformat(), "zones": 1, "decisions": 1})
    buffer = get_buffer()
    buffer.redis.hset(buffer.refused_key, zone.temperature_sensor.feed_id, 3)
    buffer.redis.hset(
        buffer.refused_last_key, zone.temperature_sensor.feed_id, "1794861900 too old"
    )
    check_refused()
    booking = Booking.objects.filter(zone=zone).first()
    return {"zone": zone, "booking": booking, "now": now}


def test_every_staff_page_writes_dates_one_way(engineer, dated_world):
    zone, booking = dated_world["zone"], dated_world["booking"]
    today = timezone.localdate()
    client = Client()
    client.force_login(engineer)
    pages = [
        "/staff/",
        "/staff/control/",
        "/staff/bookings/",
        f"/staff/bookings/{zone.slug}/",
        f"/staff/bookings/{zone.slug}/{booking.pk}/",
        f"/staff/control/replay/{zone.slug}/?start={today - timedelta(days=1)}&end={today}",
        "/staff/alarms/",
        "/staff/feeds/",
        "/staff/energy/",
        f"/staff/control/plant/{HeatingPlant.objects.get().pk}/",
        f"/staff/control/solar/{SolarCircuit.objects.get().pk}/",
    ]
    dates_seen = 0
    for path in pages:
        response = client.get(path)
        assert response.status_code == 200, path
        text = visible_text(response.content.decode())
        assert other_ways(text) == [], path
        dates_seen += len(CANONICAL.findall(text))
    # The pages do show dates (a scan of pages without any would prove nothing).
    assert dates_seen >= 10
    assert when_text(timezone.localtime(dated_world["now"]))[:-6] == day_text(today)


def test_the_day_filter_reads_report_rows_iso_days_and_leaves_other_text():
    from core.templatetags.dates import day

    assert day("2026-11-01") == "Sun 1 Nov 2026"
    assert day("2026-11-01T00:00:00+00:00") == "Sun 1 Nov 2026"
    assert day("baseline") == "baseline"


def test_ages_are_written_as_live_js_writes_them():
    """The server's first rendering of an age and the browser's updates (live.js duration())
    read the same: the page used to say "3 minutes" and then "3 min" a second later."""
    import json
    import subprocess

    from core.dates import duration_text
    from tests.conftest import ROOT

    seconds = [0, 1, 59, 60, 61, 3599, 3600, 3660, 7200, 47 * 3600 + 59 * 60, 48 * 3600, 10**6]
    script = (ROOT / "core/static/core/live.js").read_text()
    body = script[script.index("function duration(") : script.index("function updateDurations")]
    js = subprocess.run(
        ["node", "-e", f"{body}; console.log(JSON.stringify({seconds}.map(duration)))"],
        capture_output=True, text=True, timeout=30, check=True,
    )  # fmt: skip
    assert [duration_text(s) for s in seconds] == json.loads(js.stdout)
