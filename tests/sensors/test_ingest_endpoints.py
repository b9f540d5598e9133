"""The three ingest endpoints: accepted input is queued as ONE task; bad input gets a 4xx
naming the field or row and queues nothing."""

from __future__ import annotations

import json
import time
import zlib
from urllib.parse import urlencode

import pytest

from alarms.models import Alarm
from sensors.ingest import input_errors
from tests.sensors.conftest import make_node, queued_batches
from tests.wsgi_client import WsgiClient as Client

pytestmark = pytest.mark.django_db

FORM = "application/x-www-form-urlencoded"


@pytest.fixture
def client() -> Client:
    return Client()


def bearer(key: str) -> dict:
    return {"HTTP_AUTHORIZATION": f"Bearer {key}"}


def post_json(client, body, key=None, path="/api/v1/readings"):
    data = body if isinstance(body, str | bytes) else json.dumps(body)
    return client.post(path, data, content_type="application/json", **(bearer(key) if key else {}))


# --- REST /api/v1/readings ------------------------------------------------------------------


def test_single_reading_is_queued_as_one_task(client, node_and_key, redis_client):
    node, key = node_and_key
    now = int(time.time())
    r = post_json(client, {"node": "emontx1", "time": now, "values": {"power1": 120.5}}, key)
    assert r.status_code == 202
    assert r.json() == {"success": True, "rows": 1, "values": 1}
    assert queued_batches(redis_client) == [[node.pk, [[now, {"power1": 120.5}]]]]


def test_batch_without_node_or_time_uses_the_keys_node_and_server_time(
    client, node_and_key, redis_client
):
    node, key = node_and_key
    before = int(time.time())
    r = post_json(
        client, [{"values": {"a": 1}}, {"values": {"b": 2}, "time": "2024-05-01T12:00:00Z"}], key
    )
    assert r.status_code == 202, r.content
    (batch,) = queued_batches(redis_client)
    assert batch[0] == node.pk
    assert batch[1][0][0] >= before and batch[1][0][1] == {"a": 1}
    assert batch[1][1] == [1714564800, {"b": 2}]


def test_radio_node_id_names_the_node(client, node_and_key, redis_client):
    _, key = node_and_key
    assert post_json(client, {"node": 10, "values": {"a": 1}}, key).status_code == 202


@pytest.mark.parametrize(
    ("body", "status", "field", "row"),
    [
        ("{not json", 400, "body", None),
        ("", 400, "body", None),
        ('{"values": {"a": NaN}}', 400, "body", None),
        ({"values": {"a": "12"}}, 400, "values.a", None),
        ({"values": {"a": None}}, 400, "values.a", None),
        ({"values": {"a": True}}, 400, "values.a", None),
        ({"values": {"a": 1e39}}, 400, "values.a", None),
        ({"values": {}}, 400, "values", None),
        ({"values": {"bad key!": 1}}, 400, "values.bad key!", None),
        ({"values": {"a": 1}, "colour": "red"}, 400, "colour", None),
        ({"values": {"a": 1}, "time": 946684799}, 400, "time", None),
        ({"values": {"a": 1}, "time": 4102444800}, 400, "time", None),
        ({"values": {"a": 1}, "time": "yesterday"}, 400, "time", None),
        ({"values": {"a": 1}, "time": "2024-05-01T12:00:00"}, 400, "time", None),
        ([{"values": {"a": 1}}, {"values": {"a": "x"}}], 400, "values.a", 1),
        ([{"values": {"a": 1}}, 7], 400, "body", 1),
        ({"node": "nosuchnode", "values": {"a": 1}}, 403, "node", None),
        ({"node": {"x": 1}, "values": {"a": 1}}, 400, "node", None),
    ],
)
def test_bad_readings_are_refused_and_nothing_is_queued(
    client, node_and_key, redis_client, body, status, field, row
):
    _, key = node_and_key
    r = post_json(client, body, key)
    assert r.status_code == status, r.content
    payload = r.json()
    assert payload["success"] is False and payload["error"]
    assert payload.get("field") == field
    assert payload.get("row") == row
    assert queued_batches(redis_client) == []


