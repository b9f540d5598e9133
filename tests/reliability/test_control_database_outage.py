"""The database becomes unavailable while a weather-compensated output is held by an operator:
the control worker (a real Celery process, ticked by a real beat) keeps writing the output to a
Modbus TCP board in its own process, ends the hold at its expiry from the cached configuration,
and the analogue audit rows written meanwhile wait in Redis and reach the database once it is
back — as the relays' rows do.

The outage is real, as in test_database_outage.py: on SQLite the database file is replaced by a
directory; on PostgreSQL the site reaches the database through a TCP proxy that the test cuts."""

from __future__ import annotations

import contextlib
import json
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from control import config_cache, runtime
from control.models import AnalogueCommand, OutputOverride
from tests.integration.test_weather_worker import BoardProcess, mixing_plant
from tests.processes import stop_process
from tests.reliability.harness import Site
from tests.sqlite_away import sqlite_file_away
from tests.wait import wait_for

pytestmark = pytest.mark.integration

TICK_S = 2
OFFLINE = "[database unavailable: using configuration cached at"


@contextlib.contextmanager
def database_away(site: Site):
    if connection.vendor == "sqlite":
        with sqlite_file_away():
            yield
        return
    proxy = site.db_proxy
    assert proxy is not None, "on PostgreSQL the fault site goes through the proxy"
    wait_for(lambda: proxy.connections > 0, 60, "a site process to connect via the proxy")
    proxy.cut()
    try:
        yield
    finally:
        proxy.restore()


@pytest.fixture
def board(tmp_path):
    b = BoardProcess(tmp_path / "writes.jsonl")
    yield b
    stop_process(b.proc, timeout_s=5)


def _last_tick_at(client) -> str | None:
    raw = client.get(runtime.LAST_TICK_KEY)
    return json.loads(raw)["at"] if raw else None


def _next_tick(client, timeout_s: float = 60) -> dict:
    before = _last_tick_at(client)
    wait_for(lambda: _last_tick_at(client) != before, timeout_s, "a control tick")
    return json.loads(client.get(runtime.LAST_TICK_KEY))


def test_a_held_output_is_audited_through_a_database_outage(fault_site, board, engineer):
    plant, _flow = mixing_plant(
        board, output="register", register_host=board.host, register_port=board.port,
        register_address=5, raw_min=0, raw_max=10000,
    )  # fmt: skip
    held = OutputOverride.objects.create(
        plant=plant, value=30.0, expires=timezone.now() + timedelta(hours=1),
        reason="Pump swap", created_by=engineer,
    )  # fmt: skip
    client = fault_site.redis.client()
    env = {"BMS_CONTROL_TICK": str(TICK_S)}
    fault_site.start_worker("control", queues="control", **env)
    fault_site.start_beat(**env)
    wait_for(lambda: board.register(5) == 3000, 90, "the held output on the board")

    # The hold ends a few seconds into the outage: the cached configuration must carry its
    # expiry, so a tick with the database reads the new one before the outage starts.
    for _ in range(5):
        expires = timezone.now() + timedelta(seconds=4 * TICK_S + 4)
        OutputOverride.objects.filter(pk=held.pk).update(expires=expires)
        _next_tick(client)
        report = _next_tick(client)  # began after the update: the expiry is cached
        if "offline" not in report and timezone.now() < expires - timedelta(seconds=2):
            break
    else:
        pytest.fail("could not cache the expiry before it passed (machine too slow?)")
    rows_before = AnalogueCommand.objects.filter(plant=plant).count()

    with database_away(fault_site):
        wait_for(lambda: "offline" in (_next_tick(client) or {}), 60, "an offline tick")
        # The expiry passes with the database away: the worker returns the output to the curve.
        wait_for(lambda: board.register(5) != 3000, 60, "the hold to end during the outage")
        wait_for(lambda: client.llen(config_cache.PENDING_ANALOGUE_KEY) >= 1, 30,
                   "the output's audit row to wait in Redis")  # fmt: skip
        queued = [json.loads(r) for r in client.lrange(config_cache.PENDING_ANALOGUE_KEY, 0, -1)]
        assert any(q["strategy"] == "weather_compensation" for q in queued), queued

    wait_for(lambda: client.llen(config_cache.PENDING_ANALOGUE_KEY) == 0, 90,
               "the queued rows to be written once the database is back")  # fmt: skip
    rows = list(AnalogueCommand.objects.filter(plant=plant).order_by("requested_at"))
    offline_rows = [r for r in rows[rows_before:] if r.reason.startswith(OFFLINE)]
    assert offline_rows, [r.reason[:80] for r in rows]
    first = offline_rows[0]
    assert first.strategy == "weather_compensation" and first.raw != 3000
    assert first.sent_at is not None and first.confirmed_at is not None and first.error == ""
    # What the board got during the outage is in the audit trail: its first new value.
    written = [w["values"][0] for w in board.writes() if w["fc"] == 6 and w["address"] == 5]
    assert first.raw in written
    assert rows[0].strategy == "manual_override" and rows[0].user == engineer
    assert fault_site.exited() == {}
