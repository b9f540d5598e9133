"""Hand-written fuzz of the emoncms-compatible endpoints over HTTP (Django test client,
in-process): /input/post, /input/bulk, /api/v1/readings, /feed/*.json, /kiosk/*.

Parameters are drawn from values known to break parsers (inf, nan, 1e999, 400-digit integers,
directory names as time zones, NUL bytes, very long strings) mixed with random text.
Asserted for every request: no 5xx, and a 4xx from a JSON endpoint is JSON with an "error"
message. How fast is bench/'s question, not a test's (#24).
"""

from __future__ import annotations

import json
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from displays.models import Display
from feeds.models import Feed
from sensors import cache
from sensors.models import Node
from tests.fuzz.profiles import FUZZ
from tests.wsgi_client import WsgiClient as Client

NASTY = ["", " ", "0", "-1", "1", "inf", "-inf", "nan", "NaN", "1e999", "1" + "0" * 400,
         "9" * 25, "1.5", "0x10", "Europe", "Europe/London", "a" * 300, "\x00", "é", "[]",
         "{}", "null", "true", "daily", "weekly", "monthly", "2024-01-01T00:00:00Z", "<script>",
         "../../etc/passwd", ",", "1,2,3", "%00"]  # fmt: skip
values = st.one_of(
    st.sampled_from(NASTY),
    st.text(max_size=40),
    st.integers(-(10**12), 10**12).map(str),
    st.floats().map(str),
)


def _params(names: list[str]) -> st.SearchStrategy[dict[str, str]]:
    return st.dictionaries(st.sampled_from(names), values, max_size=len(names))


def _check(response, json_endpoint: bool = True) -> None:
    if getattr(response, "streaming", False):  # CSV and export downloads: read it all
        body = b"".join(response.streaming_content)[:300]
    else:
        body = response.content[:300]
    assert response.status_code < 500, (response.status_code, body)
    if json_endpoint and 400 <= response.status_code < 500 and response.status_code != 405:
        assert "error" in response.json() or "detail" in response.json(), body


@pytest.fixture
def world(db, redis_client):
    cache.clear_all()
    node = Node(name="fuzz-node", node_id=12, interval=10)
    key = node.set_new_key()
    node.save()
    other = Node(name="other-node", node_id=13)
    other.set_new_key()
    other.save()
    public = Feed.objects.create(name="pub", tag="fuzz", interval=10, public=True)
    Feed.objects.create(name="private", tag="fuzz", interval=10)
    Display.objects.create(slug="fuzz", title="Fuzz", public=True)
    Display.objects.create(slug="secret", title="Secret", public=False)
    yield {"key": key, "feed": public.id}
    cache.clear_all()


INPUT_NAMES = ["node", "fulljson", "json", "csv", "data", "time", "sentat", "offset", "apikey",
               "devicekey", "cb"]  # fmt: skip


@FUZZ
@given(
    path=st.sampled_from(["/input/post", "/input/post.json", "/input/bulk", "/input/bulk.json"]),
    method=st.sampled_from(["get", "post"]),
    params=_params(INPUT_NAMES),
    use_key=st.sampled_from(["good", "bad", "none"]),
)
def test_input_endpoints(world, path, method, params, use_key):
    if use_key == "good":
        params = {**params, "apikey": world["key"]}
    elif use_key == "bad":
        params = {**params, "apikey": "0" * 32}
    client = Client()
    if method == "get":
        response = client.get(path, params)
    else:
        response = client.post(path, params)
    _check(response, json_endpoint=response.status_code != 200)


@FUZZ
@given(body=st.binary(max_size=400), compressed=st.booleans())
def test_input_bulk_raw_bodies(world, body, compressed):
    """Raw (and zlib-compressed, cb=1) bodies, as emonhub sends them."""
    client = Client()
    if compressed:
        body = zlib.compress(body)
    response = client.post(
        "/input/bulk" + ("?cb=1" if compressed else ""),
        body,
        content_type="application/x-www-form-urlencoded",
        HTTP_AUTHORIZATION=f"Bearer {world['key']}",
    )
    _check(response, json_endpoint=response.status_code != 200)


