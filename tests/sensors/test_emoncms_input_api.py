"""emoncms's /input/* reads and process-list paths: each answers in the shape emoncms 11.16's
PHP gives for the same inputs (Modules/input/input_controller.php and input_model.php, cited
per test), with its key rules from both sides (no key, read key, write key, a device key) and
a 4xx in emoncms's shape, never a 500, for bad input at every bound."""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

from core import api_tokens
from feeds.models import Feed
from sensors import emoncms_inputs
from sensors.ingest import node_state
from sensors.models import GatewayKey, Node, Sensor, Site

pytestmark = pytest.mark.django_db
T = 1_714_564_800


@pytest.fixture
def plant(db, redis_client):
    """Two sites: home's emontx with power1 (logged to a feed) and temp, and a node of the
    school's; last values in the nodes' Redis hashes as the ingest worker leaves them."""
    home = Site.objects.create(name="Home", slug="home")
    school = Site.objects.create(name="School", slug="school")
    power_feed = Feed.objects.create(name="power", interval=10)
    kwh = Feed.objects.create(name="kwh", interval=10)
    node = Node(name="emontx", site=home)
    node.set_new_key()
    node.save()
    power = Sensor.objects.create(node=node, key="power1", name="Solar",
                                  processes=[{"process": "log_to_feed", "feed": power_feed.pk},
                                             {"process": "power_to_kwh", "feed": kwh.pk}])  # fmt: skip
    temp = Sensor.objects.create(node=node, key="temp")
    other = Node(name="boiler", site=school)
    other.set_new_key()
    other.save()
    flow = Sensor.objects.create(node=other, key="flow")
    redis_client.hset(node_state.last_key(node.pk), mapping={"power1": f"{T} 1520.5"})
    redis_client.hset(node_state.last_key(other.pk), mapping={"flow": f"{T + 5} 21.25"})
    return {"power": power, "temp": temp, "flow": flow, "feeds": (power_feed, kwh),
            "home": home, "school": school}  # fmt: skip


def keyed(user) -> APIClient:
    client = APIClient()
    client.key = api_tokens.issue(user)[1]
    return client


def get(client: APIClient, path: str, **params):
    key = getattr(client, "key", None)
    return client.get(path, {**params, **({"apikey": key} if key else {})})


def refused(response, status: int, words: str) -> None:
    assert response.status_code == status, response.content
    body = response.json()
    assert body["success"] is False and words in body["message"], body


# --- input/list.json: Input::getlist (redis_getlist) -------------------------------------------


def test_list_rows_are_emoncms_s(viewer, plant):
    power, temp = plant["power"], plant["temp"]
    power_feed, kwh = plant["feeds"]
    rows = get(keyed(viewer), "/input/list.json").json()
    assert all(list(r) == ["id", "nodeid", "name", "description", "processList", "time",
                           "value"] for r in rows)  # fmt: skip
    by_name = {r["name"]: r for r in rows}
    assert by_name["power1"] == {"id": str(power.pk), "nodeid": "emontx", "name": "power1",
                                 "description": "Solar",
                                 "processList": f"1:{power_feed.pk},4:{kwh.pk}",
                                 "time": T, "value": 1520.5}  # fmt: skip
    # never posted: time and value null (validate: !isset -> null)
    assert (by_name["temp"]["time"], by_name["temp"]["value"]) == (None, None)
    assert by_name["temp"]["id"] == str(temp.pk) and by_name["temp"]["processList"] == ""
    assert get(keyed(viewer), "/input/list", site="school").json()[0]["name"] == "flow"


# --- input/get: Input::get_inputs_v2 ----------------------------------------------------------


