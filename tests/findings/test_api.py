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


@pytest.mark.parametrize("raw", ["yes", "abc", "", "2"])
def test_open_must_be_0_or_1(findings, viewer_api, raw):
    response = viewer_api.get("/api/v1/findings", {"open": raw})
    assert response.status_code == 400
    assert response.json()["fields"] == {"open": ["'open' is 0 or 1"]}  # a list (docs/API.md)


def test_a_patch_without_a_state_names_it_with_a_list_of_messages(findings, engineer_api):
    response = engineer_api.patch(f"/api/v1/findings/{findings[0].pk}", {}, format="json")
    assert response.status_code == 400
    assert response.json() == {
        "success": False,
        "error": "state: give the new state",
        "fields": {"state": ["give the new state"]},
    }


@pytest.mark.parametrize(
    ("path", "field"),
    [("/api/v1/findings", "limit"), ("/api/v1/brick.ttl", "site"), ("/api/v1/findings", "open")],
)
def test_a_nul_in_a_query_parameter_is_refused_in_the_documented_shape(
    findings, engineer_api, path, field
):
    response = engineer_api.get(path, {field: "\x00"})
    assert response.status_code == 400
    said = "NUL bytes are not allowed in a query parameter."
    assert response.json()["fields"] == {field: [said]}
    assert response.json()["error"] == f"{field}: {said}"


# What a person may mark a finding, by its state (docs/FINDINGS.md "States"): the fresh-eyes
# tester turned a fixed finding back into an acknowledged one.
def _set(f: Finding, state: str, closed: bool = False) -> Finding:
    f.state, f.closed_at = state, (MONDAY + timedelta(days=8)) if closed else None
    f.save()
    return f


@pytest.mark.parametrize(
    ("state", "closed", "mark"),
    [("new", False, "acknowledged"), ("new", False, "fixed"), ("new", False, "false_alarm"),
     ("acknowledged", False, "fixed"), ("acknowledged", False, "false_alarm"),
     ("false_alarm", False, "acknowledged"), ("false_alarm", False, "fixed"),
     ("new", True, "fixed"), ("new", True, "false_alarm"),
     ("acknowledged", True, "false_alarm")],
)  # fmt: skip
def test_a_mark_its_state_takes_is_made(findings, engineer_api, engineer, state, closed, mark):
    f = _set(findings[0], state, closed)
    response = engineer_api.patch(f"/api/v1/findings/{f.pk}", {"state": mark}, format="json")
    assert response.status_code == 200, response.content
    f.refresh_from_db()
    assert (f.state, f.state_by) == (mark, engineer)
    assert response.json()["state"] == mark


@pytest.mark.parametrize(
    ("state", "closed", "mark", "words"),
    [("fixed", True, "acknowledged", "is fixed and closed"),
     ("fixed", True, "false_alarm", "is fixed and closed"),
     ("new", True, "acknowledged", "closed by itself"),
     ("false_alarm", True, "acknowledged", "closed by itself"),
     ("acknowledged", False, "new", "one of acknowledged, fixed, false_alarm")],
)  # fmt: skip
def test_a_mark_its_state_does_not_take_is_a_400_naming_state(
    findings, engineer_api, state, closed, mark, words
):
    f = _set(findings[0], state, closed)
    response = engineer_api.patch(f"/api/v1/findings/{f.pk}", {"state": mark}, format="json")
    assert response.status_code == 400
    body = response.json()
    assert body["success"] is False and body["error"].startswith("state: ")
    assert words in body["fields"]["state"][0]
    f.refresh_from_db()
    assert (f.state, f.state_by) == (state, None)


def test_a_fixed_finding_cannot_be_patched_back_to_acknowledged(findings, engineer_api):
    pk = findings[0].pk
    fixed = engineer_api.patch(f"/api/v1/findings/{pk}", {"state": "fixed"}, format="json")
    assert fixed.status_code == 200
    again = engineer_api.patch(f"/api/v1/findings/{pk}", {"state": "acknowledged"}, format="json")
    assert again.status_code == 400 and "state" in again.json()["fields"]
    f = Finding.objects.get(pk=pk)
    assert f.state == "fixed" and f.closed_at is not None


