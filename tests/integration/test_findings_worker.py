"""The hourly find-the-waste run on a real Celery worker that consumes only the commit queue:
sent as the beat sends it (routed by CELERY_TASK_ROUTES, never to the control worker), it
finds the valve left on after the schedule and keeps the finding with its cost (issue #30)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from findings.models import Finding
from findings.tasks import find_waste_recent
from tests.conftest import running_worker, test_database_url
from tests.findings.conftest import MONDAY, WEEK, command, site_model  # noqa: F401 (fixture)
from tests.wait import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]
H = timedelta(hours=1)


def test_the_commit_worker_runs_the_hourly_task_and_keeps_the_finding(site_model):  # noqa: F811
    valve = site_model["valve"]
    command(valve, MONDAY + 8 * H, True)
    command(valve, MONDAY + 21 * H, False)
    with running_worker("commit", "findings", test_database_url()):
        find_waste_recent.delay((MONDAY + WEEK).timestamp())
        wait_for(Finding.objects.exists, 60, "the worker to keep the finding")
    f = Finding.objects.get()
    assert f.subject == "Zone 'Hall'" and f.waste_kwh_week == pytest.approx(14.118, abs=0.001)