def test_get_is_inputs_by_node_with_time_value_and_process_list(viewer, plant):
    client = keyed(viewer)
    power_feed, kwh = plant["feeds"]
    everything = get(client, "/input/get").json()
    assert set(everything) == {"emontx", "boiler"}
    one = {"time": T, "value": 1520.5, "processList": f"1:{power_feed.pk},4:{kwh.pk}"}
    assert everything["emontx"]["power1"] == one
    assert get(client, "/input/get/emontx").json() == everything["emontx"]
    assert get(client, "/input/get", node="emontx").json() == everything["emontx"]
    assert get(client, "/input/get/emontx/power1").json() == one
    assert get(client, "/input/get/emontx/power1.json").json() == one
    assert get(client, "/input/get", node="emontx", name="power1").json() == one
    assert get(client, "/input/get.json", site="school").json() == {
        "boiler": {"flow": {"time": T + 5, "value": 21.25, "processList": ""}}}  # fmt: skip


def test_get_of_a_missing_node_or_name_says_so_as_emoncms(viewer, plant):
    client = keyed(viewer)
    refused(get(client, "/input/get/nonode"), 404, "Node does not exist")
    refused(get(client, "/input/get/emontx/nothing"), 404, "Node variable does not exist")
    # emoncms drops characters outside [\p{N}\p{L}_\s\-.] before looking the node up
    assert get(client, "/input/get", node="emon<tx>").json()["power1"]["value"] == 1520.5
    assert get(client, "/input/get", node="e" * 64).status_code == 404
    refused(get(client, "/input/get", node="e" * 65), 400, "node")
    refused(get(client, "/input/get", site="no-such-site"), 404, "does not exist")
    refused(get(client, "/input/get", site="bad slug!"), 400, "site")


def test_an_empty_installation_answers_php_s_empty_array(viewer, redis_client):
    assert get(keyed(viewer), "/input/get").json() == []
    assert get(keyed(viewer), "/input/getinputs.json").json() == []
    assert get(keyed(viewer), "/input/list.json").json() == []


# --- input/getinputs.json: Input::get_inputs ---------------------------------------------------


def test_getinputs_is_ids_and_process_lists_by_node(viewer, plant):
    body = get(keyed(viewer), "/input/getinputs.json").json()
    assert body["boiler"] == {"flow": {"id": str(plant["flow"].pk), "processList": ""}}
    assert body["emontx"]["temp"] == {"id": str(plant["temp"].pk), "processList": ""}


def test_nodes_of_two_sites_with_one_name_are_both_listed(viewer, engineer, plant, redis_client):
    """Node names are unique per site (sensors/0011): two sites may each have an "emontx".
    emoncms keys inputs by node name under one user; a staff key here reads every site, so
    the listing tells the two apart by site slug, `site=` answers with that site's node only,
    and a bare `/input/get/emontx` says which sites have one (400 naming `site`) rather than
    answering with either."""
    school = Node(name="emontx", site=plant["school"])
    school.set_new_key()
    school.save()
    Sensor.objects.create(node=school, key="power1")
    redis_client.hset(node_state.last_key(school.pk), mapping={"power1": f"{T + 9} 42.0"})
    for client in (keyed(viewer), keyed(engineer)):  # two keys, two users
        listed = {(r["nodeid"], r["name"]) for r in get(client, "/input/list.json").json()}
        assert {("home/emontx", "power1"), ("school/emontx", "power1")} <= listed
        assert ("emontx", "power1") not in listed
        everything = get(client, "/input/get").json()
        assert everything["school/emontx"]["power1"]["value"] == 42.0
        assert everything["home/emontx"]["power1"]["value"] == 1520.5
        for site, value in (("home", 1520.5), ("school", 42.0)):
            one = get(client, "/input/get/emontx/power1", site=site).json()
            assert one["value"] == value, site
            assert get(client, "/input/get/emontx", site=site).json()["power1"]["value"] == value
            rows = get(client, "/input/list.json", site=site).json()
            power = [r["value"] for r in rows if (r["nodeid"], r["name"]) == ("emontx", "power1")]
            assert power == [value], site
            assert {r["nodeid"] for r in rows} == {"emontx"} | (
                {"boiler"} if site == "school" else set()
            )
        for path in ("/input/get/emontx", "/input/get/emontx/power1"):
            answer = get(client, path)
            refused(answer, 400, "node 'emontx' is in 2 sites (home, school)")
            assert answer.json()["fields"] == {"site": [answer.json()["message"]]}
        assert get(client, "/input/get/boiler").json()["flow"]["value"] == 21.25  # one site's