def test_missing_wrong_and_other_nodes_keys(client, node_and_key, redis_client):
    _, key = node_and_key
    other, other_key = make_node("emontx2", node_id=11)
    reading = {"node": "emontx1", "values": {"a": 1}}
    assert post_json(client, reading).status_code == 401
    wrong = post_json(client, reading, "0" * 32)
    assert wrong.status_code == 401 and wrong.json()["field"] == "apikey"
    theirs = post_json(client, reading, other_key)
    assert theirs.status_code == 403
    assert "emontx2" in theirs.json()["error"] and theirs.json()["field"] == "node"
    assert queued_batches(redis_client) == []


def test_disabled_node_key_is_refused(client, node_and_key, redis_client):
    node, key = node_and_key
    node.enabled = False
    node.save()
    assert post_json(client, {"values": {"a": 1}}, key).status_code == 401


def test_too_many_rows_and_oversized_body(client, node_and_key, redis_client, settings):
    _, key = node_and_key
    settings.BMS_INGEST_MAX_ROWS = 3
    r = post_json(client, [{"values": {"a": i}} for i in range(4)], key)
    assert r.status_code == 413 and "too many" in r.json()["error"]
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1000
    r = post_json(client, {"values": {f"k{i}": i for i in range(200)}}, key)
    assert r.status_code == 413 and r.json()["field"] == "body"
    assert queued_batches(redis_client) == []


def test_get_is_not_allowed(client, node_and_key):
    _, key = node_and_key
    assert client.get("/api/v1/readings", **bearer(key)).status_code == 405


# --- emoncms /input/post ---------------------------------------------------------------------


def test_input_post_csv_json_and_fulljson(client, node_and_key, redis_client):
    node, key = node_and_key
    t = int(time.time()) - 5
    r = client.get(
        "/input/post", {"node": "emontx1", "csv": "100,200.5,-3", "time": t, "apikey": key}
    )
    assert r.status_code == 200 and r.content == b"ok"
    r = client.post(
        "/input/post.json", {"node": 10, "json": "{power1:100,temp:21.5}", "apikey": key}
    )
    assert r.content == b"ok"
    r = client.post(
        "/input/post", {"fulljson": json.dumps({"power1": 5, "time": t})}, **bearer(key)
    )
    assert r.json() == {"success": True}
    batches = queued_batches(redis_client)
    assert batches[0] == [node.pk, [[t, {"1": 100.0, "2": 200.5, "3": -3.0}]]]
    assert batches[1][1][0][1] == {"power1": 100.0, "temp": 21.5}
    assert batches[2][1] == [[t, {"power1": 5}]]


def test_input_post_accepts_devicekey(client, node_and_key, redis_client):
    _, key = node_and_key
    assert client.get("/input/post", {"csv": "1", "devicekey": key}).content == b"ok"


@pytest.mark.parametrize(
    ("params", "status", "field"),
    [
        ({"fulljson": "{power1: 1}"}, 400, "fulljson"),
        ({"fulljson": "[1, 2]"}, 400, "fulljson"),
        ({"node": "emontx1"}, 400, "fulljson|json|csv|data"),
        ({"csv": "1", "time": "soon"}, 400, "time"),
        ({"csv": "1", "time": "12"}, 400, "time"),
        ({"csv": "1", "node": "ghost"}, 403, "node"),
    ],
)
def test_input_post_bad_input(client, node_and_key, redis_client, params, status, field):
    _, key = node_and_key
    r = client.post("/input/post", {**params, "apikey": key})
    assert r.status_code == status, r.content
    assert r.json()["field"] == field and r.json()["success"] is False
    assert queued_batches(redis_client) == []


def test_input_post_without_key_is_401_json(client, node_and_key):
    r = client.get("/input/post", {"csv": "1"})
    assert r.status_code == 401 and r.json()["field"] == "apikey"


