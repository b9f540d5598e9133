"""The site's BACnet device (control/bacnet_server.py) also shows the feeds an engineer chose
(Feed.bacnet_export) and the alarm state: read, subscribed to and refused writes by the
independent bac-py client (tests/control/bacnet_peer_client.py) as a head-end would."""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime

import pytest
from django.core.management import call_command
from django.utils import timezone

from alarms.models import Alarm
from control.bacnet_server import (
    FEED_INSTANCE_BASE,
    FEED_STALE_MIN_S,
    MAX_FEED_ID,
    SITE_INSTANCE,
    AlarmState,
    FeedPoint,
    ZonePoint,
    alarm_state,
    bacnet_units,
    feed_points,
    feed_stale_s,
)
from feeds.models import MAX_BACNET_FEEDS, Feed
from feeds.store import service as feed_service
from tests.sensors.bacnet_peer import OUR_HOST, free_udp_port

from . import factories as f
from .test_bacnet_server import device, peer  # noqa: F401  (the fixture)
from .test_bacnet_server_cov import Subscriber

UNITS_KW = 48  # BACnetEngineeringUnits kilowatts
UNITS_NONE = 95  # no-units
NO_SENSOR, OVER_RANGE, COMMUNICATION_FAILURE, NO_FAULT = 1, 2, 12, 0  # BACnetReliability


def ai(feed: Feed | int) -> str:
    feed_id = feed if isinstance(feed, int) else feed.pk
    return f"analog-input,{FEED_INSTANCE_BASE + feed_id}"


def chosen(name: str, unit: str = "kW", interval: int = 10, **kw) -> Feed:
    return Feed.objects.create(
        name=name, tag="plant", unit=unit, interval=interval, bacnet_export=True, **kw
    )


@pytest.mark.django_db
def test_a_head_end_reads_a_chosen_feed_and_a_feed_not_chosen_is_absent(redis_client, device):  # noqa: F811
    boiler, carbon = chosen("Boiler power"), chosen("Carbon", unit="gCO2/kWh")
    hidden = Feed.objects.create(name="Meter", tag="plant", unit="kWh", interval=10)
    now = int(time.time())
    feed_service.log_points([(boiler.pk, now, 12.5), (hidden.pk, now, 3.0)])
    device.update([], feed_points(), alarm_state())
    assert device.feeds_served == 2

    answers = peer(
        device.address, "--read", ai(boiler), "--read", f"{ai(boiler)}:object-name",
        "--read", f"{ai(boiler)}:units", "--read", f"{ai(boiler)}:reliability",
        "--read", ai(hidden), "--read", f"{ai(carbon)}:units",
    )  # fmt: skip
    assert answers[0]["value"] == pytest.approx(12.5)
    assert [a.get("value") for a in answers[1:4]] == ["plant:Boiler power", UNITS_KW, NO_FAULT]
    assert answers[4]["error"] == "object: unknown_object"
    assert answers[5]["value"] == UNITS_NONE  # a unit BACnet has no word for


@pytest.mark.django_db
def test_a_feed_stale_or_without_a_value_shows_its_fault(redis_client, device):  # noqa: F811
    old, empty = chosen("Flow temperature", unit="°C"), chosen("Return temperature", unit="°C")
    t = int(time.time()) - 86_400  # a day ago; the test's own `now` follows it
    feed_service.log_points([(old.pk, t, 55.0)])
    stale_at = datetime.fromtimestamp(t + feed_stale_s(old.interval) + 1, tz=UTC)
    device.update([], feed_points(stale_at))
    answers = peer(
        device.address, "--read", f"{ai(old)}:reliability", "--read", f"{ai(old)}:status-flags",
        "--read", ai(old), "--read", f"{ai(empty)}:reliability",
    )  # fmt: skip
    assert answers[0]["value"] == COMMUNICATION_FAILURE
    assert answers[1]["value"] == "BitString('0100')"  # in-alarm, FAULT, overridden, out-of-service
    assert answers[2]["value"] == pytest.approx(55.0)  # the last value, flagged
    assert answers[3]["value"] == NO_SENSOR


