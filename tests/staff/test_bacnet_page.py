"""The staff BACnet page (#31): each controller's state in plain words on a controlled clock,
its points' last values; engineers change the poll settings (bounded, the field named when
refused) and queue a poll; viewers only read, a hand-made POST refused too."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
import time_machine
from django.contrib.admin.models import LogEntry
from django.test import Client

from sensors.devices import bacnet_status
from sensors.devices.bacnet_devices import add_device
from sensors.ingest import node_state

NOW = datetime(2026, 3, 2, 12, 0, 0, tzinfo=UTC)
T = int(NOW.timestamp())


def _login(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def device(db, redis_client):
    device = add_device("boiler-house", "192.0.2.40", 2601, interval=30, vendor_name="Trend")
    device.points.create(key="analog-input-1", object_type="analog-input", instance=1,
                         name="Boiler flow temperature", units="degrees-celsius")  # fmt: skip
    return device


def _section(html: str, device) -> str:
    start = html.index(f'id="controller-{device.pk}"')
    return html[start : html.index("</section>", start)]


def test_a_controller_never_read_says_so(viewer, device):
    html = _section(_login(viewer).get("/staff/bacnet/").content.decode(), device)
    assert "Not read yet" in html and "device 2601 at 192.0.2.40 · Trend" in html
    assert "never" in html


def test_an_answering_controller_shows_its_points_last_value_and_time(viewer, device, redis_client):
    bacnet_status.mark_answered(device.node_id, T - 12)
    redis_client.hset(node_state.last_key(device.node_id), "analog-input-1", f"{T - 12} 61.5")
    with time_machine.travel(NOW, tick=False):
        html = _section(_login(viewer).get("/staff/bacnet/").content.decode(), device)
    assert "Answering</span> last answer" in html and ">12 s</span> ago" in html
    assert '<td class="value">61.5 °C</td>' in html


def test_a_lost_controller_is_not_answering_since_its_first_miss_in_its_words(
    viewer, device, redis_client
):
    bacnet_status.mark_answered(device.node_id, T - 600)
    bacnet_status.mark_failed(device.node_id, "no answer within 3 s", T - 300)
    bacnet_status.mark_failed(device.node_id, "no answer within 3 s", T - 270)  # since: the first
    with time_machine.travel(NOW, tick=False):
        html = _section(_login(viewer).get("/staff/bacnet/").content.decode(), device)
    assert "Not answering</span> since" in html
    assert ">5 min</span>): no answer within 3 s. Last answer" in html


def test_a_viewer_sees_no_edit_controls_and_a_hand_made_post_is_refused(viewer, device):
    client = _login(viewer)
    html = client.get("/staff/bacnet/").content.decode()
    assert "Read only: engineers change controllers." in html
    assert "edit-controller" not in html and "Poll now" not in html
    assert client.post(f"/staff/bacnet/{device.pk}/settings", {"interval": 5}).status_code == 403
    assert client.post(f"/staff/bacnet/{device.pk}/poll").status_code == 403
    device.node.refresh_from_db()
    assert device.node.interval == 30


@pytest.mark.parametrize(
    ("form", "field"),
    [({"interval": "4"}, "interval"), ({"interval": "86401"}, "interval"),
     ({"timeout_s": "0.4"}, "timeout_s"), ({"timeout_s": "31"}, "timeout_s"),
     ({"interval": "ten"}, "interval")],
)  # fmt: skip
def test_an_engineers_bad_setting_is_refused_naming_the_field(engineer, device, form, field):
    answer = _login(engineer).post(f"/staff/bacnet/{device.pk}/settings", form)
    assert answer.status_code == 400
    assert f'<p class="errorlist">{field}: ' in answer.content.decode()
    device.refresh_from_db()
    device.node.refresh_from_db()
    assert (device.node.interval, device.timeout_s) == (30, 3.0)


@pytest.mark.parametrize(
    ("form", "said"),
    [({"interval": "", "timeout_s": ""},
      ["interval: give the seconds between polls, 5-86400 s",
       "timeout_s: give the seconds to wait for each answer, 0.5-30 s"]),
     ({"interval": "4", "timeout_s": "3"}, ["interval: 4 s is outside 5-86400 s"]),
     ({"interval": "30", "timeout_s": "31"}, ["timeout_s: 31 s is outside 0.5-30 s"]),
     ({"interval": "30", "timeout_s": "nan"}, ["timeout_s: &#x27;nan&#x27; is not a number"]),
     ({"interval": "9" * 5000, "timeout_s": "3"},
      [f"interval: &#x27;{'9' * 20}…&#x27; is not a whole number of seconds"])],
)  # fmt: skip
def test_settings_are_refused_in_the_add_forms_words_an_empty_box_named(
    engineer, device, form, said
):
    answer = _login(engineer).post(f"/staff/bacnet/{device.pk}/settings", form)
    html = answer.content.decode()
    assert answer.status_code == 400
    for words in said:
        assert f'<p class="errorlist">{words}' in html
    assert "9" * 21 not in html  # a long number is not echoed whole
    device.node.refresh_from_db()
    assert device.node.interval == 30 and not LogEntry.objects.exists()


def test_settings_that_change_nothing_record_nothing(engineer, device):
    answer = _login(engineer).post(f"/staff/bacnet/{device.pk}/settings",
                                   {"interval": "30", "timeout_s": "3.0"}, follow=True)  # fmt: skip
    assert "boiler-house: no change." in answer.content.decode()
    assert not LogEntry.objects.exists()


def test_an_engineer_changes_the_poll_settings_audited(engineer, device):
    answer = _login(engineer).post(
        f"/staff/bacnet/{device.pk}/settings", {"interval": "5", "timeout_s": "30"}
    )
    assert answer.status_code == 302
    device.refresh_from_db()
    device.node.refresh_from_db()
    assert (device.node.interval, device.timeout_s) == (5, 30.0)
    entry = LogEntry.objects.get(object_id=str(device.pk))
    assert entry.change_message == "Poll every 5 s, timeout 30.0 s (staff BACnet page)."


def test_a_controllers_settings_history_is_seen_in_the_admin_which_does_not_edit_it(
    engineer, viewer, device
):
    # #31: the staff page's changes were logged with nowhere to see them.
    _login(engineer).post(f"/staff/bacnet/{device.pk}/settings",
                          {"interval": "5", "timeout_s": "3.0"})  # fmt: skip
    for user in (engineer, viewer):
        history = _login(user).get(f"/admin/sensors/bacnetdevice/{device.pk}/history/")
        assert history.status_code == 200
        assert "Poll every 5 s, timeout 3.0 s (staff BACnet page)." in history.content.decode()
    page = _login(engineer).get(f"/admin/sensors/bacnetdevice/{device.pk}/change/")
    html = page.content.decode()
    assert page.status_code == 200 and "Boiler flow temperature" in html
    assert 'name="timeout_s"' not in html  # read-only: changed on the staff page or the API
    refused = _login(engineer).post(f"/admin/sensors/bacnetdevice/{device.pk}/change/",
                                    {"timeout_s": "10"})  # fmt: skip
    assert refused.status_code == 403
    device.refresh_from_db()
    assert device.timeout_s == 3.0


def test_poll_now_queues_a_poll_for_the_worker(engineer, device, redis_client):
    answer = _login(engineer).post(f"/staff/bacnet/{device.pk}/poll", follow=True)
    assert "A poll of boiler-house is queued" in answer.content.decode()
    queued = b"".join(redis_client.lrange("ingest", 0, -1))  # sensors.tasks.* go to ingest
    assert b"sensors.tasks.poll_bacnet_device" in queued


def test_the_page_links_to_its_help_which_is_served(viewer, device):
    client = _login(viewer)
    assert '/staff/help/bacnet"' in client.get("/staff/bacnet/").content.decode()
    assert "BACnet/IP: read and command" in client.get("/staff/help/bacnet").content.decode()


def test_each_point_says_whether_cov_or_the_poll_reads_it_and_what_was_dropped(
    viewer, device, redis_client
):
    device.points.create(key="binary-output-1", object_type="binary-output", instance=1)
    redis_client.hset(bacnet_status.cov_key(device.node_id), "analog-input-1", T + 200)
    redis_client.hset(bacnet_status.dropped_key(device.node_id), "analog-input-1", 3)
    redis_client.hset(
        bacnet_status.refused_key(device.node_id),
        "binary-output-1",
        "services: service-request-denied",
    )
    with time_machine.travel(NOW, tick=False):
        html = _section(_login(viewer).get("/staff/bacnet/").content.decode(), device)
    assert "COV <span" in html and "3 notifications dropped by the rate bound" in html
    assert 'polled <span class="muted">(COV refused: services: service-request-denied)' in html
    with time_machine.travel(NOW.timestamp() + 201, tick=False):  # the subscription lapsed
        html = _section(_login(viewer).get("/staff/bacnet/").content.decode(), device)
    assert "COV <span" not in html


def test_discover_queues_a_who_is_for_the_worker_once_at_a_time(engineer, redis_client):
    client = _login(engineer)
    answer = client.post("/staff/bacnet/discover", {"target": "192.0.2.255"}, follow=True)
    assert "A Who-Is is queued for the worker" in answer.content.decode()
    assert "192.0.2.255 queued at" in answer.content.decode()
    queued = b"".join(redis_client.lrange("ingest", 0, -1))
    assert queued.count(b"sensors.tasks.discover_bacnet") == 1
    again = client.post("/staff/bacnet/discover", {"target": ""}, follow=True)
    assert "A discovery is already under way" in again.content.decode()
    queued = b"".join(redis_client.lrange("ingest", 0, -1))
    assert queued.count(b"sensors.tasks.discover_bacnet") == 1


@pytest.mark.parametrize(
    ("target", "message"),
    [("300.1.2.3", "target: &#x27;300.1.2.3&#x27; is not an IPv4 address"),
     ("192.0.2.1:70000", "target: port 70000 is out of range 1-65535"),
     ("1" * 64, "is not an IPv4 address"), ("1" * 65, "target: at most 64 characters"),
     ("0.0.0.0", "target: 0.0.0.0 is no one&#x27;s address"),
     ("255.255.255.255", "target: 255.255.255.255 is the broadcast to every host"),
     ("224.0.0.1", "target: 224.0.0.1 is a multicast address"),
     ("fe80::1", "target: IPv6 is not supported: give an IPv4 address")],
)  # fmt: skip
def test_a_bad_discover_target_is_refused_naming_the_field(engineer, redis_client, target, message):
    answer = _login(engineer).post("/staff/bacnet/discover", {"target": target})
    assert answer.status_code == 400 and message in answer.content.decode()
    assert not redis_client.lrange("ingest", 0, -1)


def test_a_finished_discovery_lists_what_answered_and_what_we_record(viewer, device, redis_client):
    # The worker's Who-Is ran before boiler-house was added (it keeps no node names): the page
    # says which answers we record when it is drawn, not when the Who-Is ran.
    from sensors.devices import bacnet_discovery

    redis_client.set(bacnet_discovery.KEY, json.dumps({
        "requested_at": T - 5, "done_at": T - 2, "target": "", "by": "estates", "error": "",
        "found": [{"instance": 2601, "address": "192.0.2.40", "vendor_id": 5},
                  {"instance": 2602, "address": "192.0.2.41", "vendor_id": 5}]}))  # fmt: skip
    html = _login(viewer).get("/staff/bacnet/").content.decode()
    assert "to the local broadcast" in html and "by estates: 2 answered." in html
    assert "device 2601 at 192.0.2.40 (vendor id 5) · recorded as boiler-house" in html
    assert "manage.py bacnet browse 192.0.2.41 2602" in html
    assert 'id="discover"' not in html  # a viewer has no button


def test_binary_points_read_on_and_off_and_no_units_is_never_printed(viewer, device, redis_client):
    device.points.create(key="binary-input-1", object_type="binary-input", instance=1,
                         name="Pump running", units="")  # fmt: skip
    device.points.create(key="analog-value-2", object_type="analog-value", instance=2,
                         name="Stage", units="no-units")  # fmt: skip
    redis_client.hset(node_state.last_key(device.node_id), mapping={
        "binary-input-1": f"{T} 1.0", "analog-value-2": f"{T} 0.0"})  # fmt: skip
    html = _section(_login(viewer).get("/staff/bacnet/").content.decode(), device)
    assert '<td class="value">on</td>' in html and '<td class="value">0</td>' in html
    assert "no-units" not in html
    redis_client.hset(node_state.last_key(device.node_id), "binary-input-1", f"{T} 0.0")
    html = _section(_login(viewer).get("/staff/bacnet/").content.decode(), device)
    assert '<td class="value">off</td>' in html
