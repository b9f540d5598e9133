"""Alarms are raised once per condition, e-mailed by the digest task (never by the code that
raises them), cleared when it ends."""

import pytest
from django.core import mail

from alarms.lifecycle import acknowledge, clear_alarm, raise_alarm
from alarms.models import Alarm
from alarms.tasks import send_alarm_digest

pytestmark = pytest.mark.django_db


def test_a_condition_is_raised_once(settings, redis_client):
    settings.BMS_ALARM_EMAILS = ["estates@example.org"]
    first, created = raise_alarm("relay:3", "Relay 'Boiler' does not answer", source="relay")
    again, created_again = raise_alarm("relay:3", "Relay 'Boiler' does not answer", source="relay")
    assert created and not created_again
    assert first.pk == again.pk
    assert Alarm.objects.count() == 1
    assert mail.outbox == []  # not from the code that raised it: from the digest task
    assert send_alarm_digest() == 1
    assert send_alarm_digest() == 0  # sent once
    assert len(mail.outbox) == 1
    assert "Boiler" in mail.outbox[0].subject
    assert mail.outbox[0].to == ["estates@example.org"]


def test_clearing_closes_it_and_a_new_occurrence_is_a_new_alarm(settings, redis_client):
    settings.BMS_ALARM_EMAILS = []
    raise_alarm("node-silent:1", "Node emontx1 silent", source="node")
    assert clear_alarm("node-silent:1") == 1
    assert clear_alarm("node-silent:1") == 0
    _, created = raise_alarm("node-silent:1", "Node emontx1 silent", source="node")
    assert created
    assert Alarm.objects.filter(key="node-silent:1").count() == 2
    assert Alarm.objects.filter(key="node-silent:1", cleared_at__isnull=True).count() == 1
    assert send_alarm_digest() == 0
    assert not mail.outbox  # nobody configured to receive them


def test_acknowledge_records_who(engineer):
    alarm, _ = raise_alarm("disk", "Data disk 95% full", source="feeds", severity="critical")
    acknowledge(alarm, engineer)
    alarm.refresh_from_db()
    assert alarm.acknowledged_by == engineer and alarm.acknowledged_at is not None
    assert alarm.is_open  # acknowledged is not cleared: the condition still stands


def test_a_mail_server_outage_does_not_lose_the_alarm(settings, redis_client):
    settings.BMS_ALARM_EMAILS = ["estates@example.org"]
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST = "127.0.0.1"
    settings.EMAIL_PORT = 9  # discard port: nothing listens, the connection is refused
    settings.EMAIL_TIMEOUT = 2
    alarm, created = raise_alarm("meter:2", "Meter not answering", source="meter")
    assert created and Alarm.objects.filter(pk=alarm.pk).exists()
    assert send_alarm_digest() == 0  # refused by the mail server: logged, given back
    alarm.refresh_from_db()
    assert alarm.emailed_at is None and alarm.is_open