# --- emoncms /input/bulk ---------------------------------------------------------------------


def test_bulk_as_emonhub_posts_it_with_sentat(client, node_and_key, redis_client):
    """emonhub: body `data=...&sentat=...` (unencoded JSON), apikey in the query or form."""
    node, key = node_and_key
    hub_now = 1_700_000_000  # the hub's clock is far behind the server's
    data = [[hub_now - 20, 10, 100, 200, -40], [hub_now - 10, 10, 110, None, {"temp": 21.5}]]
    body = f"data={json.dumps(data, separators=(',', ':'))}&sentat={hub_now}&apikey={key}"
    before = int(time.time())
    r = client.post("/input/bulk.json", body, content_type=FORM)
    assert r.status_code == 200 and r.content == b"ok"
    ((node_pk, rows),) = queued_batches(redis_client)
    assert node_pk == node.pk
    # t + (server now - sentat): the rows were sent 20 s and 10 s before the post.
    assert before - 20 <= rows[0][0] <= before - 19 + 1
    assert rows[1][0] - rows[0][0] == 10
    assert rows[0][1] == {"1": 100, "2": 200, "3": -40}
    # A null is 0 at its position (emoncms's (float) null): the object's name takes no index.
    assert rows[1][1] == {"1": 110, "2": 0.0, "temp": 21.5}


def test_bulk_time_and_legacy_references(client, node_and_key, redis_client):
    _, key = node_and_key
    base = int(time.time()) - 100
    client.post("/input/bulk", {"data": "[[0,10,1],[5,10,2]]", "time": base, "apikey": key})
    client.post("/input/bulk", {"data": "[[0,10,1],[4,10,2]]", "apikey": key})
    now = int(time.time())
    first, legacy = queued_batches(redis_client)
    assert [row[0] for row in first[1]] == [base, base + 5]
    # Legacy mode: the last row arrived now.
    assert now - 1 <= legacy[1][1][0] <= now + 1 and legacy[1][0][0] == legacy[1][1][0] - 4


def test_bulk_zlib_body_with_cb(client, node_and_key, redis_client):
    _, key = node_and_key
    t = int(time.time()) - 30
    form = urlencode({"data": json.dumps([[t, "emontx1", 1, 2]]), "time": 0, "apikey": key})
    r = client.post("/input/bulk?cb=1", zlib.compress(form.encode()), content_type=FORM)
    assert r.content == b"ok", r.content
    assert queued_batches(redis_client)[0][1] == [[t, {"1": 1, "2": 2}]]


@pytest.mark.parametrize(
    ("data", "extra", "status", "field", "row"),
    [
        ("[[1,2", {}, 400, "data", None),
        ("[]", {}, 400, "data", None),
        ("{}", {}, 400, "data", None),
        ("[[0,10,1]]", {"sentat": "noon"}, 400, "sentat", None),
        ("[[0,10,1],[1,99,1]]", {"time": "1700000000"}, 403, "node", 1),
        ("[[0,10,1],[1,11,1]]", {"time": "1700000000"}, 403, "node", 1),
    ],
)
def test_bulk_refused_whole(client, node_and_key, redis_client, data, extra, status, field, row):
    """What emoncms answers with an error too (emonhub never sends it), and a node key writing
    another node (our rule: a hub uses a gateway key)."""
    _, key = node_and_key
    make_node("emontx2", node_id=11)
    r = client.post("/input/bulk", {"data": data, "apikey": key, **extra})
    assert r.status_code == status, r.content
    body = r.json()
    assert body["success"] is False and body.get("field") == field and body.get("row") == row
    assert queued_batches(redis_client) == []


T0 = 1_700_000_000


