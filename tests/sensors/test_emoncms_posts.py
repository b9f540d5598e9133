"""Posts processed as emoncms processes them (issue #26 items 2, 3 and 7), through the real
endpoints, streams, drain, input processes and Redis:

- a post's inputs all take their values before any process list runs, so `add_input` and its
  kin see this post's value of the other input;
- a late, repeated or future-dated reading never stops a process list: the steps after a
  stateful one run, and what it could not count is in the node's input errors; a redelivered
  stream entry is recognised by its id, not by its readings' times;
- `null` is 0 and numeric text its number on /input/post and /input/bulk; other text skips
  that value only; our REST API stays strict.
"""

from __future__ import annotations

import json
import time

import pytest

from feeds.models import Feed
from feeds.store import service
from sensors.ingest import input_errors
from sensors.ingest import stream as stream
from sensors.ingest.drain import Drain, drain_shard
from sensors.ingest.processing import ingest_rows
from sensors.models import Sensor
from tests.sensors.conftest import make_node, queued_batches
from tests.wsgi_client import WsgiClient as Client


@pytest.fixture
def client() -> Client:
    return Client()


def points(feed: Feed) -> list[tuple[int, float]]:
    records = service.get_buffer().pending(feed.pk)
    return sorted(zip(records["t"].tolist(), records["v"].tolist(), strict=True))


def drain(node) -> None:
    report = drain_shard(stream.shard_of(node.pk))
    assert report.dropped == 0 and not report.stopped


def feed(name: str) -> Feed:
    return Feed.objects.create(name=name, tag="test", interval=10)


def sensor(node, key: str, processes: list[dict]) -> Sensor:
    return Sensor.objects.create(node=node, key=key, name=key, processes=processes)


def bulk(client, key: str, rows: list[list]) -> None:
    r = client.post("/input/bulk", {"data": json.dumps(rows), "time": "0", "apikey": key})
    assert r.status_code == 200 and r.content == b"ok", r.content


# --- item 2: a post's values first, then its process lists -----------------------------------


@pytest.mark.parametrize(
    ("process", "expected"),
    [("add_input", 150.0), ("subtract_input", 50.0), ("times_input", 5000.0),
     ("divide_input", 2.0)],
)  # fmt: skip
def test_a_step_reading_another_input_sees_this_posts_value(
    db, redis_client, client, process, expected
):
    """emoncms: fulljson={"power1":100,"ref":50} with add_input ref on power1 logs 150, not
    100 + the previous post's ref."""
    node, key = make_node()
    out = feed("out")
    ref = sensor(node, "ref", [])
    sensor(node, "power1", [{"process": process, "input": ref.pk},
                            {"process": "log_to_feed", "feed": out.pk}])  # fmt: skip
    t = int(time.time()) - 60
    first = {"power1": 100, "ref": 1, "time": t - 10}  # an earlier post with another ref
    client.post("/input/post", {"fulljson": json.dumps(first), "apikey": key})
    drain(node)
    r = client.post("/input/post", {"fulljson": json.dumps({"power1": 100, "ref": 50, "time": t}),
                                    "apikey": key})  # fmt: skip
    assert r.json() == {"success": True}
    drain(node)
    assert points(out)[-1] == (t, pytest.approx(expected))


def test_each_row_of_a_bulk_sees_its_own_values(db, redis_client, client):
    node, key = make_node()
    out = feed("out")
    ref = sensor(node, "ref", [])
    sensor(node, "power1", [{"process": "add_input", "input": ref.pk},
                            {"process": "log_to_feed", "feed": out.pk}])  # fmt: skip
    t = int(time.time()) - 100
    bulk(client, key, [[t, node.node_id, {"power1": 100, "ref": 50}],
                       [t + 10, node.node_id, {"ref": 7, "power1": 200}],
                       [t + 20, node.node_id, {"power1": 300}]])  # fmt: skip
    drain(node)
    # The last row has no ref: it sees the latest one (the row before's 7), as emoncms would.
    assert points(out) == [(t, 150.0), (t + 10, 207.0), (t + 20, 307.0)]


def test_two_posts_at_the_same_second_are_still_two_posts(db, redis_client):
    """Rows of one time from two requests stay apart: the first sees the ref it was sent with."""
    node, _ = make_node()
    out = feed("out")
    ref = sensor(node, "ref", [])
    sensor(node, "power1", [{"process": "add_input", "input": ref.pk},
                            {"process": "log_to_feed", "feed": out.pk}])  # fmt: skip
    t = int(time.time()) - 60
    ingest_rows(node.pk, [[t, {"power1": 100.0, "ref": 50.0}], [t, {"ref": 1.0}]])
    assert points(out) == [(t, 150.0)]