@pytest.mark.django_db
def test_a_feed_is_stale_only_past_its_staleness(redis_client):
    fast, slow = chosen("Power", interval=10), chosen("Daily", interval=3600)
    assert feed_stale_s(10) == FEED_STALE_MIN_S  # three 10 s intervals: the floor wins
    assert feed_stale_s(3600) == 3 * 3600
    t = int(time.time()) - 86_400  # a day ago; the test's own `now` follows it
    feed_service.log_points([(fast.pk, t, 1.0), (slow.pk, t, 2.0)])

    def stale_at(seconds: int) -> dict[int, bool]:
        moment = datetime.fromtimestamp(t + seconds, tz=UTC)
        return {p.feed_id: p.stale for p in feed_points(moment)}

    assert stale_at(FEED_STALE_MIN_S) == {fast.pk: False, slow.pk: False}  # at the bound
    assert stale_at(FEED_STALE_MIN_S + 1) == {fast.pk: True, slow.pk: False}
    assert stale_at(3 * 3600) == {fast.pk: True, slow.pk: False}
    assert stale_at(3 * 3600 + 1) == {fast.pk: True, slow.pk: True}


@pytest.mark.django_db
def test_a_refresh_reads_the_chosen_feeds_in_one_query_and_the_alarms_in_one(
    redis_client, django_assert_num_queries
):
    for n in range(5):
        chosen(f"Feed {n}")
    with django_assert_num_queries(1):
        assert len(feed_points()) == 5
    with django_assert_num_queries(1):
        assert alarm_state() == AlarmState(open=0)


def test_units_map_to_bacnet_engineering_units_else_no_units():
    assert [bacnet_units(u) for u in ("°C", "W", "kW", "kWh", "%", "l/s", " KWH ")] == [
        "degreesCelsius", "watts", "kilowatts", "kilowattHours", "percent", "litersPerSecond",
        "kilowattHours",
    ]  # fmt: skip
    assert [bacnet_units(u) for u in ("", "gCO2/kWh", "m3")] == [
        "noUnits",
        "noUnits",
        "cubicMeters",
    ]


@pytest.mark.django_db
def test_the_alarm_objects_follow_an_alarm_raised_then_cleared(device):  # noqa: F811
    site_alarm, count = f"binary-input,{SITE_INSTANCE}", f"analog-value,{SITE_INSTANCE}"
    device.update([], [], alarm_state())
    sub = Subscriber(device.address, "--subscribe", site_alarm, "--notifications", "3")
    try:
        assert sub.take(1) == [{"subscribe": site_alarm, "ok": True}]
        assert sub.next() == {"notification": site_alarm, "value": 0}  # the value now
        assert [a["value"] for a in peer(device.address, "--read", site_alarm, "--read", count,
                                          "--read", f"{site_alarm}:object-name")] == [
            0, 0.0, "Site alarm",
        ]  # fmt: skip

        Alarm.objects.create(key="relay:1", source="relay", message="Relay 1 stuck")
        Alarm.objects.create(key="node-silent:2", source="node", message="Node 2 silent",
                             acknowledged_at=timezone.now())  # fmt: skip
        device.update([], [], alarm_state())
        assert sub.next() == {"notification": site_alarm, "value": 1}
        assert [a["value"] for a in peer(device.address, "--read", site_alarm, "--read", count)] == [
            1, 2.0,  # acknowledged or not, an open alarm counts
        ]  # fmt: skip

        Alarm.objects.update(cleared_at=timezone.now())
        device.update([], [], alarm_state())
        assert sub.next() == {"notification": site_alarm, "value": 0}
        cleared = peer(device.address, "--read", site_alarm, "--read", count)
        assert [a["value"] for a in cleared] == [0, 0.0]
    finally:
        sub.close()


def test_writes_to_a_feed_or_the_alarm_objects_are_refused(device, caplog):  # noqa: F811
    device.update([], [FeedPoint(5, "plant:Boiler power", "kW", 12.5)], AlarmState(open=1))
    answers = peer(
        device.address, "--write", f"{ai(5)}=99", "--write", f"analog-value,{SITE_INSTANCE}=0",
        "--write", f"binary-input,{SITE_INSTANCE}=0",
    )  # fmt: skip
    refused = "property: write_access_denied"
    assert [a.get("error") for a in answers] == [refused, refused, refused]
    after = peer(device.address, "--read", ai(5), "--read", f"analog-value,{SITE_INSTANCE}")
    assert after[0]["value"] == pytest.approx(12.5) and after[1]["value"] == 1.0
    # Each line names the object and property and why: read-only, not "writes not enabled".
    assert [m.split(" refused: ")[1] for m in caplog.messages if " refused: " in m] == [
        f"{ai(5)} present-value: a read-only object",
        f"analog-value,{SITE_INSTANCE} present-value: a read-only object",
        f"binary-input,{SITE_INSTANCE} present-value: a read-only object",
    ]


