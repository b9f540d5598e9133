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