def test_the_listings_site_and_node_label_is_a_path_of_input_get(viewer, plant, redis_client):
    """list.json labels a name two sites share `home/emontx`: /input/get/home/emontx (and
    .../power1) answers for that site's node, as site= does; it was 404 "Node does not
    exist". A node named as a site keeps emoncms's meaning (node, then input)."""
    school = Node(name="emontx", site=plant["school"])
    school.set_new_key()
    school.save()
    Sensor.objects.create(node=school, key="power1")
    redis_client.hset(node_state.last_key(school.pk), mapping={"power1": f"{T + 9} 42.0"})
    client = keyed(viewer)
    for site, value in (("home", 1520.5), ("school", 42.0)):
        assert get(client, f"/input/get/{site}/emontx").json()["power1"]["value"] == value
        assert get(client, f"/input/get/{site}/emontx/power1").json()["value"] == value
        assert get(client, f"/input/get/{site}/emontx/power1.json").json()["value"] == value
    assert get(client, "/input/get/school/boiler").json()["flow"]["value"] == 21.25
    refused(get(client, "/input/get/home/boiler"), 404, "Node does not exist")  # school's
    refused(get(client, "/input/get/home/emontx/nothing"), 404, "Node variable does not exist")
    refused(get(client, "/input/get/nosite/emontx/power1"), 404, "does not exist")
    refused(get(client, "/input/get/home/emontx/power1", site="school"), 400, "site")
    refused(get(client, "/input/get/" + "s" * 51 + "/emontx/power1"), 400, "site")
    # a node named like a site: /input/get/<node>/<input>, as in emoncms
    Sensor.objects.create(node=Node.objects.create(name="home", site=plant["school"]), key="t")
    refused(get(client, "/input/get/home/emontx"), 404, "Node variable does not exist")
    refused(APIClient().get("/input/get/school/emontx"), 401, "apikey")


# --- key rules: input_controller.php: read block, then `$session["write"]` block --------------


READS = ["/input/list.json", "/input/get", "/input/get/emontx", "/input/getinputs.json"]


@pytest.mark.parametrize("path", READS)
def test_reads_need_a_read_key(anon_api, viewer, booker, engineer, plant, path):
    refused(anon_api.get(path), 401, "apikey")
    for user in (viewer, booker, engineer):
        assert get(keyed(user), path).status_code == 200
    bearer = APIClient()
    bearer.credentials(HTTP_AUTHORIZATION=f"Bearer {keyed(viewer).key}")
    assert bearer.get(path).status_code == 200


@pytest.mark.parametrize("path", READS + ["/input/process/get.json?inputid=1"])
def test_device_keys_are_refused_on_the_read_paths(plant, path):
    """A node's key and a gateway key (either site's) post readings only, as emoncms's device
    keys: here they are not staff tokens, so 401."""
    gateway = GatewayKey(site=plant["school"], name="hub")
    gateway_key = gateway.set_new_key()
    gateway.save()
    node = Node.objects.get(name="emontx")
    node_key = node.set_new_key()
    node.save()
    for key in (gateway_key, node_key):
        sep = "&" if "?" in path else "?"
        refused(APIClient().get(f"{path}{sep}apikey={key}"), 401, "Invalid token")


def test_a_user_without_a_role_reads_nothing(plant):
    from django.contrib.auth.models import User

    client = keyed(User.objects.create_user("visitor", password="x"))
    refused(get(client, "/input/list.json"), 403, "no staff role")


# --- process/get and process/set: Input::get_processlist / set_processlist --------------------