# --- item 3: late, repeated and future-dated readings; redelivery -------------------------------


def energy_node():
    """power1: log it, power_to_kwh, then log it again and scale it onto two more feeds."""
    node, key = make_node()
    feeds = {name: feed(name) for name in ("power", "kwh", "after", "scaled")}
    sensor(
        node,
        "power1",
        [
            {"process": "log_to_feed", "feed": feeds["power"].pk},
            {"process": "power_to_kwh", "feed": feeds["kwh"].pk},
            {"process": "log_to_feed", "feed": feeds["after"].pk},
            {"process": "scale", "arg": 2},
            {"process": "log_to_feed", "feed": feeds["scaled"].pk},
        ],
    )
    return node, key, feeds


def test_a_future_dated_row_does_not_freeze_the_steps_after_power_to_kwh(
    db, redis_client, client, admin_client
):
    """One bulk row 6 minutes ahead used to stop every feed after power_to_kwh for 6 minutes,
    silently, and then the kWh for as long. Now each later reading reaches them and the kWh
    keeps counting as emoncms's does; staff see that the sender's clock jumped back."""
    node, key, feeds = energy_node()
    t = int(time.time()) - 600
    watts = {"power1": 3600}
    bulk(client, key, [[t, node.node_id, watts], [t + 10, node.node_id, watts]])
    drain(node)
    bulk(client, key, [[t + 380, node.node_id, watts]])  # the hub's clock jumped 6 min ahead
    drain(node)
    later = [[t + 20 + 10 * i, node.node_id, watts] for i in range(5)]
    for row in later:  # then normal posts again, one request each, as a hub sends them
        bulk(client, key, [row])
        drain(node)
    normal = [t, t + 10, *(row[0] for row in later)]
    for name in ("power", "after", "scaled"):
        assert [p[0] for p in points(feeds[name])] == sorted([*normal, t + 380]), name
    assert points(feeds["scaled"])[-1] == (t + 380, 7200.0)
    # power_to_kwh counted t..t+10 and t+10..t+380, as emoncms's does. The next reading (t+20)
    # is before that: nothing added, its total written at t+20 and the clock moved back to it,
    # so the readings after it keep counting, 10 s at 3600 W each: 0.01 kWh (emoncms's
    # feed->post sets the feed's time to the reading's, and its power_to_kwh counts from it).
    kwh = dict(points(feeds["kwh"]))
    assert sorted(kwh) == sorted([*normal, t + 380])
    assert kwh[t + 10] == pytest.approx(0.01)
    assert kwh[t + 380] == pytest.approx(0.38)
    assert kwh[t + 20] == pytest.approx(0.38)
    assert [kwh[row[0]] for row in later[1:]] == [
        pytest.approx(0.38 + 0.01 * i) for i in range(1, len(later))
    ]
    record = input_errors.summary(input_errors.node_subject(node.pk))
    assert int(record["count"]) == 1  # only the reading that moved the clock back
    assert (
        f"input power1: reading at {t + 20} is before the last one power_to_kwh processed "
        f"({t + 380}): processed late: its clock moved back to it" in record["last"]
    )
    # processed, not skipped: the node's page says so (it said "1 skipped ... the later steps ran")
    assert input_errors.counted(record) == "1 processed late"
    page = admin_client.get(f"/admin/sensors/node/{node.pk}/change/").content.decode()
    assert "1 processed late, last at" in page, page
    assert "skipped, last at" not in page


def test_a_batch_the_hub_sends_again_is_not_counted_twice(db, redis_client, client):
    """emonhub that got no `ok` (its answer lost) sends the same rows again, in a new request:
    a new stream entry, so the entry mark does not catch it. Since power_to_kwh moves its
    clock back to a late reading (as emoncms's), the resent rows would be counted a second
    time (emoncms's would); the step remembers the times it counted and passes them by."""
    node, key, feeds = energy_node()
    t = int(time.time()) - 600
    first = [[t + 10 * i, node.node_id, {"power1": 3600}] for i in range(5)]
    bulk(client, key, first)
    drain(node)
    bulk(client, key, [[t + 50, node.node_id, {"power1": 3600}]])
    drain(node)
    bulk(client, key, first)  # the same rows again
    drain(node)
    bulk(client, key, [[t + 60, node.node_id, {"power1": 3600}]])
    drain(node)
    kwh = dict(points(feeds["kwh"]))
    assert kwh[t + 60] == pytest.approx(0.06)  # 60 s at 3.6 kW, counted once
    assert max(kwh.values()) == pytest.approx(0.06)
    # Told to staff as what they are, with no alarm: the hub's retry doing its job.
    assert input_errors.summary(input_errors.node_subject(node.pk)) == {"duplicates": "5"}


