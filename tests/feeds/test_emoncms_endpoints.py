"""The emoncms feed read endpoints as emoncms answers them: time formats, dp, CSV,
value, fetch, export, Bearer, and a 400 naming the parameter at every bound."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import numpy as np
import pytest
from knox.models import AuthToken
from rest_framework.test import APIClient

from feeds.models import Feed
from feeds.store import phpfina, service

pytestmark = pytest.mark.django_db
LONDON = ZoneInfo("Europe/London")
T0 = int(datetime(2024, 7, 1, 12, tzinfo=LONDON).timestamp())  # summer time: +01:00
VALUES = [0.125, 2.5, None, -0.001, 1234.5678, 7.0]


@pytest.fixture
def feeds(feed_dir, redis_client):
    private = Feed.objects.create(name="boiler", interval=10)
    public = Feed.objects.create(name="pv", interval=10, public=True)
    data = np.array([np.nan if v is None else v for v in VALUES], dtype="<f4")
    (feed_dir / f"{private.id}.meta").write_bytes(phpfina.pack_meta(10, T0))
    (feed_dir / f"{private.id}.dat").write_bytes(data.tobytes())
    service.log_points([(public.id, T0, 42.0)])
    return private, public


def get(client, path, **params):
    return client.get(path, params)


def data(client, feed, **params):
    base = {"id": feed.id, "start": T0, "end": T0 + 50, "interval": 10}
    return get(client, "/feed/data.json", **{**base, **params})


# --- time formats and dp ----------------------------------------------------------------------


def test_time_formats_are_emoncms_s(engineer_api, feeds):
    feed, _ = feeds
    assert data(engineer_api, feed).json()[0] == [T0 * 1000, 0.125]  # unixms by default
    assert data(engineer_api, feed, timeformat="unix").json()[1] == [T0 + 10, 2.5]
    assert data(engineer_api, feed, timeformat="excel").json()[0] == ["01/07/2024 12:00:00", 0.125]
    iso = data(engineer_api, feed, timeformat="iso8601").json()[0]
    assert iso == ["2024-07-01T12:00:00+01:00", 0.125]
    utc = data(engineer_api, feed, timeformat="iso8601", timezone="UTC").json()[0]
    assert utc == ["2024-07-01T11:00:00+00:00", 0.125]
    stored = [None if v is None else float(np.float32(v)) for v in VALUES]  # as the file holds
    assert data(engineer_api, feed, timeformat="notime").json() == stored


def test_dp_rounds_half_away_from_zero_as_php(engineer_api, feeds):
    feed, _ = feeds
    body = data(engineer_api, feed, dp=2, timeformat="notime").json()
    assert body == [0.13, 2.5, None, -0.0, 1234.57, 7.0]  # Python's round(0.125, 2) is 0.12
    assert data(engineer_api, feed, dp=0, timeformat="notime").json()[1] == 3.0


# --- CSV --------------------------------------------------------------------------------------


def _csv(response) -> str:
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/csv")
    return b"".join(response.streaming_content).decode()


def test_csv_is_emoncms_s_engine_csv(engineer_api, feeds):
    feed, _ = feeds
    response = data(engineer_api, feed, csv=1)
    assert f'filename="{feed.id}.csv"' in response["Content-Disposition"]
    lines = _csv(response).splitlines()
    # times in unix seconds even though unixms is the default; 2 decimals; null; never -0.00
    assert lines == [f"{T0},0.13", f"{T0 + 10},2.50", f"{T0 + 20},null", f"{T0 + 30},0.00",
                     f"{T0 + 40},1234.57", f"{T0 + 50},7.00"]  # fmt: skip
    excel = _csv(data(engineer_api, feed, csv=1, timeformat="excel", skipmissing=1))
    assert excel.splitlines()[:3] == ["01/07/2024 12:00:00,0.13", "01/07/2024 12:00:10,2.50",
                                      "01/07/2024 12:00:30,0.00"]  # fmt: skip


def test_csvexport_is_data_with_csv(engineer_api, feeds):
    feed, _ = feeds
    params = {"id": feed.id, "start": T0, "end": T0 + 50, "interval": 10}
    assert _csv(get(engineer_api, "/feed/csvexport.json", **params)) == _csv(
        data(engineer_api, feed, csv=1)
    )


def test_csv_of_several_feeds_has_one_column_each(engineer_api, feeds):
    private, public = feeds
    params = {"ids": f"{private.id},{public.id}", "start": T0, "end": T0 + 10, "interval": 10,
              "timeformat": "unix"}  # fmt: skip
    text = _csv(get(engineer_api, "/feed/csvexport.json", **params))
    assert text.splitlines() == [f"{T0},0.13,42.00", f"{T0 + 10},2.50,null"]


def test_csv_rows_are_bounded(engineer_api, feeds, settings):
    feed, _ = feeds
    settings.BMS_FEED_MAX_CSV_ROWS = 100
    assert data(engineer_api, feed, csv=1, end=T0 + 990).status_code == 200  # 100 rows
    response = data(engineer_api, feed, csv=1, end=T0 + 1000)  # 101 rows
    assert response.status_code == 400
    assert response.json()["error"].startswith("interval:") and "rows" in response.json()["error"]


# --- value, fetch, export -----------------------------------------------------------------------


def test_value_is_the_last_value_or_the_slot_nearest_a_time(engineer_api, feeds):
    private, public = feeds
    service.log_points([(private.id, T0 + 60, 8.0)])  # buffered: the last value
    assert get(engineer_api, "/feed/value.json", id=private.id).json() == 8.0
    assert get(engineer_api, "/feed/value.json", id=private.id, time=T0 + 14).json() == 2.5
    # round(2.5) is 3 in PHP (2 in Python): slot 3
    assert get(engineer_api, "/feed/value.json", id=private.id, time=T0 + 25).json() == float(
        np.float32(-0.001)
    )
    assert get(engineer_api, "/feed/value.json", id=private.id, time=T0 + 21).json() is None
    assert get(engineer_api, "/feed/value.json", id=private.id, time=T0 + 58).json() == 8.0
    assert get(engineer_api, "/feed/value.json", id=private.id, time=T0 - 100).json() is None
    assert get(APIClient(), "/feed/value.json", id=public.id).json() == 42.0
    assert get(APIClient(), "/feed/value.json", id=private.id).status_code == 401
    for when in ("soon", "-1", str(2**32), "9" * 30):
        bad = get(engineer_api, "/feed/value.json", id=private.id, time=when)
        assert bad.status_code == 400 and bad.json()["error"].startswith("time:"), when


def test_fetch_answers_each_id_in_order_false_for_missing_or_unreadable(engineer_api, feeds):
    private, public = feeds
    ids = f"{public.id},999999,{private.id},{public.id}"
    # the private feed's last value is its file's last slot (nothing of it in Redis)
    assert get(engineer_api, "/feed/fetch.json", ids=ids).json() == [42.0, False, 7.0, 42.0]
    # anonymous: the private feed looks exactly like a missing one
    assert get(APIClient(), "/feed/fetch.json", ids=ids).json() == [42.0, False, False, 42.0]
    many = ",".join(str(i) for i in range(1, 52))
    for bad in ("", "1,x", many):
        response = get(engineer_api, "/feed/fetch.json", ids=bad)
        assert response.status_code == 400 and response.json()["error"].startswith("ids:")


def test_export_streams_the_dat_from_a_byte_offset_as_emoncms(engineer_api, feeds, feed_dir):
    private, _ = feeds
    raw = (feed_dir / f"{private.id}.dat").read_bytes()

    def export(start):
        response = get(engineer_api, "/feed/export.json", id=private.id, start=start)
        assert response.status_code == 200
        assert response["Content-Type"] == "application/octet-stream"
        return b"".join(response.streaming_content)

    assert export(0) == raw
    assert export(3) == raw  # under one value: from the start
    assert export(10) == raw[4:]  # down to 8, then one value back (it will be updated)
    assert export(24) == raw[20:]
    assert export(10**12) == b""
    for bad in ("-4", "x", str(2**62 + 1)):
        response = get(engineer_api, "/feed/export.json", id=private.id, start=bad)
        assert response.status_code == 400 and response.json()["error"].startswith("start:")
    assert get(APIClient(), "/feed/export.json", id=private.id).status_code == 401


# --- keys -------------------------------------------------------------------------------------


def test_bearer_key_reads_as_emoncms_clients_send_it(viewer, feeds):
    private, _ = feeds
    _, token = AuthToken.objects.create(user=viewer)
    client = APIClient()
    for path in ("/feed/data.json", "/feed/value.json", "/feed/export.json"):
        params = {"id": private.id, "start": T0, "end": T0 + 10, "interval": 10}
        assert client.get(path, params).status_code == 401, path
        ok = client.get(path, params, HTTP_AUTHORIZATION=f"Bearer {token}")
        assert ok.status_code == 200, path
        wrong = client.get(path, params, HTTP_AUTHORIZATION="Bearer wrong")
        assert wrong.status_code == 401, path
    assert client.get("/feed/list.json", HTTP_AUTHORIZATION="Bearer a b").status_code == 401


# --- parameters -------------------------------------------------------------------------------


def test_ids_answer_feedid_and_data_with_per_feed_average_and_delta(engineer_api, feeds):
    private, public = feeds
    params = {"ids": f"{private.id},{public.id}", "start": T0, "end": T0 + 40, "interval": 20,
              "timeformat": "unix", "average": "1,0"}  # fmt: skip
    body = get(engineer_api, "/feed/data.json", **params).json()
    # emoncms carries average=1 on to the later feeds
    f32 = [float(np.float32(v)) for v in (-0.001, 1234.5678)]
    assert body == [
        {"feedid": private.id, "data": [[T0, 1.3125], [T0 + 20, f32[0]],
                                        [T0 + 40, (f32[1] + 7.0) / 2]]},
        {"feedid": public.id, "data": [[T0, 42.0], [T0 + 20, None], [T0 + 40, None]]},
    ]  # fmt: skip


def test_mode_is_an_alias_of_interval_and_original_is_the_feeds(engineer_api, feeds):
    feed, _ = feeds
    a = data(engineer_api, feed, interval=600, mode="original", timeformat="unix").json()
    assert [t for t, _ in a] == [T0 + 10 * i for i in range(6)]


@pytest.mark.parametrize(
    ("params", "param"),
    [
        ({"end": str(T0)}, "end"),  # emoncms: end must be after start
        ({"interval": "hourly"}, "interval"),
        ({"interval": "inf"}, "interval"),
        ({"mode": "fortnightly"}, "mode"),
        ({"interval": "1", "end": str(T0 + 86_400)}, "interval"),  # 86,401 points
        ({"interval": "daily", "end": str(T0 + 60 * 366 * 86_400)}, "interval"),
        ({"timeformat": "rfc2822"}, "timeformat"),
        ({"dp": "16"}, "dp"),
        ({"dp": "-2"}, "dp"),
        ({"dp": "two"}, "dp"),
        ({"csv": "maybe"}, "csv"),
        ({"limitinterval": "x"}, "limitinterval"),
        ({"average": "1,x"}, "average"),
        ({"split": "[0,7,13]"}, "split"),
        ({"start": "someday"}, "start"),
        ({"timezone": "Mars/Olympus"}, "timezone"),
    ],
)
def test_bad_parameters_get_400_naming_the_parameter(engineer_api, feeds, params, param):
    feed, _ = feeds
    response = data(engineer_api, feed, **params)
    assert response.status_code == 400, response.content
    assert response.json()["error"].startswith(f"{param}:"), response.json()


def test_a_feed_with_no_last_value_in_redis_answers_from_its_file(engineer_api, feeds, feed_dir):
    """An imported feed (files only) or a lost Redis: emoncms's PHPFina::lastvalue, the file's
    last slot, not null."""
    private, _ = feeds
    last_t = T0 + 50
    timevalue = get(engineer_api, "/feed/timevalue.json", id=private.id).json()
    assert timevalue == {"time": last_t, "value": 7.0}
    assert get(engineer_api, "/feed/value.json", id=private.id).json() == 7.0
    assert get(engineer_api, "/feed/fetch.json", ids=private.id).json() == [7.0]
    listed = {int(f["id"]): f for f in get(engineer_api, "/feed/list.json").json()}
    assert (listed[private.id]["time"], listed[private.id]["value"]) == (last_t, 7.0)
    # delta: the sample at T0 + 60, past the file, is that last value (time T0 + 50 is inside)
    body = data(engineer_api, private, start=T0 + 40, end=T0 + 45, interval=20, delta=1,
                timeformat="unix")  # fmt: skip
    assert body.json() == [[T0 + 40, pytest.approx(7.0 - float(np.float32(1234.5678)))]]


def test_start_and_end_may_be_php_date_strings_read_in_the_timezone(engineer_api, feeds,
                                                                     monkeypatch):  # fmt: skip
    feed, _ = feeds
    monkeypatch.setattr("feeds.emoncms.params.now", lambda: T0 + 50 + 3600)  # 13:00:50 London
    body = data(engineer_api, feed, start="-1 hour -1 min", end="now -1 hour",
                timeformat="unix").json()  # fmt: skip
    assert [t for t, _ in body] == [T0 - 10 + 10 * i for i in range(7)]
    # a date is read in `timezone`: 12:00 in London is 11:00 UTC, T0 itself
    body = data(engineer_api, feed, start="2024-07-01 12:00", end="2024-07-01 12:00:20",
                timeformat="unix").json()  # fmt: skip
    assert body[0] == [T0, 0.125]
    utc = data(engineer_api, feed, start="2024-07-01 11:00", end="2024-07-01 11:00:20",
               timezone="UTC", timeformat="unix").json()  # fmt: skip
    assert utc == body
    for bad in (
        "next blue moon",
        "-1 fortnightly",
        "2024-13-01",
        "x" * 65,
        "-1 week " * 10,
        "-999999 weeks -999999 weeks",
        "+999999 days",
        "1969-12-31",
    ):
        response = data(engineer_api, feed, start=bad)
        assert response.status_code == 400, bad
        assert response.json()["error"].startswith("start:")