def test_process_get_answers_emoncms_s_text_for_a_write_key_only(engineer, viewer, anon_api, plant):
    power = plant["power"]
    power_feed, kwh = plant["feeds"]
    body = get(keyed(engineer), "/input/process/get.json", inputid=power.pk).json()
    assert body == f"1:{power_feed.pk},4:{kwh.pk}"
    assert get(keyed(engineer), "/input/process/get.json", inputid=plant["temp"].pk).json() == ""
    refused(get(keyed(viewer), "/input/process/get.json", inputid=power.pk), 403, "only read")
    refused(anon_api.get(f"/input/process/get.json?inputid={power.pk}"), 401, "apikey")
    refused(get(keyed(engineer), "/input/process/get.json", inputid=999999), 404, "Input")
    refused(get(keyed(engineer), "/input/process/get.json", inputid="x"), 400, "inputid")


def _set(client: APIClient, sensor_id, processlist):
    url = f"/input/process/set.json?inputid={sensor_id}"
    key = getattr(client, "key", None)
    return client.post(url + (f"&apikey={key}" if key else ""),
                       {} if processlist is None else {"processlist": processlist})  # fmt: skip


def test_process_set_takes_emoncms_11_json_and_the_older_text(engineer, plant):
    temp = plant["temp"]
    power_feed, _ = plant["feeds"]
    new = json.dumps([{"fn": "process__scale", "args": [0.1]},
                      {"fn": "process__log_to_feed", "args": [power_feed.pk]},
                      {"fn": "process__allowpositive", "args": [0]}])  # fmt: skip
    body = _set(keyed(engineer), temp.pk, new).json()
    assert body == {"success": True, "message": "Input processlist updated",
                    "encoded_processlist": f"2:0.1,1:{power_feed.pk},24:0"}  # fmt: skip
    temp.refresh_from_db()
    assert temp.processes == [{"process": "scale", "arg": 0.1},
                              {"process": "log_to_feed", "feed": power_feed.pk},
                              {"process": "allowpositive"}]  # fmt: skip
    assert _set(keyed(engineer), temp.pk, f"3:-5,1:{power_feed.pk}").json()["success"] is True
    temp.refresh_from_db()
    assert temp.processes == [{"process": "offset", "arg": -5},
                              {"process": "log_to_feed", "feed": power_feed.pk}]  # fmt: skip
    assert _set(keyed(engineer), temp.pk, "").json()["encoded_processlist"] == ""


@pytest.mark.parametrize(
    ("processlist", "words"),
    [
        ('[{"fn": "process__log_to_feed", "args": [999999]}]', "'feed' 999999 does not exist"),
        ('[{"fn": "process__nonsense", "args": [1]}]', "Invalid process process key"),
        ('[{"args": [1]}]', "Missing process key in process list at index 0"),
        ('[{"fn": "process__scale"}]', "Invalid or missing args"),
        ('[{"fn": "process__scale", "args": [1, 2]}]', "Invalid number of arguments"),
        ('[{"fn": "process__scale", "args": ["abc"]}]', "'arg' must be a finite number"),
        ('[{"fn": "process__goto_process", "args": [5]}]', "step position"),
        ("[{", "not valid JSON"),
        ('{"fn": 1}', "must be a list"),
        ("99:1", "Invalid process process key:99"),
        (None, "processlist: required"),
        ("1:1," * 65, "at most 64 steps"),
        ("x" * 8001, "at most 8,000 characters"),
        ("[" * 990 + "]" * 990, "processlist: JSON nested deeper than"),  # was a 500
    ],
)
def test_process_set_refuses_as_the_sensor_api_and_keeps_the_stored_list(engineer, plant,
                                                                         processlist, words):  # fmt: skip
    power = plant["power"]
    before = list(power.processes)
    refused(_set(keyed(engineer), power.pk, processlist), 400, words)
    power.refresh_from_db()
    assert power.processes == before


