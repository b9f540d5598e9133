"""The weekly digest e-mail (findings/digest.py): each site's open findings most costly first,
with links, to its report recipients; nothing when there are none. Django's locmem backend
(pytest-django's mailoutbox) and the task's own clock."""

from __future__ import annotations

from datetime import timedelta
from io import StringIO

import pytest
from django.conf import settings
from django.core.management import call_command

from findings import digest, rules
from findings.evaluate import evaluate
from findings.models import Finding
from findings.tasks import send_weekly_digest
from tests.findings.conftest import MONDAY, WEEK, command

H = timedelta(hours=1)


@pytest.fixture
def recipients(site_model):
    from energy.models import MeterNode, ReportRecipient

    site = site_model["site"]
    office = MeterNode.objects.create(site=site, name="Office", kind="building")
    ReportRecipient.objects.create(site=site, email="Estates@example.org")
    ReportRecipient.objects.create(site=site, node=office, email="office@example.org")
    ReportRecipient.objects.create(site=site, node=office, email="estates@example.org")
    return ["estates@example.org", "office@example.org"]


def _two_faults(site_model) -> None:
    """The hall heated 17:00-21:00 on Monday (£0.99 a week) and the boiler short-cycling on
    Tuesday morning (£0.49)."""
    command(site_model["valve"], MONDAY + 8 * H, True)
    command(site_model["valve"], MONDAY + 21 * H, False)
    for i in range(18):
        at = MONDAY + 30 * H + i * timedelta(minutes=60 / 9)
        command(site_model["boiler"], at, True, "heating_plant")
        command(site_model["boiler"], at + timedelta(minutes=3), False, "heating_plant")
    evaluate(MONDAY, MONDAY + WEEK)


def test_the_digest_lists_the_sites_open_findings_most_costly_first_with_links(
    site_model, recipients, mailoutbox, settings
):
    settings.BMS_SITE_URL = "https://bms.example.org/"
    _two_faults(site_model)
    assert send_weekly_digest((MONDAY + WEEK + 7.5 * H).timestamp()) == 1
    [mail] = mailoutbox
    assert mail.to == recipients  # each address once, site-wide and per building
    assert mail.subject == "[BMS] CAT: 2 open findings, £1.48 a week"
    body = mail.body
    assert "week to Mon 14 Jan 2030" in body
    hall, boiler = (
        Finding.objects.get(rule=rules.HEATING_UNOCCUPIED),
        Finding.objects.get(rule=rules.SHORT_CYCLING),
    )
    assert body.index("1. Heating an empty room: Zone 'Hall'") < body.index(
        "2. Boiler short-cycling"
    )
    assert "£0.99 · 14.1 kWh · 2.6 kg CO2e a week" in body
    assert f"https://bms.example.org/staff/findings/#finding-{hall.pk}" in body
    assert f"https://bms.example.org/staff/findings/#finding-{boiler.pk}" in body
    assert "What to check: the zone's schedule and bookings" in body


def test_nothing_is_sent_when_no_finding_is_open(site_model, recipients, mailoutbox, engineer):
    _two_faults(site_model)
    for f in Finding.objects.all():  # one fixed (closed), one a false alarm
        f.mark(Finding.State.FIXED if f.rule == rules.SHORT_CYCLING else "false_alarm", engineer)
    assert send_weekly_digest(MONDAY.timestamp()) == 0
    assert mailoutbox == []


def test_a_site_without_recipients_gets_no_message(site_model, mailoutbox):
    _two_faults(site_model)
    assert digest.send_weekly(MONDAY + WEEK) == []
    assert mailoutbox == []


def test_a_long_list_names_the_most_costly_and_counts_the_rest(site_model, recipients, mailoutbox):
    for n in range(digest.LISTED + 3):
        Finding.objects.create(
            rule=rules.HEATING_UNOCCUPIED, key=f"k{n}", subject=f"Zone {n}",
            site=site_model["site"], period_start=MONDAY, period_end=MONDAY + H,
            last_seen=MONDAY + H, detail="d", what_to_check="w", waste_kwh_week=n,
            waste_money_week=n / 10, waste_kg_co2_week=0, currency="GBP",
        )  # fmt: skip
    digest.send_weekly(MONDAY + WEEK)
    body = mailoutbox[0].body
    assert body.startswith("Open findings at CAT")
    assert "1. Heating an empty room: Zone 22" in body and "Zone 2\n" not in body
    assert "... and 3 more: /staff/findings/" in body  # no site URL set: a path


