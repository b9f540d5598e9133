"""bms_gateway: radio lines in, posts to the real ingest API (a live server) out."""

from __future__ import annotations

import json

import pytest
from django.core.management import CommandError, call_command

from sensors.devices.gateways.config import GatewayConfigError, parse_config
from sensors.devices.gateways.runner import Gateway, HttpPoster
from tests.sensors.conftest import make_node, queued_batches

pytestmark = pytest.mark.django_db(transaction=True)

LINES = [
    "[RF12demo.14] W i15 g210 @ 433 MHz\n",
    "OK 10 120 0 44 1 220 5 (-61)\n",  # power1=120, power2=300, temp=15.00
    "OK 10 1 2 3\n",  # odd byte count: unparseable (1)
    "OK 7 1 0 (-70)\n",  # radio node 7 is not configured
    "garbage\n",  # (2)
    "aXXTMPA22.5-aXXBATT3.05-\n",
    "aXXSTARTED--\n",
    "aXXTMPA!!!!-\n",  # (3)
]


@pytest.fixture
def nodes():
    tx, tx_key = make_node("emontx1", node_id=10)
    room, room_key = make_node("room1", node_id=None)
    return {"emontx1": (tx, tx_key), "room1": (room, room_key)}


def config_doc(url: str, nodes) -> dict:
    return {
        "url": url,
        "jeelib": {
            "10": {
                "node": "emontx1", "key": nodes["emontx1"][1],
                "names": ["power1", "power2", "temp"], "scales": [1, 1, 0.01],
            }
        },
        "llap": {
            "XX": {"node": "room1", "key": nodes["room1"][1], "names": {"TMPA": "temperature"}}
        },
    }  # fmt: skip


def test_gateway_posts_each_nodes_readings_with_its_key(live_server, nodes, redis_client):
    gateway = Gateway(parse_config(config_doc(live_server.url, nodes)))
    for line in LINES:
        gateway.feed_line(line, now=1_700_000_000)
    assert gateway.flush() == 2
    s = gateway.stats
    assert (s.unparseable, s.unknown_radio_nodes, s.readings) == (3, 1, 3)
    batches = {node_pk: rows for node_pk, rows in queued_batches(redis_client)}
    assert batches[nodes["emontx1"][0].pk] == [
        [1_700_000_000, {"power1": 120.0, "power2": 300.0, "temp": 15.0}]
    ]
    assert batches[nodes["room1"][0].pk] == [[1_700_000_000, {"temperature": 22.5, "BATT": 3.05}]]


def test_unreachable_server_keeps_rows_for_the_next_flush(nodes, redis_client):
    gateway = Gateway(parse_config(config_doc("http://127.0.0.1:9", nodes)))
    gateway.poster = HttpPoster("http://127.0.0.1:9", timeout_s=1)
    gateway.feed_line("OK 10 1 0 2 0 3 0")
    assert gateway.flush() == 0
    assert gateway.pending_rows == 1 and gateway.stats.failed_posts == 1


def test_refused_rows_are_dropped_not_retried(live_server, nodes, redis_client):
    doc = config_doc(live_server.url, nodes)
    doc["jeelib"]["10"]["key"] = "f" * 32  # wrong key: 401
    gateway = Gateway(parse_config(doc))
    gateway.feed_line("OK 10 1 0")
    assert gateway.flush() == 0
    assert gateway.pending_rows == 0 and gateway.stats.dropped_rows == 1


def test_command_reads_a_file(live_server, nodes, redis_client, tmp_path, capsys):
    config = tmp_path / "gateway.json"
    config.write_text(json.dumps(config_doc(live_server.url, nodes)))
    lines = tmp_path / "serial.log"
    lines.write_text("".join(LINES))
    call_command("bms_gateway", "--config", str(config), "--file", str(lines))
    out = capsys.readouterr().out
    assert "3 unparseable" in out and "0 rows not delivered" in out
    assert {pk for pk, _ in queued_batches(redis_client)} == {n.pk for n, _ in nodes.values()}


def test_command_refuses_a_bad_config(tmp_path):
    config = tmp_path / "gateway.json"
    config.write_text('{"jeelib": {"10": {"node": "x", "key": "short"}}}')
    with pytest.raises(CommandError, match="jeelib.10.key"):
        call_command("bms_gateway", "--config", str(config), "--file", str(config))


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ([], "JSON object"),
        ({"url": "ftp://x"}, "url"),
        ({"jeelib": {"40": {}}}, "0-31"),
        ({"llap": {"ABC": {}}}, "2 characters"),
        ({"jeelib": {"1": {"node": "n", "key": "k" * 32, "datacodes": "z"}}}, "datacodes"),
        ({"jeelib": {"1": {"node": "n", "key": "k" * 32, "scales": ["x"]}}}, "scales"),
    ],
)
def test_config_validation(doc, message):
    with pytest.raises(GatewayConfigError, match=message):
        parse_config(doc)
