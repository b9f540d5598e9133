"""/api/v1/findings: read by staff, most costly first; the state set by engineers, with who."""

from __future__ import annotations

from datetime import timedelta

import pytest

from findings.models import Finding
from tests.findings.conftest import MONDAY


def _finding(key: str, money: float | None, kwh: float | None = None) -> Finding:
    return Finding.objects.create(
        rule="heating_unoccupied", key=key, subject=key, period_start=MONDAY,
        period_end=MONDAY + timedelta(hours=1), last_seen=MONDAY + timedelta(hours=1),
        detail="seen", what_to_check="the schedule", waste_money_week=money, waste_kwh_week=kwh,
    )  # fmt: skip


@pytest.fixture
def findings(db):
    return [_finding("cheap", 1.0, 14), _finding("dear", 9.5, 130), _finding("no-cost", None)]


def test_the_list_is_most_costly_first(findings, viewer_api):
    body = viewer_api.get("/api/v1/findings").json()
    rows = body["results"] if isinstance(body, dict) else body
    assert [r["subject"] for r in rows] == ["dear", "cheap", "no-cost"]


def test_an_engineer_marks_a_finding_and_who_and_when_are_kept(findings, engineer_api, engineer):
    pk = findings[1].pk
    response = engineer_api.patch(f"/api/v1/findings/{pk}", {"state": "false_alarm"}, format="json")
    assert response.status_code == 200, response.content
    f = Finding.objects.get(pk=pk)
    assert f.state == "false_alarm" and f.state_by == engineer and f.state_at is not None
    assert response.json()["state_by"] == engineer.pk


def test_fixed_closes_the_finding(findings, engineer_api):
    pk = findings[0].pk
    assert (
        engineer_api.patch(f"/api/v1/findings/{pk}", {"state": "fixed"}, format="json").status_code
        == 200
    )
    assert Finding.objects.get(pk=pk).closed_at is not None
    open_ids = [r["id"] for r in _rows(engineer_api.get("/api/v1/findings?open=1").json())]
    assert pk not in open_ids and len(open_ids) == 2


def _rows(body):
    return body["results"] if isinstance(body, dict) else body


def test_a_viewer_may_not_mark_a_finding(findings, viewer_api):
    pk = findings[0].pk
    assert (
        viewer_api.patch(f"/api/v1/findings/{pk}", {"state": "fixed"}, format="json").status_code
        == 403
    )
    assert Finding.objects.get(pk=pk).state == "new"


@pytest.mark.parametrize(
    ("body", "field"),
    [({}, "state"), ({"state": "new"}, "state"), ({"state": "gone"}, "state"),
     ({"state": "x" * 10_000}, "state"), (None, "state"), (True, "state"), (3, "state"),
     (["state"], "state")],
)  # fmt: skip
def test_a_bad_state_is_a_400_naming_the_field(findings, engineer_api, body, field):
    response = engineer_api.patch(f"/api/v1/findings/{findings[0].pk}", body, format="json")
    assert response.status_code == 400 and field in response.json()["fields"]
    assert Finding.objects.get(pk=findings[0].pk).state == "new"


def test_other_fields_are_read_only(findings, engineer_api):
    pk = findings[0].pk
    body = {"state": "acknowledged", "waste_money_week": 0, "subject": "renamed"}
    assert engineer_api.patch(f"/api/v1/findings/{pk}", body, format="json").status_code == 200
    f = Finding.objects.get(pk=pk)
    assert (f.waste_money_week, f.subject, f.state) == (1.0, "cheap", "acknowledged")


def test_open_must_be_0_or_1(findings, viewer_api):
    response = viewer_api.get("/api/v1/findings?open=yes")
    assert response.status_code == 400 and "open" in response.json()["fields"]
