"""The staff energy page: staff roles see the figures, others are refused."""

from __future__ import annotations

from datetime import date

import pytest

from energy.models import Meter, MeterDay, MeterNode
from feeds.models import Feed
from sensors.models import Site


@pytest.fixture
def tree(db):
    site = Site.objects.create(name="CAT", slug="cat")
    b = MeterNode.objects.create(site=site, name="Office", kind="building", floor_area_m2=100,
                                 tm46_category="general_office")  # fmt: skip
    feed = Feed.objects.create(name="e", tag="t", interval=60)
    m = Meter.objects.create(node=b, name="Elec", fuel="electricity", source="power", feed=feed)
    for d, v in ((1, 10.0), (2, 12.5), (3, None)):
        MeterDay.objects.create(meter=m, day=date(2024, 5, d), value=v,
                                status="gap" if v is None else "measured")  # fmt: skip
    return site, b


def test_viewer_sees_figures(client, viewer, tree):
    site, b = tree
    client.force_login(viewer)
    r = client.get(f"/staff/energy/?site={site.pk}&node={b.pk}&start=2024-05-01&end=2024-05-03")
    assert r.status_code == 200
    html = r.content.decode()
    assert 'id="total">22.5 kWh' in html
    assert 'id="gap-days">1 day without readings' in html
    assert (
        "Buildings, Wed 1 May 2024 to Fri 3 May 2024" in html and "0.2" in html
    )  # 22.5 kWh / 100 m²


def test_user_without_role_is_refused_and_anonymous_sent_to_login(client, db, tree):
    from django.contrib.auth.models import User

    assert client.get("/staff/energy/").status_code == 302
    client.force_login(User.objects.create_user("nobody", password="x"))
    assert client.get("/staff/energy/").status_code == 403


@pytest.mark.parametrize(
    ("query", "words"),
    [
        ("start=2024-05-03&end=2024-05-01", "end: must not be before start"),
        ("start=2020-01-01&end=2024-01-01", "end: at most 1100 days from start"),
        ("start=nonsense", "start: &#x27;nonsense&#x27; is not a date"),
        ("period=hour", "period: &#x27;hour&#x27;: use one of day"),
        ("start=9999-12-30&end=9999-12-31", "end: 9999-12-31 is outside 1970-01-01..2100-12-31"),
        ("start=0001-01-01&end=0001-01-02", "end: 0001-01-02 is outside"),
    ],
)
def test_bad_range_is_a_400_page_saying_what_was_wrong(client, viewer, tree, query, words):
    client.force_login(viewer)
    r = client.get(f"/staff/energy/?{query}")
    assert r.status_code == 400 and r["Content-Type"].startswith("text/html")
    html = r.content.decode()
    assert words in html and "ErrorDetail" not in html
    assert "<h1>Energy</h1>" in html  # the page, with its default range


def test_a_building_links_to_its_monthly_report_and_shows_cost_and_co2(client, viewer, tree):
    site, b = tree
    client.force_login(viewer)
    html = client.get(
        f"/staff/energy/?site={site.pk}&node={b.pk}&start=2024-05-01&end=2024-05-03"
    ).content.decode()
    pdf = f'href="/api/v1/energy/nodes/{b.pk}/report.pdf?month=2024-05"'
    assert pdf in html and f"/api/v1/energy/nodes/{b.pk}/report.csv?month=2024-05" in html
    assert 'id="kg-co2e">4.7 kg CO₂e' in html  # 22.5 kWh x 0.20707 = 4.66
    r = client.get(f"/api/v1/energy/nodes/{b.pk}/report.pdf?month=2024-05")
    assert r.status_code == 200 and r.content.startswith(b"%PDF-")  # the link works logged in


