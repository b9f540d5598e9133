"""The admin's Finding page obeys the marking rules the API and the staff page obey
(Finding.refusal) and keeps who and when (an outside tester set a fixed finding back to new
there, #30). Driven through the real admin with a logged-in client."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import time_machine
from django.test import Client

from findings.models import Finding
from tests.findings.conftest import MONDAY, WEEK


@pytest.fixture
def finding(db) -> Finding:
    return Finding.objects.create(
        rule="heating_unoccupied", key="heating_unoccupied:zone:1", subject="Zone 'Hall'",
        period_start=MONDAY, period_end=MONDAY + WEEK, last_seen=MONDAY + WEEK,
        detail="Valve ON 4.0 h outside occupancy", what_to_check="the zone's schedule",
    )  # fmt: skip


def logged_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def change(client: Client, finding: Finding, state: str):
    return client.post(f"/admin/findings/finding/{finding.pk}/change/", {"state": state})


def test_an_engineer_marks_a_finding_fixed_in_the_admin_and_who_and_when_are_kept(
    finding, engineer
):
    at = datetime(2030, 1, 15, 9, 30, tzinfo=UTC)
    with time_machine.travel(at, tick=False):
        response = change(logged_in(engineer), finding, "fixed")
    assert response.status_code == 302
    finding.refresh_from_db()
    assert finding.state == Finding.State.FIXED
    assert (finding.state_by, finding.state_at, finding.closed_at) == (engineer, at, at)


def test_the_admin_refuses_to_set_a_fixed_finding_back_and_keeps_its_record(
    finding, engineer, superuser
):
    at = datetime(2030, 1, 15, 9, 30, tzinfo=UTC)
    with time_machine.travel(at, tick=False):
        finding.mark(Finding.State.FIXED, engineer)
    for state, said in (
        ("new", b"Select a valid choice"),  # not even offered: the evaluator's word
        ("acknowledged", b"is fixed and closed"),
        ("false_alarm", b"is fixed and closed"),
    ):
        response = change(logged_in(superuser), finding, state)
        assert response.status_code == 200  # the form again, saying why
        assert said in response.content
        finding.refresh_from_db()
        assert finding.state == Finding.State.FIXED
        assert (finding.state_by, finding.state_at, finding.closed_at) == (engineer, at, at)


def test_the_admin_offers_new_only_while_the_finding_is_new(finding, engineer):
    client = logged_in(engineer)
    page = client.get(f"/admin/findings/finding/{finding.pk}/change/").content
    assert b'<option value="new" selected>' in page
    change(client, finding, "acknowledged")
    page = client.get(f"/admin/findings/finding/{finding.pk}/change/").content
    assert b'value="new"' not in page and b'value="fixed"' in page
    response = change(client, finding, "new")  # back to new: the evaluator's word alone
    assert response.status_code == 200 and b"Select a valid choice" in response.content
    finding.refresh_from_db()
    assert finding.state == Finding.State.ACKNOWLEDGED


def test_saving_without_a_change_keeps_who_and_when(finding, engineer):
    finding.mark(Finding.State.ACKNOWLEDGED, engineer)
    before = Finding.objects.get(pk=finding.pk).state_at
    assert change(logged_in(engineer), finding, "acknowledged").status_code == 302
    finding.refresh_from_db()
    assert finding.state_at == before and finding.state_by == engineer


def test_a_viewer_may_not_change_a_finding_in_the_admin(finding, viewer):
    response = change(logged_in(viewer), finding, "fixed")
    assert response.status_code == 403
    finding.refresh_from_db()
    assert finding.state == Finding.State.NEW and finding.state_by is None
