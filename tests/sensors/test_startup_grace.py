"""Start-up grace: right after a worker starts, a node is judged silent only once it has
had BMS_ALARM_STARTUP_GRACE (and at least 3 of its intervals) to post. Time is given as now=,
measured from alarms.lifecycle.PROCESS_STARTED_AT, never slept."""

from __future__ import annotations

import pytest

from alarms import lifecycle as alarms
from alarms.models import Alarm
from sensors.ingest import node_state as state
from sensors.models import Node
from sensors.tasks import check_silent_nodes

pytestmark = pytest.mark.django_db

START = alarms.PROCESS_STARTED_AT


def _node(name: str, interval: int) -> Node:
    node = Node(name=name, interval=interval)
    node.set_new_key()
    node.save()
    return node


@pytest.fixture
def quiet_nodes(redis_client, settings):
    """Ten nodes last heard an hour before this process started (the site was down)."""
    settings.BMS_ALARM_STARTUP_GRACE = 120
    nodes = [_node(f"emontx-{i}", 10) for i in range(10)]
    for node in nodes:
        redis_client.hset(state.SEEN_KEY, str(node.pk), int(START - 3600))
    return nodes


def test_no_alarm_storm_during_the_grace(quiet_nodes, mailoutbox, settings):
    settings.BMS_ALARM_EMAILS = ["estates@example.org"]
    report = check_silent_nodes(now=START + 1)
    assert report["raised"] == [] and len(report["waiting"]) == 10
    report = check_silent_nodes(now=START + 119)
    assert report["raised"] == []
    assert not Alarm.objects.exists() and mailoutbox == []


def test_nodes_that_post_in_the_grace_never_alarm(quiet_nodes, redis_client):
    for node in quiet_nodes:
        redis_client.hset(state.SEEN_KEY, str(node.pk), int(START + 115))
    assert check_silent_nodes(now=START + 121)["raised"] == []
    assert not Alarm.objects.exists()


def test_a_node_still_silent_after_the_grace_alarms(quiet_nodes, redis_client):
    for node in quiet_nodes[1:]:
        redis_client.hset(state.SEEN_KEY, str(node.pk), int(START + 100))
    report = check_silent_nodes(now=START + 121)
    assert report["raised"] == [quiet_nodes[0].pk]
    alarm = Alarm.objects.get(key=f"node-silent:{quiet_nodes[0].pk}")
    # Since when, not a duration frozen at the moment it was raised.
    assert "silent since" in alarm.message and " s " not in alarm.message.split("(")[0]


def test_a_slow_node_gets_three_of_its_intervals(redis_client, settings):
    settings.BMS_ALARM_STARTUP_GRACE = 60
    slow = _node("weather", 300)  # posts every 5 min: 15 min to be judged
    redis_client.hset(state.SEEN_KEY, str(slow.pk), int(START - 3600))
    assert check_silent_nodes(now=START + 899)["raised"] == []
    assert check_silent_nodes(now=START + 901)["raised"] == [slow.pk]


def test_grace_zero_judges_at_once(quiet_nodes, settings):
    settings.BMS_ALARM_STARTUP_GRACE = 0
    assert len(check_silent_nodes(now=START + 1)["raised"]) == 10


def test_an_alarm_open_before_the_restart_is_not_cleared_by_the_grace(quiet_nodes):
    node = quiet_nodes[0]
    alarms.raise_alarm(f"node-silent:{node.pk}", "Node silent since earlier", source="node")
    report = check_silent_nodes(now=START + 1)
    assert node.pk not in report["cleared"] and node.pk not in report["waiting"]
    assert Alarm.objects.get(key=f"node-silent:{node.pk}").is_open
