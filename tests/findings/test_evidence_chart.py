"""The series a finding's chart draws (findings/evidence.py, /staff/findings/<id>/evidence.json):
its feeds over its period, its actuators' commanded state as steps, bounded in span and points."""

from __future__ import annotations

import json
from datetime import timedelta

from findings import evidence
from findings.evaluate import evaluate
from findings.models import Finding
from tests.findings.conftest import MONDAY, WEEK, command, record
from tests.wsgi_client import WsgiClient as Client

H = timedelta(hours=1)


def _get(user, finding: Finding) -> dict:
    client = Client()
    client.force_login(user)
    response = client.get(f"/staff/findings/{finding.pk}/evidence.json")
    assert response.status_code == 200
    return json.loads(response.content)


def test_a_valve_findings_chart_is_its_commanded_state_as_steps_over_its_period(site_model, viewer):
    valve = site_model["valve"]
    command(valve, MONDAY + 8 * H, True)
    command(valve, MONDAY + 21 * H, False)
    evaluate(MONDAY, MONDAY + WEEK)
    body = _get(viewer, Finding.objects.get())
    ms = lambda t: int(t.timestamp() * 1000)  # noqa: E731
    # the period 17:00-21:00 and an hour either side
    assert (body["start"], body["end"]) == (ms(MONDAY + 16 * H), ms(MONDAY + 22 * H))
    [valve_series] = body["series"]
    assert valve_series["label"] == "Hall valve (ON = 1)" and valve_series["step"] is True
    # ON from before the window, OFF at 21:00, held to the end
    assert valve_series["points"] == [
        [ms(MONDAY + 16 * H), 1], [ms(MONDAY + 21 * H), 0], [ms(MONDAY + 22 * H), 0]
    ]  # fmt: skip


def test_a_sensor_findings_chart_is_its_feed_read_over_the_period(site_model, viewer):
    feed = site_model["feed"]
    record(feed.pk, MONDAY, 24, lambda m: 19.0)  # flat all day while heated
    command(site_model["valve"], MONDAY, True, "frost_protection")
    evaluate(MONDAY, MONDAY + 24 * H)
    body = _get(viewer, Finding.objects.get(rule="sensor_flatline"))
    series = body["series"][0]
    assert series["label"] == "Hall thermometer" and series["unit"] == "°C"
    values = [v for _t, v in series["points"] if v is not None]
    assert values and set(values) == {19.0}
    assert len(series["points"]) <= evidence.MAX_POINTS + 2


def test_a_finding_of_months_shows_its_last_31_days_in_at_most_500_points(site_model):
    f = Finding.objects.create(
        rule="sensor_flatline", key="k", subject="s", period_start=MONDAY - 20 * WEEK,
        period_end=MONDAY, last_seen=MONDAY, detail="d", what_to_check="w",
        evidence=[{"feed": site_model["feed"].pk, "name": "x"}, {"feed": "not a number"}, "junk"],
    )  # fmt: skip
    start, end = evidence.window(f)
    assert end - start == evidence.MAX_SPAN
    assert (end - start).total_seconds() / evidence.interval_for(start, end) <= evidence.MAX_POINTS
    body = evidence.series(f)
    assert len(body["series"]) == 1  # the malformed items are skipped, not a 500
    assert len(body["series"][0]["points"]) <= evidence.MAX_POINTS + 2
