"""emoncms paths and /api/v1/feeds/ data endpoints: parameters, shapes, who may read."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from knox.models import AuthToken
from rest_framework.test import APIClient

from feeds.models import Feed
from feeds.store import service

pytestmark = pytest.mark.django_db
T0 = 1_700_000_000  # a multiple of 10


@pytest.fixture
def feeds(feed_dir, redis_client):
    public = Feed.objects.create(name="pv", interval=10, public=True)
    private = Feed.objects.create(name="boiler", interval=10)
    service.log_points([(public.id, T0 + 10 * i, float(i)) for i in range(6)])
    service.log_points([(private.id, T0 + 10 * i, 100.0 + i) for i in range(6)])
    service.commit_all(now=T0 + 100)
    service.log_points([(public.id, T0 + 60, 6.0)])  # buffered, not committed
    return public, private


@pytest.fixture
def roleless_api(db):
    user = User.objects.create_user("nobody", password="pw")
    client = APIClient()
    client.force_authenticate(user)
    return client


def data_url(feed, **params):
    params = {"id": feed.id, "start": T0, "end": T0 + 60, **params}
    return "/feed/data.json?" + "&".join(f"{k}={v}" for k, v in params.items())


def test_data_json_returns_emoncms_points_including_buffered_ones(anon_api, feeds):
    public, _ = feeds
    response = anon_api.get(data_url(public, interval=10))
    assert response.status_code == 200
    assert response.json() == [[(T0 + 10 * i) * 1000, float(i)] for i in range(7)]


def test_data_json_accepts_milliseconds_average_and_unix_timeformat(anon_api, feeds):
    public, _ = feeds
    url = data_url(public, start=T0 * 1000, end=(T0 + 59) * 1000, interval=30, average=1,
                   timeformat="unix")  # fmt: skip
    # 30 s windows from start itself, as emoncms's engine: slots 0-2 and 3-5
    assert anon_api.get(url).json() == [[T0, 1.0], [T0 + 30, 4.0]]


def test_data_json_default_interval_gives_about_800_points_as_emoncms(anon_api, feeds):
    public, _ = feeds
    # a minute / 800 rounds to 0 s: every second, from start
    assert len(anon_api.get(data_url(public)).json()) == 61
    day = anon_api.get(data_url(public, end=T0 + 86_400)).json()
    assert len(day) == 801 and day[1][0] - day[0][0] == 108_000  # round(86400 / 800) s


def test_data_json_with_ids_returns_one_series_per_feed(engineer_api, feeds):
    public, private = feeds
    url = f"/feed/data.json?ids={public.id},{private.id}&start={T0}&end={T0 + 10}&interval=10"
    body = engineer_api.get(url).json()
    assert body == [
        {"feedid": public.id, "data": [[T0 * 1000, 0.0], [(T0 + 10) * 1000, 1.0]]},
        {"feedid": private.id, "data": [[T0 * 1000, 100.0], [(T0 + 10) * 1000, 101.0]]},
    ]


def test_daily_interval_and_delta_and_skipmissing(engineer_api, feeds):
    public, _ = feeds
    day = T0 // 86400 * 86400
    url = data_url(public, interval="daily", average=1, timezone="UTC")
    assert engineer_api.get(url).json() == [[day * 1000, 3.0]]  # mean of 0..6
    # no day before with data: the delta is null, and skipmissing drops it
    url = data_url(public, interval="daily", delta=1, timezone="UTC")
    assert engineer_api.get(url).json() == [[day * 1000, None]]
    url = data_url(public, interval="daily", delta=1, skipmissing=1, timezone="UTC")
    assert engineer_api.get(url).json() == []


@pytest.mark.parametrize(
    ("params", "param"),
    [
        ({"id": "abc"}, "id"),
        ({"id": "0"}, "id"),
        ({"id": ""}, "id"),
        ({"start": "the day before"}, "start"),
        ({"start": ""}, "start"),
        ({"start": "-5"}, "start"),
        ({"end": "nan"}, "end"),
        ({"end": str(T0 - 100)}, "end"),
        ({"end": "99999999999999999"}, "end"),
        ({"interval": "hourly"}, "interval"),
        ({"interval": "4294967296"}, "interval"),
        ({"interval": "1", "end": str(T0 + 10 * 86400)}, "interval"),  # too many points
        ({"average": "maybe"}, "average"),
        ({"delta": "2"}, "delta"),
        ({"skipmissing": "x"}, "skipmissing"),
        ({"timeformat": "rfc2822"}, "timeformat"),
        ({"timezone": "Mars/Olympus"}, "timezone"),
    ],
)
def test_bad_parameters_get_400_naming_the_parameter(engineer_api, feeds, params, param):
    public, _ = feeds
    for url in (data_url(public, **params), _api_url(public, params)):
        if url is None:
            continue
        response = engineer_api.get(url)
        assert response.status_code == 400, (url, response.content)
        body = response.json()
        assert body["error"].startswith(f"{param}:"), body
        assert param in body["fields"]


def _api_url(feed, params):
    if "id" in params:
        return None  # the id is in the path there
    merged = {"start": T0, "end": T0 + 60, **params}
    return f"/api/v1/feeds/{feed.id}/data?" + "&".join(f"{k}={v}" for k, v in merged.items())


def test_missing_id_and_bad_ids_are_named(engineer_api, feeds):
    assert (
        engineer_api.get(f"/feed/data.json?start={T0}&end={T0}").json()["error"].startswith("id:")
    )
    body = engineer_api.get(f"/feed/data.json?ids=1,x&start={T0}&end={T0}").json()
    assert body["error"].startswith("ids:")
    body = engineer_api.get(f"/api/v1/feeds/data?start={T0}&end={T0}").json()
    assert body["error"].startswith("ids:")
    many = ",".join(str(i) for i in range(1, 60))
    body = engineer_api.get(f"/feed/data.json?ids={many}&start={T0}&end={T0}").json()
    assert body["error"].startswith("ids:")
    assert engineer_api.get("/feed/timevalue.json").json()["error"].startswith("id:")


# --- who may read -------------------------------------------------------------------------


def test_anonymous_reads_a_public_feed_but_not_a_private_one(anon_api, feeds):
    public, private = feeds
    assert anon_api.get(data_url(public)).status_code == 200
    for url in (data_url(private), f"/feed/timevalue.json?id={private.id}",
                f"/api/v1/feeds/{private.id}/data?start={T0}&end={T0 + 60}",
                f"/api/v1/feeds/{private.id}/timevalue",
                f"/api/v1/feeds/data?ids={public.id},{private.id}&start={T0}&end={T0}"):  # fmt: skip
        response = anon_api.get(url)
        assert response.status_code == 401, url
        assert "100" not in response.content.decode()  # no data leaks


def test_a_private_feed_and_a_missing_feed_look_the_same_to_outsiders(
    anon_api, roleless_api, feeds
):
    _, private = feeds
    for client, status in ((anon_api, 401), (roleless_api, 403)):
        hidden = client.get(f"/feed/timevalue.json?id={private.id}")
        missing = client.get("/feed/timevalue.json?id=999999")
        assert hidden.status_code == missing.status_code == status
        assert hidden.json()["error"].replace(str(private.id), "N") == missing.json()[
            "error"
        ].replace("999999", "N")


def test_staff_of_every_role_read_private_feeds_and_get_404_for_missing(
    engineer_api, booker_api, viewer_api, superuser, feeds
):
    _, private = feeds
    root = APIClient()
    root.force_authenticate(superuser)
    for client in (engineer_api, booker_api, viewer_api, root):
        assert client.get(data_url(private)).json()[0] == [T0 * 1000, 100.0]
        assert client.get("/feed/timevalue.json?id=999999").status_code == 404


def test_list_json_shows_public_feeds_to_anonymous_and_all_to_staff(anon_api, viewer_api, feeds):
    public, private = feeds
    anon = anon_api.get("/feed/list.json").json()
    assert [f["id"] for f in anon] == [str(public.id)]  # emoncms: ids as strings
    assert anon[0]["time"] == T0 + 60 and anon[0]["value"] == 6.0
    assert anon[0]["engine"] == "5" and anon[0]["size"] == str(6 * 4)
    staff = viewer_api.get("/feed/list.json").json()
    assert {f["id"] for f in staff} == {str(public.id), str(private.id)}


def test_timevalue_json_and_api_timevalue(anon_api, feeds):
    public, _ = feeds
    assert anon_api.get(f"/feed/timevalue.json?id={public.id}").json() == {
        "time": T0 + 60,
        "value": 6.0,
    }
    assert anon_api.get(f"/api/v1/feeds/{public.id}/timevalue").json() == {
        "id": public.id,
        "time": T0 + 60,
        "value": 6.0,
    }


def test_api_data_endpoints(viewer_api, feeds):
    public, private = feeds
    one = viewer_api.get(f"/api/v1/feeds/{private.id}/data?start={T0}&end={T0 + 10}&interval=10")
    assert one.json() == {"id": private.id, "data": [[T0 * 1000, 100.0], [(T0 + 10) * 1000, 101.0]]}
    many = viewer_api.get(f"/api/v1/feeds/data?ids={public.id},{private.id}&start={T0}&end={T0}")
    assert [s["id"] for s in many.json()] == [public.id, private.id]
    # the CRUD routes still answer beside the data routes
    assert viewer_api.get(f"/api/v1/feeds/{public.id}").json()["name"] == "pv"


def test_an_emoncms_apikey_parameter_authenticates_a_staff_token(viewer, feeds):
    _, private = feeds
    _, token = AuthToken.objects.create(user=viewer)
    client = APIClient()
    assert client.get(data_url(private)).status_code == 401
    assert client.get(data_url(private, apikey=token)).status_code == 200
    assert client.get(data_url(private, apikey="wrong")).status_code == 401


@pytest.mark.parametrize("key", ["\x00", "abc\x00def", "\x7f"])
def test_a_key_with_control_characters_is_refused_not_a_500(feeds, key):
    """PostgreSQL cannot store or compare a NUL byte: the query used to fail with a 500."""
    _, private = feeds
    client = APIClient()
    # A NUL anywhere in the query string is refused before any view (core/nul_bytes.py).
    in_query = 400 if "\x00" in key else 401
    assert client.get(data_url(private, apikey=key)).status_code == in_query
    assert client.get("/feed/list.json", {"apikey": key}).status_code == in_query
    header = client.get("/api/v1/feeds/", HTTP_AUTHORIZATION=f"Token {key}")
    assert header.status_code == 401


def test_the_schema_documents_the_data_endpoints(engineer_api):
    schema = engineer_api.get("/api/schema/?format=json").json()
    paths = schema["paths"]
    assert "/api/v1/feeds/{id}/data" in paths
    params = {p["name"] for p in paths["/api/v1/feeds/{id}/data"]["get"]["parameters"]}
    assert {"start", "end", "interval", "average", "delta", "skipmissing", "timezone"} <= params
    assert "/api/v1/feeds/data" in paths and "/api/v1/feeds/{id}/timevalue" in paths


@pytest.mark.parametrize("offset", [str(2**63), "9" * 40])
def test_an_offset_beyond_the_database_is_a_400_naming_it(viewer_api, offset):
    """PostgreSQL's OFFSET is a bigint: a larger one was a 500 (found by schemathesis)."""
    response = viewer_api.get("/api/v1/feeds/", {"offset": offset})
    assert response.status_code == 400
    assert "offset" in response.json()["fields"]
