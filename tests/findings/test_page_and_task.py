"""The staff findings page from both sides, and the hourly run's schedule and queue."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings

from findings.models import Finding
from findings.tasks import find_waste_recent
from tests.findings.conftest import MONDAY, WEEK, command
from tests.wsgi_client import WsgiClient as Client

H = timedelta(hours=1)


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def _heated_evening(site_model) -> None:
    command(site_model["valve"], MONDAY + 8 * H, True)
    command(site_model["valve"], MONDAY + 21 * H, False)


def test_the_hourly_run_is_scheduled_on_the_commit_queue_never_control():
    entry = settings.CELERY_BEAT_SCHEDULE["find-waste"]
    assert entry["task"] == "findings.tasks.find_waste_recent"
    routes = settings.CELERY_TASK_ROUTES[1]
    assert routes["findings.tasks.*"] == {"queue": "commit"}


def test_the_hourly_run_judges_the_week_to_its_clock(site_model):
    _heated_evening(site_model)
    assert find_waste_recent((MONDAY + WEEK).timestamp())["opened"] == 1
    # a week and a day later Monday evening is out of the window: closed
    assert find_waste_recent((MONDAY + WEEK + 24 * H).timestamp())["closed"] == 1


def test_a_viewer_reads_the_page_without_the_buttons(site_model, viewer):
    from findings.evaluate import evaluate

    _heated_evening(site_model)
    evaluate(MONDAY, MONDAY + WEEK)
    page = _client(viewer).get("/staff/findings/").content.decode()
    assert "Zone &#x27;Hall&#x27;" in page and "0.99 GBP" in page
    assert 'name="state"' not in page


def test_each_finding_links_the_series_that_tripped_it(site_model, viewer):
    from findings.evaluate import evaluate
    from tests.findings.conftest import record

    valve, feed = site_model["valve"], site_model["feed"]
    command(valve, MONDAY + 8 * H, True)
    command(valve, MONDAY + 10 * H, False)
    record(feed.pk, MONDAY + 6 * H, 6, lambda m: 19.0)
    evaluate(MONDAY, MONDAY + WEEK)
    f = Finding.objects.get(rule="sensor_flatline")
    start, end = int((MONDAY + 6 * H).timestamp()), int((MONDAY + 12 * H).timestamp())
    assert f.evidence_links() == [
        (
            "Hall thermometer",
            f"/staff/feeds/#feeds={feed.pk}&start={start - 3600}&end={end + 3600}",
        ),
        ("Hall valve: commands", f"/admin/control/actuatorcommand/?actuator__id__exact={valve.pk}"),
    ]
    page = _client(viewer).get("/staff/findings/").content.decode()
    assert f"/staff/feeds/#feeds={feed.pk}&amp;start={start - 3600}" in page


def test_a_viewer_may_not_mark_and_an_engineer_may(site_model, viewer, engineer):
    from findings.evaluate import evaluate

    _heated_evening(site_model)
    evaluate(MONDAY, MONDAY + WEEK)
    pk = Finding.objects.get().pk
    assert (
        _client(viewer).post(f"/staff/findings/{pk}/state", {"state": "fixed"}).status_code == 403
    )
    assert Finding.objects.get().state == "new"
    answer = _client(engineer).post(f"/staff/findings/{pk}/state", {"state": "false_alarm"})
    assert answer.status_code == 302
    f = Finding.objects.get()
    assert (f.state, f.state_by) == ("false_alarm", engineer)


@pytest.mark.parametrize("state", ["", "new", "closed", "x" * 5000])
def test_a_bad_state_on_the_page_is_a_400_naming_the_field(site_model, engineer, state):
    from findings.evaluate import evaluate

    _heated_evening(site_model)
    evaluate(MONDAY, MONDAY + WEEK)
    pk = Finding.objects.get().pk
    answer = _client(engineer).post(f"/staff/findings/{pk}/state", {"state": state})
    assert answer.status_code == 400 and b"state" in answer.content
    assert Finding.objects.get().state == "new"


JSON = {"HTTP_ACCEPT": "application/json"}


def test_marking_a_finding_that_does_not_exist_is_a_404_page_saying_so(engineer):
    answer = _client(engineer).post("/staff/findings/999999/state", {"state": "fixed"})
    assert answer.status_code == 404
    page = answer.content.decode()
    assert "There is no finding 999999" in page and 'href="/staff/findings/"' in page


def test_a_script_asking_for_json_gets_the_404_as_json(engineer):
    answer = _client(engineer).post("/staff/findings/999999/state", {"state": "fixed"}, **JSON)
    assert answer.status_code == 404 and answer["Content-Type"] == "application/json"
    body = answer.json()
    assert body["success"] is False and "There is no finding 999999" in body["error"]
    assert "fields" not in body  # no field was refused: the id is in the path


@pytest.mark.parametrize("pk", [999999, None])
def test_a_viewer_is_refused_403_whether_or_not_the_finding_exists(site_model, viewer, pk):
    from findings.evaluate import evaluate

    _heated_evening(site_model)
    evaluate(MONDAY, MONDAY + WEEK)
    pk = pk or Finding.objects.get().pk
    answer = _client(viewer).post(f"/staff/findings/{pk}/state", {"state": "fixed"}, **JSON)
    assert answer.status_code == 403 and answer["Content-Type"] == "application/json"
    assert answer.json() == {
        "success": False,
        "error": "detail: Only engineers may mark findings.",
    }
    assert Finding.objects.get().state == "new"


def test_a_viewers_form_post_still_gets_the_403_page(site_model, viewer):
    from findings.evaluate import evaluate

    _heated_evening(site_model)
    evaluate(MONDAY, MONDAY + WEEK)
    pk = Finding.objects.get().pk
    answer = _client(viewer).post(f"/staff/findings/{pk}/state", {"state": "fixed"})
    assert answer.status_code == 403 and "text/html" in answer["Content-Type"]
    assert Finding.objects.get().state == "new"


def test_the_pages_refusals_use_the_apis_error_shape(site_model, engineer):
    from findings.evaluate import evaluate

    _heated_evening(site_model)
    evaluate(MONDAY, MONDAY + WEEK)
    pk = Finding.objects.get().pk
    answer = _client(engineer).post(f"/staff/findings/{pk}/state", {"state": "new"}, **JSON)
    assert answer.status_code == 400
    body = answer.json()
    message = "'state' is one of acknowledged, fixed, false_alarm"
    assert body == {"success": False, "error": f"state: {message}", "fields": {"state": [message]}}


def test_a_fixed_finding_cannot_be_acknowledged_from_a_stale_page(site_model, engineer):
    from findings.evaluate import evaluate

    _heated_evening(site_model)
    evaluate(MONDAY, MONDAY + WEEK)
    pk = Finding.objects.get().pk
    client = _client(engineer)
    assert client.post(f"/staff/findings/{pk}/state", {"state": "fixed"}).status_code == 302
    answer = client.post(f"/staff/findings/{pk}/state", {"state": "acknowledged"})
    assert answer.status_code == 400
    assert "is fixed and closed" in answer.content.decode()
    assert Finding.objects.get().state == "fixed"
    as_json = client.post(f"/staff/findings/{pk}/state", {"state": "acknowledged"}, **JSON)
    assert as_json.status_code == 400 and list(as_json.json()["fields"]) == ["state"]


def test_an_engineers_json_mark_answers_json(site_model, engineer):
    from findings.evaluate import evaluate

    _heated_evening(site_model)
    evaluate(MONDAY, MONDAY + WEEK)
    pk = Finding.objects.get().pk
    answer = _client(engineer).post(f"/staff/findings/{pk}/state", {"state": "fixed"}, **JSON)
    assert answer.status_code == 200
    assert answer.json() == {"success": True, "id": pk, "state": "fixed"}


def test_the_closed_list_says_how_each_closed_in_one_capitalisation(site_model, engineer, viewer):
    def closed(key: str, state: str, by) -> None:
        Finding.objects.create(
            rule="heating_unoccupied", key=key, subject=key, period_start=MONDAY,
            period_end=MONDAY + H, last_seen=MONDAY + H, detail="seen", what_to_check="w",
            state=state, state_by=by, state_at=MONDAY + 2 * H, closed_at=MONDAY + 3 * H,
        )  # fmt: skip

    closed("was-fixed", "fixed", engineer)
    closed("was-false", "false_alarm", engineer)
    closed("stopped", "new", None)
    page = _client(viewer).get("/staff/findings/").content.decode()
    table = page[page.index('id="closed-findings"') :]
    assert "Fixed by engineer" in table and "False alarm by engineer" in table
    assert "Stopped recurring" in table
    assert "false alarm" not in table and ">New<" not in table
