"""The emoncms feed paths its clients use beyond the data reads: getmeta, get, aget, list,
timevalue, average, buffersize, create, insert and post, each answered in the shape emoncms
11.16's PHP gives for the same state (file and function cited per test), with emoncms's key
rules from both sides and a 4xx in emoncms's shape at every bound."""

from __future__ import annotations

import json
from datetime import datetime
from zoneinfo import ZoneInfo

import numpy as np
import pytest
from rest_framework.test import APIClient

from core import api_tokens
from feeds.models import Feed
from feeds.store import phpfina, service
from feeds.web.emoncms_feed_views import MAX_INSERT_POINTS
from sensors.models import GatewayKey, Site

pytestmark = pytest.mark.django_db
T0 = int(datetime(2024, 7, 1, 12, tzinfo=ZoneInfo("Europe/London")).timestamp())
VALUES = [0.125, 2.5, None, -0.001, 1234.5678, 7.0]
ROW_KEYS = ["id", "userid", "name", "tag", "public", "size", "engine", "processList", "unit",
            "time", "value"]  # fmt: skip


@pytest.fixture
def feeds(feed_dir, redis_client):
    private = Feed.objects.create(name="boiler", tag="plant", unit="kW", interval=10)
    public = Feed.objects.create(name="pv", interval=10, public=True)
    data = np.array([np.nan if v is None else v for v in VALUES], dtype="<f4")
    (feed_dir / f"{private.id}.meta").write_bytes(phpfina.pack_meta(10, T0))
    (feed_dir / f"{private.id}.dat").write_bytes(data.tobytes())
    service.log_points([(public.id, T0 + 7, 0.1)])  # a point 7 s into its slot
    return private, public


def keyed(user) -> APIClient:
    """A client holding the user's API token as emoncms clients hold their key: `apikey=`."""
    client = APIClient()
    client.credentials()
    client.key = api_tokens.issue(user)[1]
    return client


def get(client: APIClient, path: str, **params):
    key = getattr(client, "key", None)
    return client.get(path, {**params, **({"apikey": key} if key else {})})


def refused(response, status: int, words: str) -> None:
    """emoncms's refusal shape ({"success": false, "message"}) with our status."""
    assert response.status_code == status, response.content
    body = response.json()
    assert body["success"] is False and words in body["message"], body


# --- getmeta: PHPFina::get_meta (Modules/feed/engine/PHPFina.php) -----------------------------


def test_getmeta_answers_the_files_interval_start_npoints_and_end(viewer, feeds):
    private, _ = feeds
    body = get(keyed(viewer), "/feed/getmeta.json", id=private.id).json()
    assert body == {"id": private.id, "interval": 10, "start_time": T0, "npoints": 6,
                    "end_time": T0 + 50}  # fmt: skip


def test_getmeta_of_a_feed_with_no_file_is_emoncms_s_new_feed(engineer_api, feed_dir):
    feed = Feed.objects.create(name="new", interval=60)
    body = engineer_api.get(f"/feed/getmeta.json?id={feed.id}").json()
    assert body == {"id": feed.id, "interval": 60, "start_time": 0, "npoints": 0, "end_time": 0}


def test_getmeta_keys_from_both_sides(anon_api, viewer, feeds):
    private, public = feeds
    refused(anon_api.get(f"/feed/getmeta.json?id={private.id}"), 401, "log in to read it")
    assert anon_api.get(f"/feed/getmeta.json?id={public.id}").status_code == 200  # public
    refused(get(keyed(viewer), "/feed/getmeta.json", id=999999), 404, "Feed does not exist")
    refused(anon_api.get("/feed/getmeta.json?id=abc"), 400, "id")


# --- get (field) and aget: Feed::get_field / Feed::get (feed_model.php) -----------------------


