"""Every alarm clears when its cause goes away, including when the rule or the object that
raised it is removed (#28): the watchdog's sweep (alarms/subjects.py) clears them."""

from __future__ import annotations

import time

import pytest

from alarms import watchdog
from alarms.lifecycle import raise_alarm
from alarms.models import Alarm
from alarms.subjects import MAX_PER_SWEEP, sweep_removed
from control.models import Zone
from sensors.ingest import node_state as state
from sensors.ingest.processing import ingest_rows
from sensors.models import Node, Sensor
from sensors.tasks import check_silent_nodes
from tests.sensors.conftest import make_node

pytestmark = pytest.mark.django_db

T0 = 1_700_000_000


def is_open(key: str) -> bool:
    return Alarm.objects.open().filter(key=key).exists()


@pytest.fixture
def ranged(redis_client) -> Sensor:
    node, _ = make_node()
    node.location = "Seminar room"
    node.save()
    return Sensor.objects.create(
        node=node, key="t", name="temperature", kind="temperature", unit="°C", max_valid=10.0
    )


def test_the_range_alarm_names_the_room_the_sensor_the_unit_and_the_bound(ranged):
    ingest_rows(ranged.node_id, [[T0, {"t": 11.55}]])
    message = Alarm.objects.open().get(key=f"sensor-range:{ranged.pk}").message
    assert message.startswith(
        "Seminar room temperature read 11.6 °C, outside its valid range up to 10.0 °C."
    )


def test_a_sensor_named_after_its_room_is_not_named_twice(ranged):
    # The demo's sensors are "Seminar room temperature" on a node located in "Seminar room":
    # an outside tester read "Seminar room Seminar room temperature read 11.9 °C".
    ranged.name = "Seminar room temperature"
    ranged.save()
    ingest_rows(ranged.node_id, [[T0, {"t": 11.55}]])
    message = Alarm.objects.open().get(key=f"sensor-range:{ranged.pk}").message
    assert message.startswith("Seminar room temperature read 11.6 °C, outside its valid range")


def test_a_range_alarm_clears_once_the_range_is_removed_and_can_be_raised_again(ranged):
    key = f"sensor-range:{ranged.pk}"
    ingest_rows(ranged.node_id, [[T0, {"t": 11.55}]])
    assert is_open(key)
    ranged.max_valid = None
    ranged.save()
    ingest_rows(ranged.node_id, [[T0 + 10, {"t": 12.0}]])  # no range: nothing judges it
    watchdog.run_all()
    assert not is_open(key)
    # The range back and a value outside it: a new alarm (the worker's bookkeeping was reset).
    ranged.max_valid = 10.0
    ranged.save()
    ingest_rows(ranged.node_id, [[T0 + 20, {"t": 12.0}]])
    assert is_open(key)


def test_a_range_alarm_of_a_deleted_sensor_clears(ranged):
    key = f"sensor-range:{ranged.pk}"
    ingest_rows(ranged.node_id, [[T0, {"t": 11.55}]])
    ranged.delete()
    assert sweep_removed() == {"sensor-range": [int(key.split(":")[1])]}
    assert not is_open(key)


def test_a_range_alarm_whose_rule_stays_stays_open(ranged):
    ingest_rows(ranged.node_id, [[T0, {"t": 11.55}]])
    assert sweep_removed() == {}
    assert is_open(f"sensor-range:{ranged.pk}")


@pytest.mark.parametrize("how", ["disabled", "deleted"])
def test_a_silent_alarm_of_a_node_disabled_or_deleted_clears(redis_client, how):
    node, _ = make_node(interval=10)
    now = time.time()
    ingest_rows(node.pk, [[int(now), {"a": 1.0}]], now=now)
    check_silent_nodes(now=now + 31)
    node_pk, key = node.pk, f"node-silent:{node.pk}"
    assert is_open(key)
    if how == "disabled":
        Node.objects.filter(pk=node.pk).update(enabled=False)
    else:
        node.delete()
    check_silent_nodes(now=now + 40)  # the silent check looks at enabled nodes only
    assert is_open(key)
    watchdog.run_all()
    assert not is_open(key)
    assert not redis_client.sismember(state.SILENT_KEY, node_pk)


def test_an_alarm_of_a_deleted_zone_clears_and_one_of_a_kept_zone_stays(redis_client):
    kept = Zone.objects.create(name="Hall", slug="hall")
    gone = Zone.objects.create(name="Annex", slug="annex")
    for zone in (kept, gone):
        raise_alarm(f"zone-sensor:{zone.pk}", f"{zone.name} has no reading", source="control")
    gone_pk = gone.pk
    gone.delete()
    assert sweep_removed() == {"zone-sensor": [gone_pk]}
    assert is_open(f"zone-sensor:{kept.pk}")


def test_system_alarms_without_an_object_are_left_to_their_own_checks(redis_client):
    raise_alarm("inputs-capped:none", "capped", source="node")
    raise_alarm("control-db:unavailable", "db away", source="control")
    assert sweep_removed() == {}
    assert is_open("inputs-capped:none") and is_open("control-db:unavailable")


def test_the_sweep_looks_at_a_bounded_number_per_kind(redis_client):
    Alarm.objects.bulk_create(
        Alarm(key=f"sensor-range:{900_000 + i}", message="m", source="sensor")
        for i in range(MAX_PER_SWEEP + 1)
    )
    cleared = sweep_removed()
    assert len(cleared["sensor-range"]) == MAX_PER_SWEEP
    assert Alarm.objects.open().filter(key__startswith="sensor-range:").count() == 1


def test_a_silent_node_alarm_names_where_the_node_is(redis_client):
    node, _ = make_node(interval=10)
    Node.objects.filter(pk=node.pk).update(location="Seminar room")
    now = time.time()
    ingest_rows(node.pk, [[int(now), {"a": 1.0}]], now=now)
    check_silent_nodes(now=now + 31)
    message = Alarm.objects.open().get(key=f"node-silent:{node.pk}").message
    assert message.startswith("Node emontx1 (Seminar room) silent since ")


def test_with_several_sites_a_silent_node_alarm_names_its_site(redis_client):
    """Node names are unique per site: two sites' 'emontx' silent were two alarms naming
    neither site (outside tester, #26)."""
    from sensors.models import Site

    home = Site.objects.create(name="Home", slug="home")
    barn = Site.objects.create(name="Barn", slug="barn")
    a = Node.objects.create(name="emontx", site=home, interval=10, key_hash="a")
    b = Node.objects.create(name="emontx", site=barn, interval=10, key_hash="b")
    now = time.time()
    check_silent_nodes(now=now + 3600)
    assert (
        Alarm.objects.open()
        .get(key=f"node-silent:{a.pk}")
        .message.startswith("Node emontx of site 'Home' silent since ")
    )
    assert (
        Alarm.objects.open()
        .get(key=f"node-silent:{b.pk}")
        .message.startswith("Node emontx of site 'Barn' silent since ")
    )
