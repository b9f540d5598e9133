"""Requests captured from a real emonhub (../shared/conformance/emonhub/), replayed byte for
byte (method, path and query, headers, body) over a real socket to the whole site, with a real
worker: each is answered exactly `ok` (emonhub resends anything else forever) and every value
lands where emoncms's bulk() would put it: same node, same input name, same time.

The expected placement is computed here from emoncms's documented rules, independently of
sensors/ingest/emoncms_input.py: `cb` -> raw body is zlib JSON, else the form field `data`; a row is
`[t, node, values...]`; an object names its values, other values take keys 1, 2, ... by
position; the row time is `t + (server_now - sentat)`."""

from __future__ import annotations

import base64
import http.client
import json
import os
import shutil
import time
import zlib
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from django.conf import settings

from sensors import cache, keys
from sensors.ingest import node_state as state
from sensors.models import GatewayKey, Node, Sensor, Site
from tests.live_http import KioskServer
from tests.wait import wait_for

pytestmark = [pytest.mark.integration]

CAPTURES = Path(os.environ.get("BMS_CONFORMANCE_DIR", "/work/shared/conformance")) / "emonhub"
KEY = "0123456789abcdef0123456789abcdef"  # the write key of every captured request
FILES = ["positional.jsonl", "compress-only.jsonl", "sendnames.jsonl"]


def requests_of(name: str) -> list[dict]:
    path = CAPTURES / name
    if not path.exists():
        pytest.skip(f"conformance capture {path} not present")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def expected_rows(request: dict) -> tuple[int, list[tuple[str, str, float, int]]]:
    """(sentat, [(node as emoncms names it, input name, value, t as sent)]) of one request."""
    query = parse_qs(urlsplit(request["path"]).query)
    body = base64.b64decode(request["body_base64"])
    text = zlib.decompress(body).decode() if "cb" in query else parse_qs(body.decode())["data"][0]
    out = []
    for row in json.loads(text):
        t, node, *values = row
        position = 1
        for value in values:
            if isinstance(value, dict):
                out.extend((str(node), k, float(v), t) for k, v in value.items())
                continue
            out.append((str(node), str(position), float(value), t))
            position += 1
    return int(query["sentat"][0]), out


def replay(server: KioskServer, request: dict) -> tuple[int, bytes, int, int]:
    """Send the request exactly as captured; (status, body, server time before, after)."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    body = base64.b64decode(request["body_base64"])
    conn.putrequest(request["method"], request["path"], skip_accept_encoding=True)
    for name, value in request["headers"].items():
        conn.putheader(name, value)
    conn.endheaders()
    before = int(time.time())
    conn.send(body)
    response = conn.getresponse()
    answer = response.read()
    after = int(time.time())
    conn.close()
    return response.status, answer, before, after


@pytest.fixture
def server(transactional_db, celery_worker, redis_client):
    cache.clear_all()
    shutil.rmtree(settings.BMS_FEED_DIR, ignore_errors=True)
    settings.BMS_FEED_DIR.mkdir(parents=True, exist_ok=True)
    site = Site.objects.create(name="Home", slug="home")
    # The captures' key as a gateway key of the site: emonhub posts all its nodes with it.
    GatewayKey.objects.create(
        site=site, name="emonpi", key_prefix=keys.key_prefix(KEY), key_hash=keys.hash_key(KEY)
    )
    srv = KioskServer()
    srv.start()
    yield srv
    srv.stop()
    cache.clear_all()


def stored_inputs() -> dict[tuple[str, str], tuple[int, float]]:
    """Each (node, input)'s newest (t, value) as the worker stored it (emoncms: the input's
    time and value, written by the last batch processed)."""
    return {
        (node.name, key): tv
        for node in Node.objects.all()
        for key, tv in state.last_values(node.pk).items()
    }


def wait_until_stored(wanted: dict, window: dict, timeout_s: float = 30):
    """Once the worker has stored every (node, input) of one request, what it stored (a time
    alone cannot tell two requests apart: the captures' rows are 1-3 s apart and so are the
    replays, so the value must match too)."""

    def all_stored() -> bool:
        got = stored_inputs()
        return all(
            where in got
            and window[where][0] <= got[where][0] <= window[where][1]
            and got[where][1] == pytest.approx(value)
            for where, value in wanted.items()
        )

    what = f"the worker to store {sorted(wanted)}"
    wait_for(all_stored, timeout_s, what, every_s=0.05, state=stored_inputs)
    return stored_inputs()


@pytest.mark.parametrize("name", FILES)
def test_captured_emonhub_requests_are_answered_ok_and_land_where_emoncms_puts_them(server, name):
    seen: set[tuple[str, str]] = set()
    for request in requests_of(name):
        status, answer, before, after = replay(server, request)
        assert (status, answer) == (200, b"ok"), (request["path"], status, answer)
        sentat, rows = expected_rows(request)
        # emoncms: t + (server_now - sentat), server_now read while the request ran; within a
        # request the last row of an input is what the input shows afterwards.
        wanted = {(node, key): value for node, key, value, _t in rows}
        window = {
            (node, key): (t + before - sentat, t + after - sentat) for node, key, _v, t in rows
        }
        got = wait_until_stored(wanted, window)
        for where, value in wanted.items():
            assert where in got, f"{where} not stored"
            low, high = window[where]
            assert low <= got[where][0] <= high, where
            assert got[where][1] == pytest.approx(value), where
        seen |= set(wanted)
    assert set(stored_inputs()) == seen, "inputs differ from emoncms's"
    # Every node is one of the site (registered by the gateway key), each input auto-created
    # with its own feed, named as emoncms names it.
    site_nodes = set(Node.objects.filter(site__slug="home").values_list("name", flat=True))
    assert site_nodes == {node for node, _ in seen}
    for node, key in seen:
        sensor = Sensor.objects.select_related("feed").get(node__name=node, key=key)
        assert sensor.auto_created and sensor.feed.name == key and sensor.feed.tag == node