def test_get_answers_one_field_as_emoncms_s_redis_hash_holds_it(viewer, feeds):
    private, _ = feeds
    client = keyed(viewer)
    assert get(client, "/feed/get.json", id=private.id, field="name").json() == "boiler"
    assert get(client, "/feed/get.json", id=private.id, field="public").json() == "0"
    assert get(client, "/feed/get.json", id=private.id, field="engine").json() == "5"
    assert get(client, "/feed/get.json", id=private.id, field="id").json() == str(private.id)
    assert get(client, "/feed/get.json", id=private.id, field="time").json() == T0 + 50
    assert get(client, "/feed/get.json", id=private.id, field="value").json() == 7.0
    # PHP strips characters outside [\w\s-] before the lookup; a field it lacks: false
    assert get(client, "/feed/get.json", id=private.id, field="na'me").json() == "boiler"
    assert get(client, "/feed/get.json", id=private.id, field="colour").json() is False


def test_get_without_field_or_with_a_huge_one_is_a_400(viewer, feeds):
    private, _ = feeds
    refused(get(keyed(viewer), "/feed/get.json", id=private.id), 400, "Missing field parameter")
    assert get(keyed(viewer), "/feed/get.json", id=private.id, field="a" * 64).json() is False
    refused(get(keyed(viewer), "/feed/get.json", id=private.id, field="a" * 65), 400, "field")


def test_aget_is_one_list_row(viewer, feeds):
    private, _ = feeds
    user = viewer
    row = get(keyed(user), "/feed/aget.json", id=private.id).json()
    assert list(row) == ROW_KEYS
    assert row == {"id": str(private.id), "userid": str(user.pk), "name": "boiler",
                   "tag": "plant", "public": "0", "size": str(6 * 4), "engine": "5",
                   "processList": "", "unit": "kW", "time": T0 + 50, "value": 7.0}  # fmt: skip


# --- list and timevalue: the Redis hash and PHPFina::lastvalue --------------------------------


def test_list_ids_are_strings_with_userid_and_emoncms_s_fields(viewer, anon_api, feeds):
    private, public = feeds
    rows = get(keyed(viewer), "/feed/list.json").json()
    assert all(list(r) == ROW_KEYS for r in rows)
    by_id = {r["id"]: r for r in rows}
    assert set(by_id) == {str(private.id), str(public.id)}
    assert by_id[str(public.id)]["userid"] == str(viewer.pk)
    assert by_id[str(public.id)]["public"] == "1"
    anon = anon_api.get("/feed/list.json").json()
    assert [(r["id"], r["userid"]) for r in anon] == [(str(public.id), "0")]


def test_list_with_meta_adds_each_files_meta(viewer, feeds):
    private, _ = feeds
    rows = {r["id"]: r for r in get(keyed(viewer), "/feed/list.json", meta=1).json()}
    row = rows[str(private.id)]
    assert (row["start_time"], row["end_time"], row["interval"], row["npoints"]) == (
        T0, T0 + 50, 10, 6)  # fmt: skip


def test_timevalue_is_the_slot_start_and_the_stored_float32(anon_api, feeds):
    """Posted 0.1 at T0+7 into a 10 s feed: emoncms's lastvalue answers the slot's start (T0)
    and the float32 the file holds (0.10000000149011612), not the reading's time and double."""
    _, public = feeds
    body = anon_api.get(f"/feed/timevalue.json?id={public.id}").json()
    assert body == {"time": T0, "value": float(np.float32(0.1))}
    assert body["value"] != 0.1
    listed = anon_api.get("/feed/list.json").json()[0]
    assert (listed["time"], listed["value"]) == (T0, float(np.float32(0.1)))


# --- average: feed_controller.php, "Backwards compatibility": $average = 1 --------------------


def test_average_json_is_data_json_averaged_whatever_average_says(viewer, feeds):
    private, _ = feeds
    client = keyed(viewer)
    window = {"id": private.id, "start": T0, "end": T0 + 60, "interval": 20}
    averaged = get(client, "/feed/data.json", average=1, **window).json()
    sampled = get(client, "/feed/data.json", **window).json()
    assert averaged != sampled
    assert get(client, "/feed/average.json", **window).json() == averaged
    assert get(client, "/feed/average.json", average=0, **window).json() == averaged
    bad = get(client, "/feed/average.json", id=private.id, start=T0)  # as data.json refuses
    assert bad.status_code == 400 and bad.json()["error"].startswith("end")