def test_the_digest_runs_weekly_off_the_control_and_ingest_queues():
    entry = settings.CELERY_BEAT_SCHEDULE["findings-weekly-digest"]
    assert entry["task"] == "findings.tasks.send_weekly_digest"
    assert entry["schedule"].day_of_week == {1}
    assert settings.CELERY_TASK_ROUTES[1]["findings.tasks.*"] == {"queue": "commit"}


def test_the_command_sends_it_now(site_model, recipients, mailoutbox):
    _two_faults(site_model)
    out = StringIO()
    call_command("find_waste_digest", stdout=out)
    assert "CAT: 2 findings to estates@example.org, office@example.org" in out.getvalue()
    assert len(mailoutbox) == 1


def test_a_name_with_a_line_break_stays_on_its_findings_line(site_model, recipients, mailoutbox):
    """A zone named with a newline (the fresh-eyes tester's): the subject is one line in the
    finding, the digest's numbered list and the e-mail's subject."""
    zone, site = site_model["zone"], site_model["site"]
    zone.name = "Hall\nEast\r\n\x07wing\u2028north"
    zone.save()
    site.name = "CAT\nMain"
    site.save()
    _two_faults(site_model)
    hall = Finding.objects.get(rule=rules.HEATING_UNOCCUPIED)
    assert hall.subject == "Zone 'Hall East wing north'"
    send_weekly_digest((MONDAY + WEEK + 7.5 * H).timestamp())
    [mail] = mailoutbox
    assert mail.subject.startswith("[BMS] CAT Main: 2 open findings")
    assert "1. Heating an empty room: Zone 'Hall East wing north'\n   £0.99" in mail.body
    lines = mail.body.splitlines()
    # every finding's line starts with its number or the indent: none starts with a name
    assert all(not line or line[0].isdigit() or line.startswith(("   ", "Open", "...", "Estim"))
               for line in lines), lines  # fmt: skip


def test_a_finding_stored_with_a_line_break_is_one_line_in_the_digest(
    site_model, recipients, mailoutbox
):
    Finding.objects.create(
        rule="heating_unoccupied", key="old", subject="Zone 'Hall\nEast'", site=site_model["site"],
        period_start=MONDAY, period_end=MONDAY + H, last_seen=MONDAY + H,
        detail="Valve ON\n2. Fake line", what_to_check="the\rschedule",
    )  # fmt: skip
    send_weekly_digest((MONDAY + WEEK).timestamp())
    body = mailoutbox[0].body
    assert "1. Heating an empty room: Zone 'Hall East'" in body
    assert "   Valve ON 2. Fake line" in body and "What to check: the schedule" in body


def test_a_name_with_a_bidi_override_reads_forwards_on_the_page_and_in_the_digest(
    site_model, recipients, mailoutbox, engineer
):
    """U+202E in a zone's name reversed the rest of the line: the finding's subject on the
    findings page and in the digest (an outside tester, #30)."""
    from django.test import Client

    zone = site_model["zone"]
    zone.name = "Hall\u202e tsaE\u2066\u200f"
    zone.save()
    _two_faults(site_model)
    hall = Finding.objects.get(rule=rules.HEATING_UNOCCUPIED)
    assert hall.subject == "Zone 'Hall tsaE'"
    client = Client()
    client.force_login(engineer)
    page = client.get("/staff/findings/").content.decode()
    assert "Zone &#x27;Hall tsaE&#x27;" in page
    assert not any(c in page for c in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
    send_weekly_digest((MONDAY + WEEK + 7.5 * H).timestamp())
    [mail] = mailoutbox
    assert "1. Heating an empty room: Zone 'Hall tsaE'\n" in mail.body
    assert "\u202e" not in mail.body and "\u202e" not in mail.subject
