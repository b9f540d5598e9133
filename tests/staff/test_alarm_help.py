"""Alarms say where and what to do (#28 item 4): each alarm on the staff pages names what to do,
links to the object's page and to its own row of ALARMS.md, served with the site at
/staff/help/alarms (staff/help.py)."""

from __future__ import annotations

import re

import pytest

from alarms.lifecycle import raise_alarm
from alarms.links import KINDS, help_url, thing_url
from sensors.models import Node, Sensor
from staff.help import rendered

pytestmark = pytest.mark.django_db


def documented_kinds() -> set[str]:
    """The kinds in the first column of ALARMS.md's table of every alarm."""
    html = rendered("alarms")
    return set(re.findall(r'<tr id="([a-z0-9-]+)"', html)) | set(
        re.findall(r'<span id="([a-z0-9-]+)"', html)
    )


def test_every_documented_alarm_kind_has_links_and_words_and_every_kind_is_documented():
    assert documented_kinds() == set(KINDS)
    assert all(kind.action for kind in KINDS.values())


def test_a_range_alarm_links_to_its_sensor_and_its_help_row(engineer, client, redis_client):
    node = Node.objects.create(name="emontx6", location="Seminar room", key_hash="x")
    sensor = Sensor.objects.create(node=node, key="t", name="temperature", max_valid=10)
    key = f"sensor-range:{sensor.pk}"
    raise_alarm(key, "Seminar room temperature read 11.6 °C", source="sensor")
    assert help_url(key) == "/staff/help/alarms#sensor-range"
    assert thing_url(key) == f"/admin/sensors/sensor/{sensor.pk}/change/"
    client.force_login(engineer)
    for page in ("/staff/alarms/", "/staff/"):
        html = client.get(page).content.decode()
        assert 'href="/staff/help/alarms#sensor-range"' in html
        assert f'href="/admin/sensors/sensor/{sensor.pk}/change/">Open the sensor' in html
        assert KINDS["sensor-range"].action in html


def test_a_system_alarm_links_to_help_only(engineer, client, redis_client):
    raise_alarm("celery-beat", "Celery beat is not alive", source="system")
    assert thing_url("celery-beat") is None
    client.force_login(engineer)
    html = client.get("/staff/alarms/").content.decode()
    assert 'href="/staff/help/alarms#celery-beat"' in html and "Open the" not in html


def test_an_unknown_kind_links_to_the_top_of_the_help(redis_client):
    assert help_url("docs-test:1") == "/staff/help/alarms"
    assert thing_url("docs-test:1") is None


def test_a_viewer_reads_the_help_and_an_anonymous_visitor_is_sent_to_log_in(viewer, client):
    assert client.get("/staff/help/alarms").status_code == 302
    client.force_login(viewer)
    page = client.get("/staff/help/alarms")
    assert page.status_code == 200
    html = page.content.decode()
    assert '<tr id="sensor-range" class="alarm-kind">' in html
    # Links to the other docs point at their pages here, anchors kept.
    assert 'href="/staff/help/ingest#node-state-and-alarms"' in html
    assert client.get("/staff/help/ingest").status_code == 200


@pytest.mark.parametrize("name", ["nope", "..", "ALARMS.md", "a" * 41, "alarms%00"])
def test_a_name_that_is_not_a_doc_is_a_404(viewer, client, name):
    client.force_login(viewer)
    assert client.get(f"/staff/help/{name}").status_code == 404