# --- buffersize: Feed::get_buffer_size, needs $session['write'] -------------------------------


def test_buffersize_counts_buffered_points_for_a_write_key_only(engineer, viewer, anon_api, feeds):
    _, public = feeds
    service.log_points([(public.id, T0 + 20, 1.0), (public.id, T0 + 30, 2.0)])
    assert get(keyed(engineer), "/feed/buffersize.json").json() == 3
    refused(get(keyed(viewer), "/feed/buffersize.json"), 403, "only read")
    refused(anon_api.get("/feed/buffersize.json"), 401, "apikey")


# --- create: Feed::create ---------------------------------------------------------------------


def test_create_makes_a_phpfina_feed_as_emoncms_answers(engineer, feed_dir):
    client = keyed(engineer)
    body = get(client, "/feed/create.json", tag="emontx", name="use kwh", engine=5,
               options='{"interval":10}', unit="kWh").json()  # fmt: skip
    assert body["success"] is True and body["result"] is True
    feed = Feed.objects.get(pk=body["feedid"])
    assert (feed.tag, feed.name, feed.interval, feed.unit) == ("emontx", "use kwh", 10, "kWh")
    again = get(client, "/feed/create.json", tag="emontx", name="use kwh",
                options='{"interval":10}')  # fmt: skip
    refused(again, 400, "feed already exists")
    assert Feed.objects.count() == 1


@pytest.mark.parametrize(
    ("params", "words"),
    [
        ({"name": "a;b", "options": '{"interval":10}'}, "invalid characters in feed name"),
        (
            {"name": "a", "tag": "<x>", "options": '{"interval":10}'},
            "invalid characters in feed tag",
        ),
        ({"name": "a", "engine": 2, "options": '{"interval":10}'}, "Engine id 2 is not supported"),
        ({"name": "a"}, "options"),
        ({"name": "a", "options": "{"}, "not JSON"),
        ({"name": "a", "options": "[" * 33 + "]" * 33}, "options: JSON nested deeper than 32"),
        ({"name": "a", "options": '{"interval":86401}'}, "1 to 86400"),
        ({"name": "a", "options": '{"interval":0}'}, "1 to 86400"),
        ({"name": "a" * 101, "options": '{"interval":10}'}, "name"),
        ({"name": "", "options": '{"interval":10}'}, "name"),
        ({"name": "a", "unit": "u" * 17, "options": '{"interval":10}'}, "unit"),
    ],
)
def test_create_refuses_bad_input_naming_it(engineer, feed_dir, params, words):
    refused(get(keyed(engineer), "/feed/create.json", **params), 400, words)
    assert not Feed.objects.exists()


def test_create_at_the_bounds(engineer, feed_dir):
    client = keyed(engineer)
    ok = get(client, "/feed/create.json", name="a" * 100, options='{"interval":86400}').json()
    assert ok["success"] is True and Feed.objects.get().interval == 86400


def test_create_needs_a_write_key(viewer, anon_api, feed_dir):
    refused(get(keyed(viewer), "/feed/create.json", name="a", options='{"interval":10}'), 403,
            "only read")  # fmt: skip
    refused(anon_api.get("/feed/create.json?name=a&options={}"), 401, "apikey")
    assert not Feed.objects.exists()


# --- insert / post: Feed::post and Feed::post_multiple -----------------------------------------


def _pending(feed) -> list[tuple[int, float]]:
    return [(int(t), float(v)) for t, v in service.get_buffer().pending(feed.id)[["t", "v"]]]


@pytest.mark.parametrize("path", ["/feed/insert.json", "/feed/post.json"])
def test_insert_one_point_answers_its_value(engineer, feeds, path):
    private, _ = feeds
    assert get(keyed(engineer), path, id=private.id, time=T0 + 60, value="21.5").json() == 21.5
    assert _pending(private) == [(T0 + 60, 21.5)]