def test_the_feeds_served_are_bounded_and_stay_in_their_instance_range(device):  # noqa: F811
    many = [FeedPoint(n, f"Feed {n}", "W", float(n)) for n in range(1, MAX_BACNET_FEEDS + 2)]
    device.update([], many)
    assert device.feeds_served == MAX_BACNET_FEEDS
    last = peer(device.address, "--read", ai(MAX_BACNET_FEEDS), "--read",
                ai(MAX_BACNET_FEEDS + 1))  # fmt: skip
    assert last[0]["value"] == pytest.approx(MAX_BACNET_FEEDS)
    assert last[1]["error"] == "object: unknown_object"

    # At the ranges' edges: a zone id or a feed id past its range is not served, so it never
    # shows as another range's object.
    zones = [ZonePoint(n, f"Zone {n}", 20.0, 21.0, False, False)
             for n in (FEED_INSTANCE_BASE - 1, FEED_INSTANCE_BASE)]  # fmt: skip
    feeds = [FeedPoint(n, f"Feed {n}", "W", 1.0) for n in (MAX_FEED_ID, MAX_FEED_ID + 1)]
    assert device.update(zones, feeds) == 1
    assert device.feeds_served == 1
    edges = peer(
        device.address, "--read", f"analog-input,{FEED_INSTANCE_BASE - 1}",
        "--read", ai(MAX_FEED_ID), "--read", f"analog-input,{SITE_INSTANCE}",
    )  # fmt: skip
    assert edges[0]["value"] == pytest.approx(20.0)  # the zone
    assert edges[1]["value"] == pytest.approx(1.0)  # the feed, instance SITE_INSTANCE - 1
    assert edges[2]["error"] == "object: unknown_object"


def test_a_feed_named_as_a_zones_object_is_shown_with_its_id_and_renamed_when_it_changes(device):  # noqa: F811
    feed = FeedPoint(3, "Hall temperature", "°C", 19.0)
    device.update([], [feed])
    device.update([ZonePoint(7, "Hall", 18.5, 20.0, False, False)], [feed])
    renamed = FeedPoint(3, "Hall flow", "°C", 19.0)
    names = peer(device.address, "--read", f"{ai(3)}:object-name", "--read",
                 "analog-input,7:object-name")  # fmt: skip
    assert [a["value"] for a in names] == ["Hall temperature (feed 3)", "Hall temperature"]
    # The alarm objects' names are taken from a feed holding them, as a zone's are.
    alarm_named = FeedPoint(4, "Site alarm", "", 1.0)
    device.update([], [renamed, alarm_named])
    device.update([], [renamed, alarm_named], AlarmState(open=0))
    names = peer(device.address, "--read", f"{ai(3)}:object-name", "--read",
                 f"{ai(4)}:object-name", "--read", f"binary-input,{SITE_INSTANCE}:object-name")  # fmt: skip
    assert [a["value"] for a in names] == ["Hall flow", "Site alarm (feed 4)", "Site alarm"]


def test_a_value_past_a_bacnet_reals_range_shows_over_range(device):  # noqa: F811
    device.update([], [FeedPoint(8, "Energy", "kWh", 1e39), FeedPoint(9, "Power", "W", -3e38)])
    answers = peer(device.address, "--read", f"{ai(8)}:reliability", "--read", ai(8),
                   "--read", f"{ai(8)}:status-flags", "--read", ai(9))  # fmt: skip
    assert [a["value"] for a in answers[:3]] == [OVER_RANGE, 0.0, "BitString('0100')"]
    assert answers[3]["value"] == pytest.approx(-3e38)  # within the range: shown


# The choice: engineers only, bounded.