def test_a_redelivered_entry_is_not_counted_twice(db, redis_client):
    """A drain killed after its chunk's points were buffered but before XACK: the next drain
    takes the entries over (XAUTOCLAIM) and must not count the first ones again, even an
    accumulator's late increment, which counts whenever it arrives."""
    node, _ = make_node()
    total = feed("total")
    sensor(node, "n", [{"process": "accumulator", "feed": total.pk}])
    t = int(time.time()) - 300
    stream.append(node.pk, [[t + 100, {"n": 1.0}]])
    stream.append(node.pk, [[t, {"n": 1.0}]])  # late: older than the entry before it
    stream.append(node.pk, [[t + 110, {"n": 1.0}]])
    shard = stream.shard_of(node.pk)
    dead = Drain(shard, consumer="dead")
    assert dead.acquire()
    taken = dead._read([node.pk])[0][node.pk]
    assert len(taken) == 3
    for entry_id, raw in taken[:2]:  # processed as the drain does, then killed: no XACK
        ingest_rows(node.pk, json.loads(raw), entry=entry_id.decode())
    assert points(total)[-1][1] == 2.0
    redis_client.delete(stream.lease_key(shard))  # its lease ran out

    report = drain_shard(shard, consumer="heir")
    assert report.claimed == 3 and report.already_done == 2 and report.requests == 1
    assert points(total)[-1] == (t + 110, 3.0)  # each increment once, the late one included
    assert redis_client.xlen(stream.stream_key(node.pk)) == 0
    # The same entry processed again by a call that races the drain: nothing happens.
    again = ingest_rows(node.pk, [[t + 110, {"n": 1.0}]], entry=taken[2][0].decode())
    assert again.already_done and points(total)[-1] == (t + 110, 3.0)


# --- item 7: null, numeric text and other text on the emoncms endpoints ---------------------------


T0 = 1_700_000_000


def only_batch(redis_client, node) -> list:
    ((node_pk, rows),) = queued_batches(redis_client)
    assert node_pk == node.pk
    return rows


@pytest.mark.parametrize(
    ("params", "values", "skipped"),
    [
        (
            {"fulljson": json.dumps({"a": None, "b": "23.5", "c": "abc", "d": 5, "e": True})},
            {"a": 0.0, "b": 23.5, "d": 5.0, "e": 1.0},
            "fulljson.c: text 'abc' is not a number",
        ),
        (
            {"csv": "1,null,23.5,abc,5"},
            {"1": 1.0, "2": 0.0, "3": 23.5, "5": 5.0},
            "csv[4]: text 'abc' is not a number",
        ),
        (
            {"json": "{a:null,b:23.5,c:abc,d: 7 }"},
            {"a": 0.0, "b": 23.5, "d": 7.0},
            "json.c: text 'abc' is not a number",
        ),
        ({"csv": "1,nan"}, {"1": 1.0}, "csv[2]: text 'nan' is not a number"),
        ({"fulljson": '{"a": [1], "b": 2}'}, {"b": 2.0}, "fulljson.a: list is not a number"),
    ],
)
def test_input_post_stores_null_as_0_and_numeric_text_and_skips_other_text(
    client, node_and_key, redis_client, params, values, skipped
):
    node, key = node_and_key
    r = client.post("/input/post", {**params, "time": str(T0), "apikey": key})
    assert r.status_code == 200, r.content
    assert only_batch(redis_client, node) == [[T0, values]]
    record = input_errors.summary(input_errors.node_subject(node.pk))
    assert int(record["count"]) == 1 and skipped in record["last"]


def test_input_post_of_only_text_queues_nothing_and_says_so(client, node_and_key, redis_client):
    node, key = node_and_key
    r = client.get("/input/post", {"csv": "abc", "apikey": key})
    assert r.status_code == 200 and r.content == b"ok"
    assert queued_batches(redis_client) == []
    assert "csv[1]" in input_errors.summary(input_errors.node_subject(node.pk))["last"]


def test_input_bulk_stores_null_as_0_and_numeric_text(client, node_and_key, redis_client):
    node, key = node_and_key
    data = [[T0, 10, None, "23.5", 4, {"a": None, "b": " 1.5 ", "c": "abc"}]]
    r = client.post("/input/bulk", {"data": json.dumps(data), "time": "0", "apikey": key})
    assert r.content == b"ok"
    assert only_batch(redis_client, node) == [
        [T0, {"1": 0.0, "2": 23.5, "3": 4.0, "a": 0.0, "b": 1.5}]
    ]
    record = input_errors.summary(input_errors.node_subject(node.pk))
    assert int(record["count"]) == 1 and "row 0 data[5].c: text 'abc'" in record["last"]