def test_insert_many_points_answers_success(engineer, feeds):
    private, _ = feeds
    data = json.dumps([[T0 + 60, 1.5], [T0 + 70, 2]])
    assert get(keyed(engineer), "/feed/insert.json", id=private.id, data=data).json() == {
        "success": True}  # fmt: skip
    key = keyed(engineer).key
    form = APIClient().post(f"/feed/post.json?id={private.id}&apikey={key}",
                            {"data": json.dumps([[T0 + 80, 3.0]])})  # fmt: skip
    assert form.json() == {"success": True}
    assert _pending(private) == [(T0 + 60, 1.5), (T0 + 70, 2.0), (T0 + 80, 3.0)]


def test_insert_at_the_point_bound(engineer, feeds):
    private, public = feeds
    client = keyed(engineer)
    rows = [[T0 + 10 * i, float(i)] for i in range(MAX_INSERT_POINTS)]
    response = APIClient().post(f"/feed/insert.json?id={private.id}&apikey={client.key}",
                                {"data": json.dumps(rows)})  # fmt: skip
    assert response.json() == {"success": True}
    assert len(_pending(private)) == MAX_INSERT_POINTS
    over = APIClient().post(f"/feed/insert.json?id={public.id}&apikey={client.key}",
                            {"data": json.dumps(rows + [[T0, 0.0]])})  # fmt: skip
    refused(over, 400, f"at most {MAX_INSERT_POINTS:,} points")
    assert _pending(public) == [(T0 + 7, pytest.approx(0.1))]  # only the fixture's point


@pytest.mark.parametrize(
    ("params", "words"),
    [
        ({"value": "3.5e38", "time": T0}, "float32"),
        ({"value": "nan", "time": T0}, "value"),
        ({"value": "abc", "time": T0}, "value"),
        ({"value": "1", "time": "soon"}, "time"),
        ({"value": "1", "time": 2**32}, "time"),
        ({"value": "1", "time": 4_000_000_000}, "future"),
        ({"data": "[[1,2],"}, "error decoding json"),
        ({"data": "[]"}, "empty data object"),
        ({"data": "[[1,2,3]]"}, "data[0]"),
        ({"data": f"[[{T0},1],[{T0},1e39]]"}, "data[1]"),
        ({}, "missing data parameter"),
    ],
)
def test_insert_refuses_bad_points_and_writes_none(engineer, feeds, params, words):
    private, _ = feeds
    refused(get(keyed(engineer), "/feed/insert.json", id=private.id, **params), 400, words)
    assert _pending(private) == []


def test_insert_keys_from_both_sides(engineer, viewer, anon_api, feeds, db):
    private, public = feeds
    refused(get(keyed(viewer), "/feed/insert.json", id=public.id, value=1), 403, "only read")
    refused(anon_api.get(f"/feed/insert.json?id={public.id}&value=1"), 401, "apikey")
    # a gateway's write key writes readings of its site's nodes, never a feed directly
    gateway = GatewayKey(site=Site.objects.create(name="B", slug="b"), name="hub")
    gateway_key = gateway.set_new_key()
    gateway.save()
    response = APIClient().get(f"/feed/insert.json?id={public.id}&value=1&apikey={gateway_key}")
    refused(response, 401, "Invalid token")
    bearer = APIClient()
    bearer.credentials(HTTP_AUTHORIZATION=f"Bearer {keyed(engineer).key}")
    assert bearer.get(f"/feed/insert.json?id={private.id}&time={T0 + 60}&value=2").json() == 2.0
    assert _pending(public) == [(T0 + 7, pytest.approx(0.1))]
    refused(get(keyed(engineer), "/feed/insert.json", id=999999, value=1), 404,
            "Feed does not exist")  # fmt: skip


def test_value_and_fetch_answer_the_same_stored_float32_as_timevalue(anon_api, feeds):
    """emoncms answers value.json and fetch.json from the same feed hash as timevalue.json."""
    _, public = feeds
    stored = float(np.float32(0.1))
    assert anon_api.get(f"/feed/value.json?id={public.id}").json() == stored
    assert anon_api.get(f"/feed/fetch.json?ids={public.id}").json() == [stored]