@pytest.mark.django_db
def test_an_engineer_chooses_a_feed_on_the_api_a_viewer_or_booker_may_not(
    engineer_api, booker_api, viewer_api
):
    feed = Feed.objects.create(name="Boiler power", unit="kW")
    url = f"/api/v1/feeds/{feed.pk}"
    for api in (viewer_api, booker_api):
        assert api.patch(url, {"bacnet_export": True}, format="json").status_code == 403
        assert api.get(url).json()["bacnet_export"] is False  # they read it
    bad = engineer_api.patch(url, {"bacnet_export": "perhaps"}, format="json")
    assert bad.status_code == 400 and "bacnet_export" in bad.json()["fields"]
    ok = engineer_api.patch(url, {"bacnet_export": True}, format="json")
    assert ok.status_code == 200 and ok.json()["bacnet_export"] is True
    feed.refresh_from_db()
    assert feed.bacnet_export is True


@pytest.mark.django_db
def test_at_most_the_bound_of_feeds_are_chosen(engineer_api):
    Feed.objects.bulk_create(
        Feed(name=f"Feed {n}", bacnet_export=True) for n in range(MAX_BACNET_FEEDS - 1)
    )
    last, past = Feed.objects.create(name="Last"), Feed.objects.create(name="Past")
    ok = engineer_api.patch(f"/api/v1/feeds/{last.pk}", {"bacnet_export": True}, format="json")
    assert ok.status_code == 200  # the 200th
    again = engineer_api.patch(f"/api/v1/feeds/{last.pk}", {"name": "Last one"}, format="json")
    assert again.status_code == 200  # a chosen feed edited is not one more
    refused = engineer_api.patch(f"/api/v1/feeds/{past.pk}", {"bacnet_export": True}, format="json")
    assert refused.status_code == 400 and "bacnet_export" in refused.json()["fields"]
    made = engineer_api.post("/api/v1/feeds", {"name": "New", "bacnet_export": True}, format="json")
    assert made.status_code == 400 and "bacnet_export" in made.json()["fields"]
    assert Feed.objects.filter(bacnet_export=True).count() == MAX_BACNET_FEEDS


@pytest.mark.django_db
def test_the_command_serves_the_chosen_feeds_with_the_zones(redis_client, settings, caplog):
    f.zone("Hall", temp=19.0)
    chosen("Boiler power")
    settings.BMS_BACNET_SERVER_ENABLED = True
    settings.BMS_BACNET_ADDRESS = f"{OUR_HOST}/32"
    settings.BMS_BACNET_SERVER_PORT = free_udp_port(OUR_HOST)
    caplog.set_level(logging.INFO)
    call_command("bacnet_server", "--once")
    assert "BACnet server: 1 feeds, 1 zones served" in caplog.messages


@pytest.mark.django_db
def test_a_feeds_name_with_control_or_bidi_characters_is_shown_on_one_line_still_unique(
    redis_client,
    device,  # noqa: F811
):
    typed, broken = chosen("Boiler power"), chosen("Boiler\n\u202epower")
    device.update([], feed_points())
    names = peer(
        device.address,
        "--read", f"{ai(typed.pk)}:object-name", "--read", f"{ai(broken.pk)}:object-name",
    )  # fmt: skip
    assert [a["value"] for a in names] == [
        "plant:Boiler power", f"plant:Boiler power (feed {broken.pk})",
    ]  # fmt: skip


@pytest.mark.django_db
def test_a_feed_whose_names_are_all_taken_is_not_shown_and_said_once_not_every_refresh(
    redis_client,
    device,  # noqa: F811
    caplog,
):
    first = Feed.objects.create(name="placeholder", bacnet_export=True)
    second = Feed.objects.create(name="Active alarms", bacnet_export=True)
    Feed.objects.filter(pk=first.pk).update(name=f"Active alarms (feed {second.pk})")
    for _ in range(3):  # three refreshes
        device.update([], feed_points(), AlarmState(open=0))
    said = [m for m in caplog.messages if "not shown" in m]
    assert said == [
        f"BACnet server: feed {second.pk} not shown: the name "
        f"'Active alarms (feed {second.pk})' is taken"
    ]
    answer = peer(device.address, "--read", f"{ai(second.pk)}")
    assert answer[0]["error"] == "object: unknown_object"