def test_the_same_mark_twice_changes_nothing_and_keeps_the_first_who(
    findings, engineer_api, engineer, django_user_model
):
    from django.contrib.auth.models import Group
    from rest_framework.test import APIClient

    from core.roles import ENGINEERS

    pk = findings[0].pk
    fixed = engineer_api.patch(f"/api/v1/findings/{pk}", {"state": "fixed"}, format="json")
    assert fixed.status_code == 200
    first = Finding.objects.get(pk=pk)
    other = django_user_model.objects.create_user("second", is_staff=True)
    other.groups.add(Group.objects.get(name=ENGINEERS))
    client = APIClient()
    client.force_authenticate(other)
    again = client.patch(f"/api/v1/findings/{pk}", {"state": "fixed"}, format="json")
    assert again.status_code == 200
    f = Finding.objects.get(pk=pk)
    assert (f.state_by, f.state_at, f.closed_at) == (engineer, first.state_at, first.closed_at)


def test_the_state_is_judged_against_the_row_not_a_stale_copy(findings, engineer):
    """Two people at once: the second's copy was read before the first marked it fixed."""
    from findings.models import StateRefused

    stale = Finding.objects.get(pk=findings[0].pk)
    Finding.objects.get(pk=findings[0].pk).mark("fixed", engineer)
    with pytest.raises(StateRefused, match="is fixed and closed"):
        stale.mark("acknowledged", engineer)
    assert Finding.objects.get(pk=findings[0].pk).state == "fixed"


# limit: honoured, at most 1000 (a larger one read as 1000, as on every list), and a limit
# that is not a whole number from 1 is a 400 naming it, not silently the default 100.
@pytest.fixture
def many_findings(db):
    Finding.objects.bulk_create(
        Finding(rule="heating_unoccupied", key=f"k{i}", subject=f"s{i}", period_start=MONDAY,
                period_end=MONDAY, last_seen=MONDAY, detail="d", what_to_check="w",
                waste_money_week=float(i))
        for i in range(1001)
    )  # fmt: skip


@pytest.mark.parametrize(("limit", "rows"), [("1", 1), ("150", 150), ("1000", 1000),
                                             ("1001", 1000), ("9" * 5000, 1000)])  # fmt: skip
def test_limit_is_honoured_up_to_1000(many_findings, viewer_api, limit, rows):
    body = viewer_api.get(f"/api/v1/findings?limit={limit}").json()
    assert body["count"] == 1001 and len(body["results"]) == rows
    assert body["results"][0]["subject"] == "s1000"  # still most costly first


@pytest.mark.parametrize("limit", ["0", "-1", "ten", "1.5", "", "٣"])
def test_a_limit_that_is_not_a_whole_number_from_1_is_a_400_naming_it(findings, viewer_api, limit):
    response = viewer_api.get("/api/v1/findings", {"limit": limit})
    assert response.status_code == 400
    assert response.json()["fields"] == {"limit": ["must be a whole number from 1"]}


@pytest.mark.parametrize(("offset", "code"), [("0", 200), ("-1", 400), ("x", 400),
                                              (str(2**63 - 1), 200), (str(2**63), 400)])  # fmt: skip
def test_offset_is_a_whole_number_from_0_to_the_databases_bound(findings, viewer_api, offset, code):
    response = viewer_api.get("/api/v1/findings", {"offset": offset})
    assert response.status_code == code, response.content
    if code == 400:
        assert "offset" in response.json()["fields"]


def test_times_are_iso_8601_in_the_sites_zone_with_that_moments_offset(db, viewer, viewer_api):
    """Europe/London: a period across the October clock change carries +01:00 then Z
    (+00:00), and each is the wall-clock time the page shows (docs/API.md)."""
    from datetime import UTC, datetime

    from django.test import Client

    start = datetime(2030, 10, 26, 23, 30, tzinfo=UTC)  # 00:30 BST on Sunday the 27th
    end = datetime(2030, 10, 27, 5, 0, tzinfo=UTC)  # 05:00 GMT
    f = Finding.objects.create(
        rule="heating_unoccupied", key="dst", subject="dst", period_start=start,
        period_end=end, last_seen=end, detail="d", what_to_check="w",
    )  # fmt: skip
    body = viewer_api.get(f"/api/v1/findings/{f.pk}").json()
    assert body["period_start"] == "2030-10-27T00:30:00+01:00"
    assert body["period_end"] == body["last_seen"] == "2030-10-27T05:00:00Z"
    assert datetime.fromisoformat(body["period_start"]) == start
    client = Client()
    client.force_login(viewer)
    page = client.get("/staff/findings/").content.decode()
    assert "Sun 27 Oct 00:30 – Sun 27 Oct 05:00" in page