readings_json = st.recursive(
    st.one_of(st.sampled_from(NASTY), st.integers(), st.floats(allow_nan=False), st.none()),
    lambda c: st.one_of(st.lists(c, max_size=4), st.dictionaries(
        st.sampled_from(["node", "time", "values", "x", "power"]), c, max_size=4)),
    max_leaves=12,
)  # fmt: skip


@FUZZ
@given(doc=readings_json, raw=st.one_of(st.none(), st.binary(max_size=200)))
def test_readings_bodies(world, doc, raw):
    body = raw if raw is not None else json.dumps(doc).encode()
    response = Client().post(
        "/api/v1/readings", body, content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {world['key']}",
    )  # fmt: skip
    _check(response)


FEED_NAMES = ["id", "ids", "start", "end", "interval", "average", "delta", "skipmissing",
              "timeformat", "timezone", "apikey", "mode", "limitinterval", "csv", "dp", "time",
              "split"]  # fmt: skip


@FUZZ
@given(
    path=st.sampled_from(["/feed/list.json", "/feed/timevalue.json", "/feed/data.json",
                          "/feed/value.json", "/feed/fetch.json", "/feed/export.json",
                          "/feed/csvexport.json", "/api/v1/feeds/data"]),
    params=_params(FEED_NAMES),
    valid_feed=st.booleans(),
)  # fmt: skip
def test_feed_reads(world, path, params, valid_feed):
    if valid_feed:
        params = {"id": str(world["feed"]), "start": "1700000000", "end": "1700086400", **params}
    _check(Client().get(path, params))


EMONCMS_API_NAMES = ["id", "field", "meta", "name", "tag", "engine", "options", "unit", "time",
                     "value", "data", "join", "node", "site", "inputid", "apikey", "start",
                     "end"]  # fmt: skip
PROCESSLISTS = st.one_of(
    st.sampled_from(['[{"fn": "process__log_to_feed", "args": [1]}]', "1:1,2:0.5", "1:", ":",
                     '[{"fn": null, "args": [[]]}]', '[{"fn": "1", "args": ["1e999"]}]',
                     "71:0:1", "35:a/#", "52:99", '[{"fn": "process__scale", "args": {}}]']),
    st.text(max_size=80), st.sampled_from(NASTY),
)  # fmt: skip


@FUZZ
@given(
    path=st.sampled_from(["/feed/getmeta.json", "/feed/get.json", "/feed/aget.json",
                          "/feed/average.json", "/feed/buffersize.json", "/feed/create.json",
                          "/feed/insert.json", "/feed/post.json", "/input/list.json",
                          "/input/get", "/input/get/fuzz-node", "/input/get/fuzz-node/power",
                          "/input/getinputs.json", "/input/process/get.json", "/version",
                          "/describe"]),
    params=_params(EMONCMS_API_NAMES),
    valid_feed=st.booleans(),
)  # fmt: skip
def test_emoncms_api_paths(world, engineer, path, params, valid_feed):
    """An engineer may do everything here: every path is reached, none answers 5xx."""
    if valid_feed:
        params = {"id": str(world["feed"]), "inputid": "1", **params}
    client = Client()
    client.force_login(engineer)
    _check(client.get(path, params), json_endpoint=path not in ("/version", "/describe"))


@FUZZ
@given(processlist=PROCESSLISTS, inputid=st.one_of(st.just("1"), values))
def test_emoncms_process_set(world, engineer, processlist, inputid):
    from sensors.models import Sensor

    Sensor.objects.get_or_create(node=Node.objects.get(name="fuzz-node"), key="power")
    client = Client()
    client.force_login(engineer)
    _check(client.post(f"/input/process/set.json?inputid={inputid}",
                       {"processlist": processlist}))  # fmt: skip


@FUZZ
@given(username=values, password=values)
def test_emoncms_user_auth(world, username, password):
    _check(Client().post("/user/auth.json", {"username": username, "password": password}))


