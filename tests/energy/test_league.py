"""The league table: change against the model only on the days the model covers, figures
annualised over the days with data, no data shown as none."""

from __future__ import annotations

from datetime import date, timedelta

import pytest

from energy import report
from energy.models import ExpectedUse, Meter, MeterDay, MeterNode
from feeds.models import Feed
from sensors.models import Site

API = "/api/v1/energy"


@pytest.fixture
def site(db) -> Site:
    return Site.objects.create(name="CAT", slug="cat", time_zone="Europe/London")


def _building(site, name="Office", area=100) -> MeterNode:
    return MeterNode.objects.create(site=site, name=name, kind="building", floor_area_m2=area,
                                    tm46_category="general_office")  # fmt: skip


def _meter(node, fuel="electricity") -> Meter:
    feed = Feed.objects.create(name=f"{node.name} {fuel}", tag="t", interval=60)
    return Meter.objects.create(node=node, name=fuel, fuel=fuel, source="power", feed=feed)


def _days(meter, first: date, last: date, value: float | None) -> None:
    n = (last - first).days + 1
    MeterDay.objects.bulk_create(
        MeterDay(
            meter=meter,
            day=first + timedelta(days=i),
            value=value,
            status="gap" if value is None else "measured",
        )  # fmt: skip
        for i in range(n)
    )


def test_change_compares_only_the_days_the_model_covers(site, viewer_api):
    # 100 kWh a day June..October; a model for October only, 3100 kWh (100 a day): no change.
    office = _building(site)
    _days(_meter(office), date(2024, 6, 1), date(2024, 10, 31), 100.0)
    ExpectedUse.objects.create(node=office, fuel="electricity", start=date(2024, 10, 1),
                               end=date(2024, 10, 31), value=3100.0)  # fmt: skip
    r = viewer_api.get(f"{API}/league?site={site.pk}&start=2024-06-01&end=2024-10-31")
    row = r.json()["buildings"][0]
    assert row["kwh"] == pytest.approx(153 * 100.0)  # the whole range's use is still shown
    assert row["expected_kwh"] == pytest.approx(3100.0)
    assert row["actual_compared_kwh"] == pytest.approx(3100.0)
    assert row["change_pct"] == pytest.approx(0.0)
    assert row["compared_days"] == 31


def test_annualised_on_the_days_with_data_not_the_days_of_the_range(site):
    # 29 days of 100 kWh and today a gap: annualised 100 x 365, not 2900 x 365 / 30.
    office = _building(site)
    m = _meter(office)
    _days(m, date(2024, 6, 1), date(2024, 6, 29), 100.0)
    _days(m, date(2024, 6, 30), date(2024, 6, 30), None)
    row = report.league(report.Tree.load(site), date(2024, 6, 1), date(2024, 6, 30))[0]
    assert row["days_with_data"] == 29 and row["days"] == 30
    assert row["kwh_per_m2_year"] == pytest.approx(100 * 365 / 100)


def test_a_building_without_data_is_no_data_not_zero(site):
    _building(site, "Empty")  # no meters
    gaps = _building(site, "Gaps")
    _days(_meter(gaps), date(2024, 6, 1), date(2024, 6, 3), None)
    rows = report.league(report.Tree.load(site), date(2024, 6, 1), date(2024, 6, 3))
    for row in rows:
        assert row["kwh"] is None and row["kwh_per_m2"] is None, row["name"]
        assert row["kwh_per_m2_year"] is None and row["operational_rating"] is None
