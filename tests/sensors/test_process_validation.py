"""A process list is checked when it is saved (API, admin, model clean), and a bad
one is refused naming the field and the step, instead of losing points at commit."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import ValidationError
from django.test import Client

from feeds.models import Feed
from feeds.processes.catalog import MAX_STEPS
from sensors.models import Node, Sensor, Site

pytestmark = pytest.mark.django_db


@pytest.fixture
def world():
    here = Site.objects.create(name="Here", slug="here")
    there = Site.objects.create(name="There", slug="there")
    node = Node.objects.create(name="tx", site=here)
    other_node = Node.objects.create(name="far", site=there)
    power = Feed.objects.create(name="p", tag="tx", interval=10)
    daily = Feed.objects.create(name="kwhd", tag="tx", interval=86400)
    theirs = Feed.objects.create(name="theirs", tag="far", interval=10)
    Sensor.objects.create(node=other_node, key="x", feed=theirs)
    other_input = Sensor.objects.create(node=other_node, key="y")
    my_input = Sensor.objects.create(node=node, key="v")
    return {"node": node, "power": power, "daily": daily, "theirs": theirs,
            "other_input": other_input, "my_input": my_input}  # fmt: skip


def post(api, node, processes):
    return api.post(
        "/api/v1/sensors/",
        {"node": node.pk, "key": "new", "processes": processes},
        format="json",
    )


def test_a_step_naming_a_missing_feed_is_a_400_naming_the_field_and_step(engineer_api, world):
    r = post(engineer_api, world["node"], [
        {"process": "log_to_feed", "feed": world["power"].pk},
        {"process": "power_to_kwh", "feed": 99_999},
    ])  # fmt: skip
    assert r.status_code == 400
    assert r.json()["fields"]["processes"] == ["step 1 (power_to_kwh): 'feed' 99999 does not exist"]
    assert not Sensor.objects.filter(key="new").exists()


@pytest.mark.parametrize(
    ("step", "message"),
    [
        ({"process": "log_to_feed", "feed": "theirs"}, "belongs to another site"),
        ({"process": "kwh_to_kwhd", "feed": "power"}, "has a 10 s interval; a daily figure"),
        ({"process": "max_value", "feed": "power"}, "a daily figure"),
        ({"process": "add_input", "input": "other_input"}, "is a sensor of another site"),
        ({"process": "add_input", "input": 99_999}, "'input' 99999 is not a sensor"),
        ({"process": "scale", "arg": "2"}, "'arg' must be a finite number"),
        ({"process": "goto_process", "arg": 3}, "from 1 to 1"),
        ({"process": "publish_to_mqtt", "topic": "a/#"}, "wildcards"),
        ({"process": "power_to_kwh_custom", "minutes": 7, "feed": "power"}, "dividing a day"),
        ({"process": "nope"}, "unknown process 'nope'"),
    ],
)
def test_bad_steps_are_refused_with_a_reason(engineer_api, world, step, message):
    step = {k: world[v].pk if isinstance(v, str) and v in world else v for k, v in step.items()}
    r = post(engineer_api, world["node"], [step])
    assert r.status_code == 400, r.content
    (error,) = r.json()["fields"]["processes"]
    assert error.startswith("step 0") and message in error


def test_a_good_list_is_saved_with_emoncms_ids_turned_into_names(engineer_api, world):
    r = post(engineer_api, world["node"], [
        {"process": 2, "arg": 0.5},  # emoncms id 2: scale
        {"process": "1", "feed": world["power"].pk},  # id 1: log_to_feed
        {"process": "kwh_to_kwhd", "feed": world["daily"].pk},
        {"process": "subtract_input", "input": world["my_input"].pk},
        {"process": "if_zero_skip"},
        {"process": "goto_process", "arg": 1},
    ])  # fmt: skip
    assert r.status_code == 201, r.content
    saved = Sensor.objects.get(key="new").processes
    assert [s["process"] for s in saved] == [
        "scale", "log_to_feed", "kwh_to_kwhd", "subtract_input", "if_zero_skip", "goto_process"
    ]  # fmt: skip


def test_the_list_length_is_bounded(engineer_api, world):
    step = {"process": "scale", "arg": 1}
    assert post(engineer_api, world["node"], [step] * MAX_STEPS).status_code == 201
    r = post(engineer_api, world["node"], [step] * (MAX_STEPS + 1))
    assert r.status_code == 400
    assert f"at most {MAX_STEPS} steps" in json.dumps(r.json())


def test_the_admin_refuses_a_missing_feed_on_the_form(superuser, world):
    client = Client()
    client.force_login(superuser)
    r = client.post(
        "/admin/sensors/sensor/add/",
        {"node": world["node"].pk, "key": "adm", "name": "", "kind": "generic", "unit": "",
         "scale": "1", "offset": "0", "params": "{}",
         "processes": json.dumps([{"process": "log_to_feed", "feed": 424242}])},
    )  # fmt: skip
    assert r.status_code == 200  # the form again, with the error
    assert "step 0 (log_to_feed): &#x27;feed&#x27; 424242 does not exist" in r.content.decode()
    assert not Sensor.objects.filter(key="adm").exists()


def test_model_clean_is_the_check_every_writer_shares(world):
    sensor = Sensor(node=world["node"], key="cmd", processes=[{"process": "log_to_feed"}])
    with pytest.raises(ValidationError) as info:
        sensor.full_clean()
    assert info.value.message_dict["processes"] == [
        "step 0 (log_to_feed): 'feed' must be a feed id (positive integer)"
    ]


def test_check_processes_lists_stored_lists_that_would_be_refused(world):
    from io import StringIO

    from django.core.management import CommandError, call_command

    # Stored before the check existed (create() does not clean).
    Sensor.objects.create(node=world["node"], key="old", processes=[
        {"process": "log_to_feed", "feed": 31337},
    ])  # fmt: skip
    out = StringIO()
    with pytest.raises(CommandError, match="1 sensor"):
        call_command("check_processes", stdout=out)
    assert "step 0 (log_to_feed): 'feed' 31337 does not exist" in out.getvalue()
    Sensor.objects.filter(key="old").delete()
    call_command("check_processes", stdout=out)
    assert "process list(s) OK" in out.getvalue()


# The `feed` field follows the process-list rule.
def test_the_feed_field_naming_another_sites_feed_is_a_400_naming_feed(engineer_api, world):
    mine = Sensor.objects.create(node=world["node"], key="m")
    url = f"/api/v1/sensors/{mine.pk}/"
    r = engineer_api.patch(url, {"feed": world["theirs"].pk}, format="json")
    assert r.status_code == 400, r.content
    assert "feed" in r.json()["fields"]
    mine.refresh_from_db()
    assert mine.feed_id is None
    # The own site's feed is accepted.
    r = engineer_api.patch(url, {"feed": world["power"].pk}, format="json")
    assert r.status_code == 200, r.content


def test_the_feed_field_of_a_feed_logged_by_another_sites_process_list_is_refused(world):
    logged = Feed.objects.create(name="logged", tag="far", interval=10)
    far = Node.objects.get(name="far")
    Sensor.objects.create(
        node=far, key="w", processes=[{"process": "log_to_feed", "feed": logged.pk}]
    )
    with pytest.raises(ValidationError) as info:
        Sensor(node=world["node"], key="z", feed=logged).full_clean()
    assert "feed" in info.value.message_dict
    Sensor(node=far, key="z", feed=logged).full_clean()  # its own site: fine


def test_the_admin_refuses_another_sites_feed_on_the_form(superuser, world):
    client = Client()
    client.force_login(superuser)
    r = client.post(
        "/admin/sensors/sensor/add/",
        {"node": world["node"].pk, "key": "adm", "name": "", "kind": "generic", "unit": "",
         "scale": "1", "offset": "0", "params": "{}", "processes": "[]",
         "feed": world["theirs"].pk},
    )  # fmt: skip
    assert r.status_code == 200
    assert "belongs to another site" in r.content.decode()
    assert not Sensor.objects.filter(key="adm").exists()


def test_check_processes_does_not_flag_the_rightful_logger(world):
    from io import StringIO

    from django.core.management import call_command

    logged = Feed.objects.create(name="logged", tag="far", interval=10)
    far = Node.objects.get(name="far")
    Sensor.objects.create(
        node=far, key="w", processes=[{"process": "log_to_feed", "feed": logged.pk}]
    )
    # A pointer stored before the feed field was checked (create() does not clean).
    Sensor.objects.create(node=world["node"], key="bad", feed=logged)
    out = StringIO()
    call_command("check_processes", stdout=out)  # raises CommandError when it flags one
    assert "far:w" not in out.getvalue() and "belongs to another site" not in out.getvalue()