@pytest.mark.parametrize("value", [None, "23.5"])
def test_our_rest_api_stays_strict(client, node_and_key, redis_client, value):
    _, key = node_and_key
    r = client.post(
        "/api/v1/readings",
        json.dumps({"values": {"a": value}}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {key}",
    )
    assert r.status_code == 400 and r.json()["field"] == "values.a"
    assert queued_batches(redis_client) == []


@pytest.mark.parametrize("params", [{"csv": "abc"}, {"fulljson": '{"a": "x"}'}, {"csv": "1"}])
def test_a_node_key_naming_another_node_is_refused_whatever_its_values(
    client, node_and_key, redis_client, params
):
    """The node is checked before the values: skipping every value must not turn a 403 into
    `ok` for a post that names another node."""
    _node, key = node_and_key
    r = client.get("/input/post", {**params, "node": "someone-else", "apikey": key})
    assert r.status_code == 403 and b"someone-else" in r.content
    assert queued_batches(redis_client) == []


@pytest.mark.parametrize(
    "rows",
    [
        [[0, "someone-else", "abc"]],
        [[0, "someone-else", {"x": "abc"}]],
        [[0, "someone-else"]],
        [["bad", "someone-else", "abc"]],
        [[0, "mine", 1], [0, "someone-else", "abc"]],
    ],
)
def test_a_node_keys_bulk_naming_another_node_is_refused_whatever_its_values(
    client, node_and_key, redis_client, rows
):
    """Every row that names a node is checked, also rows none of whose values could be used
    (found by an outside tester: those answered `ok`)."""
    node, key = node_and_key
    rows = [[t, node.name if n == "mine" else n, *rest] for t, n, *rest in rows]
    r = client.post("/input/bulk", {"data": json.dumps(rows), "time": "0", "apikey": key})
    assert r.status_code == 403 and b"someone-else" in r.content
    assert queued_batches(redis_client) == []


def test_fulljson_names_lose_the_characters_emoncms_removes_and_keep_their_values(
    client, node_and_key, redis_client
):
    node, key = node_and_key
    doc = f'{{"Power (W)": 120, "temp_\u00b0C": 21.5, "()": 3, "time": {T0}}}'
    r = client.post("/input/post", {"fulljson": doc, "apikey": key})
    assert r.status_code == 200 and r.json() == {"success": True}, r.content
    # As emoncms's input_methods.php: `Power W` and `temp_C`; a name of nothing is skipped.
    assert only_batch(redis_client, node) == [[T0, {"Power W": 120.0, "temp_C": 21.5}]]
    record = input_errors.summary(input_errors.node_subject(node.pk))
    assert int(record["count"]) == 1 and "fulljson.(): input name not usable" in record["last"]


LONG = "9" * 5000  # more digits than Python's int() reads (4,300)


@pytest.mark.parametrize(
    "endpoint,params,values,where",
    [
        (
            "/input/post",
            {"fulljson": f'{{"a": 1, "b": {LONG}, "time": {T0}}}'},
            {"a": 1.0},
            "fulljson.b: a number of 5000 digits",
        ),
        (
            "/input/bulk",
            {"data": f"[[{T0}, 10, 1, {LONG}, 3]]", "time": "0"},
            {"1": 1.0, "3": 3.0},
            "row 0 data[3] (input 2): a number of 5000 digits",
        ),
        (
            "/input/bulk",
            {"data": f'[[{T0}, 10, {{"x": -{LONG}, "y": 2}}]]', "time": "0"},
            {"y": 2.0},
            "row 0 data[2].x: a number of 5000 digits",
        ),
    ],
)
def test_a_5000_digit_number_is_a_skipped_value_not_a_refused_request(
    client, node_and_key, redis_client, endpoint, params, values, where
):
    node, key = node_and_key
    r = client.post(endpoint, {**params, "apikey": key})
    assert r.status_code == 200, r.content
    assert only_batch(redis_client, node) == [[T0, values]]
    record = input_errors.summary(input_errors.node_subject(node.pk))
    assert int(record["count"]) == 1 and where in record["last"]


def test_a_5000_digit_row_time_skips_that_row_only(client, node_and_key, redis_client):
    node, key = node_and_key
    data = f"[[{LONG}, 10, 1], [{T0}, 10, 2]]"
    r = client.post("/input/bulk", {"data": data, "time": "0", "apikey": key})
    assert r.status_code == 200 and r.content == b"ok"
    assert only_batch(redis_client, node) == [[T0, {"1": 2.0}]]
    assert (
        "set_int_max_str_digits"
        not in input_errors.summary(input_errors.node_subject(node.pk))["last"]
    )
