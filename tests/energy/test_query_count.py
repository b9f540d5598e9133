"""The league and the energy page ask the database a fixed number of times, however many
buildings the site has (bench/energy.py: 50 buildings; an N+1 made it 58 queries)."""

from __future__ import annotations

from datetime import date

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from energy.models import ExpectedUse, Meter, MeterDay, MeterNode
from feeds.models import Feed
from sensors.models import Site

FIRST, LAST = date(2025, 1, 1), date(2025, 1, 31)


def _add_buildings(site: Site, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        node = MeterNode.objects.create(site=site, name=f"B{i}", kind="building",
                                        floor_area_m2=100, tm46_category="general_office")  # fmt: skip
        feed = Feed.objects.create(name=f"elec {i}", tag="t", interval=600)
        meter = Meter.objects.create(node=node, name="Main", fuel="electricity", source="power",
                                     feed=feed)  # fmt: skip
        MeterDay.objects.create(meter=meter, day=FIRST, value=10.0, status="measured")
        ExpectedUse.objects.create(node=node, fuel="electricity", start=FIRST, end=LAST,
                                   value=300.0)  # fmt: skip


def _queries(client, path: str) -> int:
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(path)
    assert response.status_code == 200, response.content[:200]
    return len(ctx.captured_queries)


@pytest.mark.parametrize("path", ["/api/v1/energy/league?site={site}&start=2025-01-01"
                                  "&end=2025-01-31",
                                  "/staff/energy/?site={site}&start=2025-01-01&end=2025-01-31"])  # fmt: skip
def test_queries_do_not_grow_with_the_buildings(path, viewer, client, redis_client):
    site = Site.objects.create(name="S", slug="s")
    client.force_login(viewer)
    url = path.format(site=site.pk)
    _add_buildings(site, 2)
    few = _queries(client, url)
    _add_buildings(site, 6, start=2)
    many = _queries(client, url)
    assert many == few, f"{few} queries with 2 buildings, {many} with 8"
    league = client.get(f"/api/v1/energy/league?site={site.pk}&start=2025-01-01&end=2025-01-31")
    # the model of every building is still found, and compared on the one day with use
    assert [(b["change_pct"], b["compared_days"]) for b in league.json()["buildings"]] == [
        (pytest.approx(100 * (10 - 300 / 31) / (300 / 31), abs=0.1), 1)
    ] * 8