def test_process_set_refuses_another_sites_feed_and_input_as_the_api_does(engineer, engineer_api,
                                                                          plant):  # fmt: skip
    """The same list is refused with the same words by /api/v1/sensors (the existing check)."""
    power_feed, _ = plant["feeds"]
    flow = plant["flow"]  # the school's input, its feed is home's power feed
    theirs = json.dumps([{"fn": "process__log_to_feed", "args": [power_feed.pk]}])
    response = _set(keyed(engineer), flow.pk, theirs)
    refused(response, 400, "belongs to another site's sensor")
    api = engineer_api.patch(f"/api/v1/sensors/{flow.pk}/",
                             {"processes": [{"process": "log_to_feed", "feed": power_feed.pk}]},
                             format="json")  # fmt: skip
    assert api.status_code == 400
    assert "belongs to another site's sensor" in json.dumps(api.json())
    other_input = json.dumps([{"fn": "process__add_input", "args": [plant["power"].pk]}])
    refused(_set(keyed(engineer), flow.pk, other_input), 400, "a sensor of another site")
    flow.refresh_from_db()
    assert flow.processes == []


def test_process_set_at_the_step_bound(engineer, plant):
    temp = plant["temp"]
    assert _set(keyed(engineer), temp.pk, ",".join(["2:1"] * 64)).json()["success"] is True
    temp.refresh_from_db()
    assert len(temp.processes) == 64


def test_process_set_json_depth_at_the_bound(engineer, plant, settings):
    """BMS_JSON_MAX_DEPTH levels parse (then the step's shape is refused); one more is refused
    as too deep, naming processlist, and the stored list is kept."""
    power = plant["power"]
    before = list(power.processes)
    depth = settings.BMS_JSON_MAX_DEPTH
    at = _set(keyed(engineer), power.pk, "[" * depth + "]" * depth)
    refused(at, 400, "Missing process key in process list at index 0")
    over = _set(keyed(engineer), power.pk, "[" * (depth + 1) + "]" * (depth + 1))
    refused(over, 400, f"processlist: JSON nested deeper than {depth} levels")
    assert list(over.json()["fields"]) == ["processlist"]
    power.refresh_from_db()
    assert power.processes == before


def test_process_set_needs_a_write_key(viewer, booker, anon_api, plant):
    temp = plant["temp"]
    refused(_set(keyed(viewer), temp.pk, "2:1"), 403, "only read")
    refused(_set(keyed(booker), temp.pk, "2:1"), 403, "only read")
    refused(_set(anon_api, temp.pk, "2:1"), 401, "apikey")
    temp.refresh_from_db()
    assert temp.processes == []


def test_encode_names_processes_without_an_emoncms_id_by_key():
    steps = [{"process": "error_found"}, {"process": "power_to_kwh_custom", "minutes": 30,
                                          "feed": 4}, {"process": "publish_to_mqtt",
                                                       "topic": "a/b"}]  # fmt: skip
    text = emoncms_inputs.encode(steps)
    assert text == "process__error_found:0,71:30:4,35:a/b"
    assert emoncms_inputs.decode(text) == (steps, [])


def test_listing_costs_the_same_queries_however_many_nodes(viewer, plant, redis_client):
    """One query for the inputs (nodes and sites joined) and one Redis pipeline, so a site
    with many nodes is not a query per node or per input."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client = keyed(viewer)

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert get(client, "/input/list.json").status_code == 200
            assert get(client, "/input/get").status_code == 200
        return len(captured.captured_queries)

    before = queries()
    for i in range(20):
        node = Node(name=f"extra{i}", site=plant["home"])
        node.set_new_key()
        node.save()
        Sensor.objects.create(node=node, key="power")
        redis_client.hset(node_state.last_key(node.pk), mapping={"power": f"{T} {i}"})
    assert queries() == before
    assert len(get(client, "/input/list.json").json()) == 3 + 20