def test_a_room_without_meters_says_no_data_for_the_fuel_asked(client, viewer, tree):
    site, b = tree
    room = MeterNode.objects.create(site=site, parent=b, name="Room 1", kind="room")
    client.force_login(viewer)
    r = client.get(f"/staff/energy/?site={site.pk}&node={room.pk}&fuel=gas"
                   "&start=2024-05-01&end=2024-05-03")  # fmt: skip
    html = r.content.decode()
    assert 'id="node-name">Room 1 · gas' in html  # the fuel asked, not electricity instead
    # no meter below the room: it says so, not "no data" or "3 gap days" (issue #28)
    assert 'id="no-meter">No meter measures gas in Room 1 or below it' in html
    assert 'id="gap-days"' not in html and "without readings" not in html
    assert "0.0 kWh" not in html
    api = client.get(f"/api/v1/energy/nodes/{room.pk}/consumption?fuel=gas"
                     "&start=2024-05-01&end=2024-05-03").json()  # fmt: skip
    assert api["total"] is None and api["cost"] is None and api["kg_co2e"] is None


def test_expected_is_on_the_days_with_actual_so_it_matches_saved(client, viewer, tree):
    from energy.models import EnergySite, ExpectedUse, FuelRate

    site, b = tree
    # 11 a day expected 1..3 May; the 3rd is a gap: expected on the 2 days with use = 22,
    # saved 22 - 22.5 = -0.5, in euros at 0.5 a kWh
    ExpectedUse.objects.create(node=b, fuel="electricity", start=date(2024, 5, 1),
                               end=date(2024, 5, 3), value=33.0)  # fmt: skip
    FuelRate.objects.create(site=site, fuel="electricity", price_per_unit=0.5)
    EnergySite.objects.create(site=site, currency="EUR")
    client.force_login(viewer)
    html = client.get(
        f"/staff/energy/?site={site.pk}&node={b.pk}&start=2024-05-01&end=2024-05-03"
    ).content.decode()
    assert 'id="expected">22.0 kWh <span class="muted">on the 2 days with actual use' in html
    # 0.5 kWh over: in words, no minus sign to decode; the percentage says over
    assert ('id="saved"><strong>Used 0.5 kWh (€0.25) more than expected</strong> · '
            "2.3 % over expected · 0.1 kg CO₂e more") in html  # fmt: skip
    assert 'id="cost">€11.25' in html


def test_one_missing_day_is_singular(client, viewer, tree):
    site, b = tree
    client.force_login(viewer)
    html = client.get(f"/staff/energy/?site={site.pk}&node={b.pk}&start=2024-05-01"
                      "&end=2024-05-03&period=month").content.decode()  # fmt: skip
    assert "(1 day missing)" in html and "1 days" not in html


@pytest.mark.parametrize(
    ("query", "words"),
    [
        ("fuel=plutonium", "fuel: &#x27;plutonium&#x27;: use one of electricity, gas"),
        ("node=99999", "node: no node &#x27;99999&#x27; at site &#x27;CAT&#x27;"),
        ("node=abc", "node: no node &#x27;abc&#x27;"),
        ("site=99999", "site: no site &#x27;99999&#x27;"),
    ],
)
def test_a_fuel_node_or_site_not_there_is_a_400_saying_so_not_swapped(
    client, viewer, tree, query, words
):
    # found by the outside tester: ?fuel=plutonium showed electricity, ?node=99999 another
    # building, both 200 with no word
    site, b = tree
    client.force_login(viewer)
    r = client.get(f"/staff/energy/?{query}&start=2024-05-01&end=2024-05-03")
    assert r.status_code == 400 and r["Content-Type"].startswith("text/html")
    html = r.content.decode()
    assert words in html and 'id="error"' in html
    assert "Showing the last 30 days instead" not in html  # the range asked is kept
    assert "<h1>Energy</h1>" in html


def test_a_node_of_another_site_is_not_shown_under_this_one(client, viewer, tree):
    site, b = tree
    other = Site.objects.create(name="Other", slug="other")
    theirs = MeterNode.objects.create(site=other, name="Their hall", kind="building")
    client.force_login(viewer)
    r = client.get(f"/staff/energy/?site={site.pk}&node={theirs.pk}")
    assert r.status_code == 400 and f"no node &#x27;{theirs.pk}&#x27; at site" in r.content.decode()
    ok = client.get(f"/staff/energy/?site={other.pk}&node={theirs.pk}&fuel=gas")
    assert ok.status_code == 200 and 'id="error"' not in ok.content.decode()