@pytest.mark.parametrize(
    ("data", "extra", "kept", "skipped"),
    [
        # A row too short to hold a value is passed over without a record (emoncms: count <= 2).
        ("[[0,10,1],[5]]", {"time": str(T0)}, [[T0, {"1": 1.0}]], []),
        ('[[0,10,1],["x",10,1]]', {"time": str(T0)}, [[T0, {"1": 1.0}]], ["row 1 data[0]"]),
        (
            '[[0,10,1],[1,10,"abc",2]]',
            {"time": str(T0)},
            [[T0, {"1": 1.0}], [T0 + 1, {"2": 2.0}]],
            ["row 1 data[2] (input 1): text 'abc'"],
        ),
        (
            # as emoncms: true is 1, null is 0, numeric text its number; "" and [1] skipped
            '[[0,10,1],[1,10,NaN,true,null,"",[1],"2.5"]]',
            {"time": str(T0)},
            [[T0, {"1": 1.0}], [T0 + 1, {"2": 1.0, "3": 0.0, "6": 2.5}]],
            ["row 1 data[2]", "row 1 data[5]", "row 1 data[6]"],
        ),
        ("[[0,10,1],[1,{},1]]", {"time": str(T0)}, [[T0, {"1": 1.0}]], ["row 1 data[1]"]),
        ("[[0,10,1],[1,10,1]]", {"time": "12"}, None, ["row 0 data[0]", "row 1 data[0]"]),
        (
            "[[0,10,1],[99999,10,1]]",
            {"time": str(int(time.time()) - 60)},
            "first",
            ["row 1 data[0]: time"],
        ),
    ],
)
def test_bulk_bad_values_are_skipped_and_recorded_and_answered_ok(
    client, node_and_key, redis_client, data, extra, kept, skipped
):
    """emonhub resends anything but `ok` forever: the good values are queued, each bad one is
    counted in the node's input errors and named in its alarm."""
    node, key = node_and_key
    r = client.post("/input/bulk", {"data": data, "apikey": key, **extra})
    assert r.status_code == 200 and r.content == b"ok", r.content
    batches = queued_batches(redis_client)
    if kept is None:
        assert batches == []
    elif kept == "first":
        assert [b[0] for b in batches] == [node.pk] and len(batches[0][1]) == 1
    else:
        assert batches == [[node.pk, kept]]
    record = input_errors.summary(input_errors.node_subject(node.pk))
    alarm = Alarm.objects.filter(key=f"node-input-errors:{node.pk}", cleared_at=None).first()
    if not skipped:
        assert record == {} and alarm is None
        return
    assert int(record["count"]) == len(skipped)
    for text in skipped:
        assert text in record["last"] and text in alarm.message


@pytest.mark.parametrize("text", ["1_000", "١٢٣", "１２", "1_5", "٣٫٥", "0x10", "1 2"])
def test_numbers_written_oddly_are_not_numbers(client, node_and_key, redis_client, text):
    """Found by an outside check: Python's float() read '1_000' as 1000, Arabic-Indic '١٢٣' as
    123 and full-width '１２' as 12, and they were stored. Only ASCII decimal text is a number;
    the rest is skipped, recorded and answered `ok`, as other text is."""
    node, key = node_and_key
    data = json.dumps([[0, 10, 1.5, text]])
    r = client.post("/input/bulk", {"data": data, "apikey": key, "time": str(T0)})
    assert r.status_code == 200 and r.content == b"ok"
    assert queued_batches(redis_client) == [[node.pk, [[T0, {"1": 1.5}]]]]
    record = input_errors.summary(input_errors.node_subject(node.pk))
    assert int(record["count"]) == 1 and "row 0 data[3]" in record["last"]
    # /input/post skips it as any other text: `ok`, nothing more queued, recorded by name
    r = client.get("/input/post", {"node": "emontx1", "csv": text, "apikey": key})
    assert r.status_code == 200 and r.content == b"ok", r.content
    assert len(queued_batches(redis_client)) == 1
    record = input_errors.summary(input_errors.node_subject(node.pk))
    assert int(record["count"]) == 2 and "csv[1]: text" in record["last"]