@FUZZ
@given(
    pk=st.one_of(st.sampled_from(["1", "9" * 25, "0", "18446744073709551616"]), st.integers(0, 10**30).map(str)),
    tail=st.sampled_from(["data", "timevalue"]),
    params=_params(FEED_NAMES),
)  # fmt: skip
def test_feed_data_api_paths(world, engineer, pk, tail, params):
    client = Client()
    client.force_login(engineer)
    _check(client.get(f"/api/v1/feeds/{pk}/{tail}", params))


@FUZZ
@given(
    slug=st.one_of(st.sampled_from(["fuzz", "secret", "nope", "a" * 200]),
                   st.from_regex(r"[-a-zA-Z0-9_]{1,60}", fullmatch=True)),
    page=st.sampled_from(["data.json", ""]),
    params=_params(["refresh", "rotate", "every"]),
)  # fmt: skip
def test_kiosk(world, slug, page, params):
    response = Client().get(f"/kiosk/{slug}/{page}", params)
    _check(response, json_endpoint=page == "data.json")
    if slug == "secret":
        # An unpublished kiosk is never shown. A NUL in a parameter is refused (400) before any
        # view runs, whatever the slug (core/nul_bytes.py), so it says nothing about the kiosk.
        nul = any("\x00" in str(v) for v in params.values())
        assert response.status_code == (400 if nul else 404), params


@FUZZ
@given(params=_params(["refresh", "rotate", "every"]))
def test_kiosk_rotation(world, params):
    _check(Client().get("/kiosk/", params), json_endpoint=False)


# --- Regressions for 500s the fuzzing found (fixed) --------------------------------------------


@pytest.mark.parametrize(
    "query",
    [
        {"interval": "inf"},  # int(float("inf")): OverflowError
        {"interval": "1e999"},
        {"interval": "1" + "0" * 30},  # numpy int64 window arithmetic overflowed
        {"timezone": "Europe"},  # a directory: IsADirectoryError
        {"timezone": "a" * 300},  # file name too long: OSError
        {"id": "9" * 25},  # past the database's integer range
    ],
)
@pytest.mark.parametrize("path", ["/feed/data.json", "/api/v1/feeds/data"])
def test_feed_read_parameters_found_by_fuzzing_are_400(world, engineer, path, query):
    client = Client()
    client.force_login(engineer)
    id_param = "id" if path.startswith("/feed/") else "ids"  # the API takes a list
    query = {id_param if k == "id" else k: v for k, v in query.items()}
    params = {id_param: str(world["feed"]), "start": "1700000000", "end": "1700086400", **query}
    response = client.get(path, params)
    assert response.status_code == 400, response.content
    assert set(query) & set(response.json()["fields"]), response.json()


def test_site_time_zone_directory_is_a_400(engineer_api):
    for bad in ("Europe", "a" * 60):
        response = engineer_api.post(
            "/api/v1/sites", {"name": "S", "slug": "s", "time_zone": bad}, format="json"
        )
        assert response.status_code == 400, response.content
        assert "time_zone" in response.json()["fields"]


@pytest.mark.parametrize(
    ("path", "params", "status"),
    [
        # Both skip the value and record it in the node's input errors, as emoncms keeps a
        # post's other values (emonhub resends anything but `ok`): never a 500.
        ("/input/post", {"node": "fuzz-node", "fulljson": '{"power": 1%s}' % ("0" * 400)}, 200),
        ("/input/bulk", {"data": '[[0, "fuzz-node", 1%s]]' % ("0" * 400)}, 200),
    ],
)
def test_huge_integer_value_is_skipped_not_a_500_over_http(world, path, params, status):
    client = Client(raise_request_exception=False)
    response = client.post(path, {**params, "apikey": world["key"]})
    assert response.status_code == status, response.status_code


def test_deleting_a_site_in_use_is_a_409_naming_what_blocks_it(engineer_api):
    """Found by schemathesis: DELETE /api/v1/sites/<id> with nodes raised ProtectedError (500)."""
    from sensors.models import Site

    site = Site.objects.create(name="Busy", slug="busy")
    Node.objects.create(name="busy-node", site=site)
    response = engineer_api.delete(f"/api/v1/sites/{site.pk}")
    assert response.status_code == 409, response.content
    assert "busy-node" in response.json()["error"]
    assert Site.objects.filter(pk=site.pk).exists()
