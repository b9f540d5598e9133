"""The inputs page and the process-list editor's save (issue #26 item 10): every node's inputs
with last value and age, stale ones marked; a process list saved through the API's checks,
with feeds created inline, all or nothing, audited; engineers edit, viewers only look (a
hand-made POST too); names escaped; the list and the body bounded."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
import time_machine
from django.contrib.admin.models import ADDITION, LogEntry
from django.test import Client

from feeds.models import Feed
from feeds.processes import catalog
from sensors.ingest import node_state
from sensors.models import Node, Sensor, Site
from staff import process_editor

NOW = datetime(2026, 3, 2, 12, 0, 0, tzinfo=UTC)


def _login(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _node(name: str = "emontx", interval: int = 10, site: Site | None = None) -> Node:
    node = Node(name=name, interval=interval, site=site)
    node.set_new_key()
    node.save()
    return node


@pytest.fixture
def power1(db) -> Sensor:
    return Sensor.objects.create(node=_node(), key="power1", unit="W")


def _save(client: Client, sensor: Sensor, steps: list, based_on: object = None):
    body = {"steps": steps}
    if based_on is not None:
        body["based_on"] = based_on
    return client.post(
        f"/staff/inputs/{sensor.pk}/processes/save",
        json.dumps(body),
        content_type="application/json",
    )


def _reading(redis_client, sensor: Sensor, t: float, value: float) -> None:
    redis_client.hset(node_state.last_key(sensor.node_id), sensor.key, f"{int(t)} {value!r}")


# --- the page --------------------------------------------------------------------------------


def test_anonymous_goes_to_login(client, db):
    for path in ("/staff/inputs/", "/staff/inputs/1/processes/"):
        response = client.get(path)
        assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_an_anonymous_save_goes_to_login_and_changes_nothing(client, power1):
    response = _save(client, power1, [{"process": "scale", "arg": 2}])
    assert response.status_code == 302 and "/admin/login/" in response["Location"]
    power1.refresh_from_db()
    assert power1.processes == []


def test_it_shows_each_inputs_last_value_and_age_grouped_by_node(viewer, power1, redis_client):
    other = Sensor.objects.create(node=_node("emonth", interval=60), key="temp")
    with time_machine.travel(NOW, tick=False):
        _reading(redis_client, power1, NOW.timestamp() - 12, 1234.5)
        _reading(redis_client, other, NOW.timestamp() - 3 * 60 - 1, 19.25)  # > 3 intervals
        html = _login(viewer).get("/staff/inputs/").content.decode()
    power_row = html[html.index(f'id="input-{power1.pk}"') :]
    power_row = power_row[: power_row.index("</tr>")]
    assert "1234.5 W" in power_row and ">12 s</span> ago" in power_row
    assert "stale" not in power_row
    temp_row = html[html.index(f'id="input-{other.pk}"') :]
    temp_row = temp_row[: temp_row.index("</tr>")]
    assert "19.25" in temp_row and ">3 min</span> ago" in temp_row and "stale" in temp_row
    # Grouped: each node's heading before its own inputs.
    assert html.index(">emontx") < html.index(f"input-{power1.pk}")
    assert html.index(">emonth") < html.index(f"input-{other.pk}")


def test_an_input_never_posted_is_never_and_stale(viewer, power1, redis_client):
    html = _login(viewer).get("/staff/inputs/").content.decode()
    row = html[html.index(f'id="input-{power1.pk}"') :]
    assert "never" in row[: row.index("</tr>")] and "stale" in row[: row.index("</tr>")]


def test_the_live_json_carries_the_new_value(viewer, power1, redis_client):
    client = _login(viewer)
    _reading(redis_client, power1, NOW.timestamp(), 1.0)
    client.get("/staff/inputs/")
    _reading(redis_client, power1, NOW.timestamp() + 10, 2.75)
    live = client.get("/staff/inputs/?live=1").json()
    assert "2.75 W" in live["regions"]["live"]


def test_it_summarises_each_process_list(viewer, power1, redis_client):
    feed = Feed.objects.create(name="power1", tag="emontx", interval=10)
    power1.processes = [{"process": "scale", "arg": 2}, {"process": "log_to_feed", "feed": feed.pk}]
    power1.save()
    html = _login(viewer).get("/staff/inputs/").content.decode()
    assert "scale → 2" in html and "log_to_feed → emontx:power1" in html


def test_engineers_get_edit_links_and_viewers_do_not(engineer, viewer, power1, redis_client):
    assert b"Edit processes" in _login(engineer).get("/staff/inputs/").content
    as_viewer = _login(viewer)
    assert b"Edit processes" not in as_viewer.get("/staff/inputs/").content
    editor = as_viewer.get(f"/staff/inputs/{power1.pk}/processes/").content
    assert b'id="save"' not in editor and b"process_editor.js" not in editor
    assert b"Only engineers can change it" in editor


def test_names_are_escaped_on_both_pages(engineer, redis_client):
    node = _node("<script>alert(1)</script>")
    sensor = Sensor.objects.create(node=node, key="<script>k</script>", name="<b>n</b>")
    client = _login(engineer)
    for path in ("/staff/inputs/", f"/staff/inputs/{sensor.pk}/processes/"):
        html = client.get(path).content.decode()
        assert "<script>alert(1)" not in html and "<script>k" not in html, path
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html, path
    # The editor's data is JSON inside a script element: no '<' there either.
    editor = client.get(f"/staff/inputs/{sensor.pk}/processes/").content.decode()
    data = editor[editor.index('id="editor-data"') :]
    assert "\\u003Cscript\\u003Ealert(1)" in data[: data.index("</script>")]


# --- saving ----------------------------------------------------------------------------------


def test_an_engineer_saves_a_list_creating_feeds_inline(engineer, power1, redis_client):
    response = _save(
        _login(engineer),
        power1,
        [
            {
                "process": "log_to_feed",
                "new_feed": {"name": "power1", "tag": "emontx", "interval": 10, "unit": "W"},
            },
            {
                "process": "power_to_kwh",
                "new_feed": {"name": "power1_kwh", "tag": "emontx", "interval": 10, "unit": "kWh"},
            },
        ],  # fmt: skip
        based_on=[],
    )
    assert response.status_code == 200, response.content
    log, kwh = Feed.objects.get(name="power1"), Feed.objects.get(name="power1_kwh")
    assert (log.tag, log.interval, log.unit, kwh.unit) == ("emontx", 10, "W", "kWh")
    power1.refresh_from_db()
    assert power1.processes == [
        {"process": "log_to_feed", "feed": log.pk},
        {"process": "power_to_kwh", "feed": kwh.pk},
    ]
    created = LogEntry.objects.filter(content_type__model="feed", action_flag=ADDITION)
    assert sorted(created.values_list("object_id", flat=True)) == [str(log.pk), str(kwh.pk)]
    assert {e.user for e in created} == {engineer}
    assert response.json()["new_feeds"][1] == {
        "id": kwh.pk, "label": "emontx:power1_kwh", "interval": 10, "unit": "kWh"
    }  # fmt: skip


def test_every_change_is_audited_with_who_and_before_and_after(engineer, power1, redis_client):
    feed = Feed.objects.create(name="p", interval=10)
    power1.processes = [{"process": "log_to_feed", "feed": feed.pk}]
    power1.save()
    after = [{"process": "scale", "arg": 2}, {"process": "log_to_feed", "feed": feed.pk}]
    assert _save(_login(engineer), power1, after).status_code == 200
    entry = LogEntry.objects.get(object_id=str(power1.pk), content_type__model="sensor")
    assert entry.user == engineer and entry.action_time is not None
    assert f'before [{{"feed": {feed.pk}, "process": "log_to_feed"}}]' in entry.change_message
    assert f"after {json.dumps(after, sort_keys=True)}" in entry.change_message


def test_a_viewer_is_refused_even_posting_by_hand(viewer, booker, power1, redis_client):
    power1.processes = [{"process": "scale", "arg": 3}]
    power1.save()
    for user in (viewer, booker):
        response = _save(_login(user), power1, [{"process": "scale", "arg": 9}])
        assert response.status_code == 403
        assert "only engineers" in response.json()["error"]
    power1.refresh_from_db()
    assert power1.processes == [{"process": "scale", "arg": 3}]
    assert not LogEntry.objects.exists()


def test_a_save_needs_post(engineer, power1):
    assert _login(engineer).get(f"/staff/inputs/{power1.pk}/processes/save").status_code == 405


def test_each_error_is_returned_beside_its_step_and_nothing_is_saved(
    engineer, power1, redis_client
):
    daily_wrong = Feed.objects.create(name="ten-second", interval=10)
    steps = [
        {"process": "log_to_feed", "new_feed": {"name": "fresh", "tag": "emontx", "interval": 10}},
        {"process": "scale", "arg": "two"},
        {"process": "log_to_feed", "feed": 999999},
        {"process": "kwh_to_kwhd", "feed": daily_wrong.pk},
    ]
    # Shape first (as the API): the bad value is named at its step.
    response = _save(_login(engineer), power1, steps)
    assert response.status_code == 400
    assert response.json()["errors"] == {"1": ["step 1 (scale): 'arg' must be a finite number"]}
    # Then the database's checks, each at its step.
    steps[1]["arg"] = 2
    errors = _save(_login(engineer), power1, steps).json()["errors"]
    assert errors["2"] == ["step 2 (log_to_feed): 'feed' 999999 does not exist"]
    assert "needs a daily feed (86400 s)" in errors["3"][0]
    # All or nothing: the feed made for step 0 went with the refused list.
    assert not Feed.objects.filter(name="fresh").exists()
    power1.refresh_from_db()
    assert power1.processes == []


def test_a_new_feed_name_that_exists_is_an_error_at_its_step(engineer, power1, redis_client):
    Feed.objects.create(name="power1", tag="emontx", interval=10)
    steps = [
        {"process": "scale", "arg": 1},
        {"process": "log_to_feed", "new_feed": {"name": "power1", "tag": "emontx", "interval": 10}},
    ]
    response = _save(_login(engineer), power1, steps)
    assert response.status_code == 400
    assert response.json()["errors"] == {
        "1": ["new feed 'name': a feed emontx:power1 already exists; pick it from the list instead"]
    }
    bad_interval = [{"process": "log_to_feed", "new_feed": {"name": "x", "interval": 0}}]
    errors = _save(_login(engineer), power1, bad_interval).json()["errors"]
    assert errors["0"][0].startswith("new feed 'interval':")


def test_another_sites_input_and_feed_are_refused(engineer, redis_client):
    home, barn = (
        Site.objects.create(name="Home", slug="home"),
        Site.objects.create(name="Barn", slug="barn"),
    )
    mine = Sensor.objects.create(node=_node("a", site=home), key="p")
    theirs_feed = Feed.objects.create(name="barn", interval=10)
    theirs = Sensor.objects.create(
        node=_node("b", site=barn), key="q", processes=[{"process": "log_to_feed",
                                                         "feed": theirs_feed.pk}]
    )  # fmt: skip
    steps = [{"process": "add_input", "input": theirs.pk},
             {"process": "log_to_feed", "feed": theirs_feed.pk}]  # fmt: skip
    errors = _save(_login(engineer), mine, steps).json()["errors"]
    assert "is a sensor of another site" in errors["0"][0]
    assert "belongs to another site's sensor" in errors["1"][0]
    # The editor does not offer them.
    editor = _login(engineer).get(f"/staff/inputs/{mine.pk}/processes/").content.decode()
    data = json.loads(editor.split('id="editor-data" type="application/json">')[1].split("<")[0])
    assert theirs_feed.pk not in [f["id"] for f in data["feeds"]]
    assert theirs.pk not in [i["id"] for i in data["inputs"]]


def test_a_change_made_since_the_page_opened_is_not_overwritten(engineer, power1, redis_client):
    power1.processes = [{"process": "scale", "arg": 5}]  # someone else's save
    power1.save()
    response = _save(_login(engineer), power1, [{"process": "scale", "arg": 9}], based_on=[])
    assert response.status_code == 409 and response.json()["field"] == "based_on"
    power1.refresh_from_db()
    assert power1.processes == [{"process": "scale", "arg": 5}]


def test_the_list_length_bound_is_the_apis(engineer, power1, redis_client):
    at_bound = [{"process": "scale", "arg": 1}] * catalog.MAX_STEPS
    assert _save(_login(engineer), power1, at_bound).status_code == 200
    over = at_bound + [{"process": "scale", "arg": 1}]
    response = _save(_login(engineer), power1, over)
    assert response.status_code == 400
    assert response.json()["errors"] == {"list": [f"at most {catalog.MAX_STEPS} steps, got 65"]}
    power1.refresh_from_db()
    assert len(power1.processes) == catalog.MAX_STEPS


def test_a_body_over_the_bound_is_refused_unread(engineer, power1, redis_client):
    client = _login(engineer)
    url = f"/staff/inputs/{power1.pk}/processes/save"
    padding = process_editor.MAX_BODY_BYTES - len('{"steps": [], "x": ""}')
    at_bound = '{"steps": [], "x": "' + "a" * padding + '"}'
    assert len(at_bound) == process_editor.MAX_BODY_BYTES
    assert client.post(url, at_bound, content_type="application/json").status_code == 200
    over = '{"steps": [], "x": "' + "a" * (padding + 1) + '"}'
    response = client.post(url, over, content_type="application/json")
    assert response.status_code == 413 and response.json()["field"] == "body"


@pytest.mark.parametrize(
    ("body", "field"),
    [("not json", "body"), ("[]", "steps"), ('{"steps": {}}', "steps"), ("\xff", "body")],
)
def test_a_malformed_body_is_a_400_naming_the_field(engineer, power1, body, field):
    response = _login(engineer).post(
        f"/staff/inputs/{power1.pk}/processes/save", body, content_type="application/json"
    )
    assert response.status_code == 400 and response.json()["field"] == field


def test_nesting_is_bounded_as_the_apis(engineer, power1, settings):
    client = _login(engineer)
    url = f"/staff/inputs/{power1.pk}/processes/save"
    depth = settings.BMS_JSON_MAX_DEPTH

    def nested(levels: int) -> str:  # {"steps": [], "x": [[...]]}: `levels` in all
        return '{"steps": [], "x": ' + "[" * (levels - 1) + "]" * (levels - 1) + "}"

    assert client.post(url, nested(depth), content_type="application/json").status_code == 200
    response = client.post(url, nested(depth + 1), content_type="application/json")
    assert response.status_code == 400 and "nested deeper" in response.json()["error"]
    # Deeper than json itself can go (it raises RecursionError): still a 400.
    half = process_editor.MAX_BODY_BYTES // 2
    response = client.post(url, "[" * half + "]" * half, content_type="application/json")
    assert response.status_code == 400 and response.json()["field"] == "body"


def test_a_new_feeds_name_is_bounded_by_the_feed_api(engineer, power1, redis_client):
    def step(name: str) -> list:
        return [{"process": "log_to_feed", "new_feed": {"name": name, "interval": 10}}]

    assert _save(_login(engineer), power1, step("n" * 100)).status_code == 200
    response = _save(_login(engineer), power1, step("m" * 101))
    assert response.status_code == 400
    assert response.json()["errors"]["0"][0].startswith("new feed 'name':")


def test_new_feed_defaults_follow_the_node_and_daily_processes(power1):
    assert process_editor.new_feed_defaults(power1, "log_to_feed") == {
        "name": "power1", "tag": "emontx", "interval": 10, "unit": ""
    }  # fmt: skip
    assert process_editor.new_feed_defaults(power1, "kwh_to_kwhd")["interval"] == 86400


def _queries_for_page(client: Client, nodes: int, inputs: int, redis_client) -> int:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    for _ in range(nodes):
        node = _node(f"n{Node.objects.count()}")
        feeds = Feed.objects.bulk_create(
            [Feed(name=f"k{i}", tag=node.name, interval=10) for i in range(inputs)]
        )
        Sensor.objects.bulk_create(
            [
                Sensor(node=node, key=f"k{i}", processes=[{"process": "log_to_feed", "feed": f.pk}])
                for i, f in enumerate(feeds)
            ]
        )
        for i in range(inputs):
            redis_client.hset(node_state.last_key(node.pk), f"k{i}", f"{int(NOW.timestamp())} 1.0")
    with CaptureQueriesContext(connection) as queries:
        assert client.get("/staff/inputs/?live=1").status_code == 200
    return len(queries)


def test_the_pages_queries_do_not_grow_with_the_inputs(viewer, redis_client):
    client = _login(viewer)
    few = _queries_for_page(client, 1, 2, redis_client)
    many = _queries_for_page(client, 10, 20, redis_client)
    assert many == few
