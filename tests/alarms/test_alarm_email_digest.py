"""Alarm e-mail goes out as a digest from beat's task, never from the request or worker that
raised the alarm (issue #25: 7,106 alarms were 7,106 e-mails, each sent inline)."""

from __future__ import annotations

import json
import time
import zlib

import pytest
from django.core import mail

from alarms import notify
from alarms.lifecycle import count_alarm, raise_alarm
from alarms.models import Alarm
from alarms.tasks import send_alarm_digest
from sensors.models import GatewayKey, Site
from tests.wsgi_client import WsgiClient as Client

pytestmark = pytest.mark.django_db


@pytest.fixture
def recipients(settings):
    settings.BMS_ALARM_EMAILS = ["estates@example.org"]
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"


def test_an_ingest_request_that_raises_an_alarm_sends_no_mail(recipients, redis_client):
    site = Site.objects.create(name="Home", slug="home")
    gateway = GatewayKey(site=site, name="emonpi")
    key = gateway.set_new_key()
    gateway.save()
    now = int(time.time())
    rows = [[now, f"junk{i}", 1] for i in range(100)]
    r = Client().generic(
        "POST", f"/input/bulk.json?sentat={now}&cb=1", zlib.compress(json.dumps(rows).encode()),
        HTTP_AUTHORIZATION=f"Bearer {key}",
    )  # fmt: skip
    assert r.content == b"ok"
    assert Alarm.objects.open().count() == 1  # gateway-input-errors
    assert mail.outbox == []  # nothing sent on the web thread
    assert send_alarm_digest() == 1
    (message,) = mail.outbox
    assert message.subject.startswith("[BMS warning] Gateway key 'emonpi' sent values")


def test_many_alarms_are_one_message_most_urgent_first(recipients, redis_client):
    for i in range(30):
        raise_alarm(f"node-silent:{i}", f"Node n{i} silent", source="node")
    raise_alarm("relay:1", "Relay 'Boiler' does not answer", source="relay", severity="critical")
    assert send_alarm_digest() == 31
    (message,) = mail.outbox
    assert message.subject == "[BMS critical] 31 alarms: Relay 'Boiler' does not answer"
    body = message.body
    assert body.index("Relay 'Boiler'") < body.index("Node n29 silent")  # critical first
    assert body.count("\n- [") + body.startswith("- [") == notify.DIGEST_LISTED
    assert "and 11 more: see /staff/alarms/" in body
    assert not Alarm.objects.filter(emailed_at__isnull=True).exists()


def test_at_most_one_digest_per_interval(recipients, redis_client, settings):
    settings.BMS_ALARM_EMAIL_EVERY_S = 60
    raise_alarm("a:1", "First", source="node")
    assert send_alarm_digest() == 1
    raise_alarm("a:2", "Second", source="node")
    raise_alarm("a:3", "Third", source="node")
    assert send_alarm_digest() == 0  # within the interval: they wait
    assert len(mail.outbox) == 1
    assert 0 < redis_client.ttl(notify.DIGEST_CLAIM_KEY) <= 60
    redis_client.delete(notify.DIGEST_CLAIM_KEY)  # the interval has passed
    assert send_alarm_digest() == 2
    assert len(mail.outbox) == 2 and mail.outbox[1].subject == "[BMS warning] 2 alarms: Third"


def test_a_counted_alarm_is_one_row_and_says_how_often(recipients, redis_client):
    assert count_alarm("inputs-capped:1", "Readings skipped", add=3000, source="node")
    assert not count_alarm("inputs-capped:1", "Readings skipped again", add=51, source="node")
    (alarm,) = Alarm.objects.all()
    assert alarm.occurrences == 3051 and alarm.message == "Readings skipped again"
    send_alarm_digest()
    assert "3,051 occurrences" in mail.outbox[0].body


def test_without_recipients_nothing_waits_to_be_sent(settings, redis_client):
    settings.BMS_ALARM_EMAILS = []
    raise_alarm("a:1", "First", source="node")
    assert send_alarm_digest() == 0 and mail.outbox == []
    assert not Alarm.objects.filter(emailed_at__isnull=True).exists()


def test_each_alarm_in_the_mail_says_what_to_do_and_where_its_help_is(recipients, redis_client):
    from alarms.links import KINDS

    raise_alarm("relay:1", "Relay 'Boiler' does not answer", source="relay", severity="critical")
    send_alarm_digest()
    (message,) = mail.outbox
    assert f"What to do: {KINDS['relay'].action} Help: /staff/help/alarms#relay" in message.body