@pytest.mark.parametrize("text", ["1.5e3", " 12 ", "-3.", ".5", "+7"])
def test_ascii_numeric_text_is_still_a_number(client, node_and_key, redis_client, text):
    node, key = node_and_key
    r = client.post("/input/bulk", {"data": json.dumps([[0, 10, text]]), "apikey": key,
                                    "time": str(T0)})  # fmt: skip
    assert r.status_code == 200 and r.content == b"ok"
    assert queued_batches(redis_client) == [[node.pk, [[T0, {"1": float(text)}]]]]


def test_a_key_sent_with_another_scheme_is_named(client, node_and_key, redis_client):
    """A node key sent as 'Token <key>' was answered "missing node key": it says which scheme
    to use instead (found by an outside check)."""
    _, key = node_and_key
    r = client.post("/api/v1/readings", {"values": {"a": 1}}, content_type="application/json",
                    HTTP_AUTHORIZATION=f"Token {key}")  # fmt: skip
    assert r.status_code == 401 and r.json()["field"] == "apikey"
    assert "scheme 'Token' is not read; send 'Authorization: Bearer <key>'" in r.json()["error"]


def test_a_time_in_other_digits_is_refused(client, node_and_key, redis_client):
    _, key = node_and_key
    r = client.get("/input/post", {"node": "emontx1", "csv": "1", "apikey": key,
                                   "time": "١٧٩٥٦٧٥٠٠٠"})  # fmt: skip
    assert r.status_code == 400 and r.json()["field"] == "time", r.content
    assert queued_batches(redis_client) == []


def test_bulk_too_many_rows(client, node_and_key, redis_client, settings):
    _, key = node_and_key
    settings.BMS_INGEST_MAX_ROWS = 2
    r = client.post("/input/bulk", {"data": "[[0,10,1],[1,10,1],[2,10,1]]", "apikey": key})
    assert r.status_code == 413 and r.json()["field"] == "data"


def test_bulk_corrupt_or_bomb_zlib_body(client, node_and_key, redis_client, settings):
    _, key = node_and_key
    r = client.post(f"/input/bulk?cb=1&apikey={key}", b"not zlib", content_type=FORM)
    assert r.status_code == 400 and r.json()["field"] == "cb"
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000  # decompressed limit is 4x this
    bomb = zlib.compress(b"data=" + b"1" * 100_000)
    r = client.post(f"/input/bulk?cb=1&apikey={key}", bomb, content_type=FORM)
    assert r.status_code == 413 and r.json()["field"] == "cb"
    # The same bomb as hex `data` with `c=1` names `c`.
    r = client.get("/input/bulk.json", {"c": "1", "data": bomb.hex(), "apikey": key})
    assert r.status_code == 413 and r.json()["field"] == "c", r.content
    assert queued_batches(redis_client) == []


def test_bulk_cb_raw_zlib_json_and_c_hex_as_emoncms_reads_them(client, node_and_key, redis_client):
    """emoncms bulk(): `cb` -> the raw body is zlib(JSON), no form; `c` -> `data` is hex of it.
    Names keep spaces and accents (emoncms's [\\p{N}\\p{L}_\\s\\-.]); other characters go."""
    node, key = node_and_key
    t = int(time.time()) - 30
    rows = [[t, "emontx1", {"external temperature": 18.7, "température!": 20.5}, 3]]
    raw = zlib.compress(json.dumps(rows).encode())
    r = client.generic("POST", f"/input/bulk.json?sentat={t}&cb=1", raw, **bearer(key))
    assert r.content == b"ok", r.content
    r = client.get("/input/bulk.json", {"c": "1", "data": raw.hex(), "time": 0, "apikey": key})
    assert r.content == b"ok", r.content
    expected = {"external temperature": 18.7, "température": 20.5, "1": 3.0}
    (first, second) = queued_batches(redis_client)
    assert first[0] == node.pk and first[1][0][1] == expected
    assert abs(first[1][0][0] - int(time.time())) <= 1  # t + (now - sentat), sentat == t
    assert second == [node.pk, [[t, expected]]]
    r = client.get("/input/bulk.json", {"c": "1", "data": "zz", "apikey": key})
    assert r.status_code == 400 and r.json()["field"] == "c"
