"""The DEC operational rating as TM46 adjusts it: the benchmark's weather dependent
share scaled by the year's degree days (base 15.5 °C) over 2021, extended occupancy hours
raising it up to the category's maximum, and separable uses taken out of the building's use.
Every expected figure below is computed by hand from TM46 Table 1's row in the comment."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

import numpy as np
import pytest
from django.conf import settings

from energy.benchmarks import adjusted_benchmark, dec_grade, operational_rating
from energy.models import EnergySite, FuelRate, Meter, MeterDay, MeterNode
from feeds.models import Feed
from feeds.store import phpfina

API = "/api/v1/energy"
LONDON = ZoneInfo("Europe/London")
NOW = 2_000_000_000

# General office: 95 + 120 kWh/m²; weather share 0 (electricity) and 0.55 (fossil); occupancy
# 2040..8760 h, +107 % (electricity) and +44 % (fossil) at 8760 h.


def test_office_benchmark_at_the_reference_year_and_standard_hours_is_the_table():
    b = adjusted_benchmark("general_office", hdd_year=2021, occupancy_hours=2040)
    assert (b.electricity, b.fossil) == pytest.approx((95, 120))
    assert b.weather_ratio == pytest.approx(1.0) and b.occupancy_share == 0


def test_a_cold_year_raises_only_the_weather_dependent_share():
    b = adjusted_benchmark("general_office", hdd_year=2021 * 1.25)
    assert b.electricity == pytest.approx(95)
    assert b.fossil == pytest.approx(120 * (0.45 + 0.55 * 1.25))  # 136.5
    assert b.fossil == pytest.approx(136.5)


def test_restaurant_adjusts_electricity_for_weather_too():
    # Restaurant: 90 + 370, weather shares 0.20 and 0.30; a mild year at half the degree days.
    b = adjusted_benchmark("restaurant", hdd_year=2021 / 2)
    assert b.electricity == pytest.approx(90 * (0.8 + 0.2 * 0.5))  # 81
    assert b.fossil == pytest.approx(370 * (0.7 + 0.3 * 0.5))  # 314.5


def test_occupancy_hours_raise_the_benchmark_between_standard_and_maximum_only():
    half = adjusted_benchmark("general_office", occupancy_hours=5400)  # (5400-2040)/6720 = 0.5
    assert half.occupancy_share == pytest.approx(0.5)
    assert half.electricity == pytest.approx(95 * 1.535)  # 145.825
    assert half.fossil == pytest.approx(120 * 1.22)  # 146.4
    fewer = adjusted_benchmark("general_office", occupancy_hours=1000)
    assert (fewer.electricity, fewer.fossil, fewer.occupancy_hours) == (95, 120, 2040)
    most = adjusted_benchmark("general_office", occupancy_hours=8784)  # a leap year, all hours
    assert most.occupancy_hours == 8760 and most.electricity == pytest.approx(95 * 2.07)


def test_a_hotel_has_no_occupancy_adjustment():
    b = adjusted_benchmark("hotel", occupancy_hours=6000)  # Hotel 105 + 330, weather 0.45
    assert (b.electricity, b.fossil, b.occupancy_hours) == (105, 330, None)


def test_operational_rating_against_the_adjusted_benchmark():
    # 100 m², 9,500 kWh electricity and 12,000 kWh gas, 0.2 and 0.18 kg/kWh, a year of
    # 2,526.25 degree days: typical 95 x 0.2 + 136.5 x 0.18 = 43.57 kg/m², actual 40.6.
    rating = operational_rating(9500, 12000, 100, "general_office", 0.2, 0.18, 2526.25)
    assert rating == pytest.approx(100 * 40.6 / 43.57)
    assert round(rating) == 93 and dec_grade(rating) == "D"


def _midnight(d: date) -> int:
    return int(datetime(d.year, d.month, d.day, tzinfo=LONDON).timestamp())


FIRST, LAST = date(2024, 1, 1), date(2024, 1, 10)


def _days(meter: Meter, value: float) -> None:
    MeterDay.objects.bulk_create(
        MeterDay(meter=meter, day=FIRST + timedelta(days=i), value=value, status="measured")
        for i in range((LAST - FIRST).days + 1)
    )


def _power_meter(node, name, fuel, **extra) -> Meter:
    feed = Feed.objects.create(name=f"{node.name} {name}", tag="t", interval=3600)
    return Meter.objects.create(node=node, name=name, fuel=fuel, source="power", feed=feed,
                                **extra)  # fmt: skip


@pytest.fixture
def dec_site(site, redis_client):
    """Outside at 9.5 °C all hours: 6 degree days a day at 15.5 °C (the site's own HDD base
    is 18 °C, which the DEC must not use), so 2,190 a year. Electricity 0.2, gas 0.18."""
    temp = Feed.objects.create(name="outside", tag="t", interval=3600)
    hours = np.arange(_midnight(FIRST), _midnight(LAST + timedelta(days=1)), 3600)
    phpfina.write_points(settings.BMS_FEED_DIR, temp.pk, 3600, list(hours),
                         [9.5] * len(hours), now=NOW)  # fmt: skip
    EnergySite.objects.create(site=site, outside_temperature_feed=temp, hdd_base_c=18.0)
    FuelRate.objects.create(site=site, fuel="electricity", price_per_unit=0.3,
                            kg_co2e_per_unit=0.2)  # fmt: skip
    FuelRate.objects.create(site=site, fuel="gas", price_per_unit=0.1, kg_co2e_per_unit=0.18)
    return site


def test_league_rating_takes_out_the_server_room_and_adjusts_for_weather_and_hours(
    dec_site, viewer_api
):
    office = MeterNode.objects.create(site=dec_site, name="Office", kind="building",
                                      floor_area_m2=100, tm46_category="general_office",
                                      annual_occupancy_hours=5400)  # fmt: skip
    server_room = MeterNode.objects.create(site=dec_site, parent=office, name="Server room",
                                           kind="room")  # fmt: skip
    _days(_power_meter(office, "Main", "electricity"), 100.0)
    _days(_power_meter(office, "Gas", "gas"), 50.0)
    _days(_power_meter(server_room, "Servers", "electricity",
                       separable_use="regional server room"), 20.0)  # fmt: skip

    r = viewer_api.get(f"{API}/league?site={dec_site.pk}&start={FIRST}&end={LAST}")
    assert r.status_code == 200
    row = r.json()["buildings"][0]
    # A year: electricity 36,500 - 7,300 (servers) = 29,200 kWh, gas 18,250 kWh.
    # Benchmark: weather 2190 / 2021; hours (5400 - 2040) / (8760 - 2040) = 0.5.
    ratio = 2190 / 2021
    elec_bench = 95 * (1 + 1.07 * 0.5)  # 145.825
    fossil_bench = 120 * (0.45 + 0.55 * ratio) * (1 + 0.44 * 0.5)  # 153.13
    typical = elec_bench * 0.2 + fossil_bench * 0.18
    actual = (29200 * 0.2 + 18250 * 0.18) / 100  # 91.25 kg/m²
    assert row["operational_rating"] == round(100 * actual / typical)  # 161
    assert row["dec_grade"] == "G"
    dec = row["dec"]
    assert dec["hdd_year"] == 2190 and dec["weather_ratio"] == pytest.approx(ratio, abs=1e-3)
    assert dec["benchmark_electricity"] == pytest.approx(elec_bench, abs=0.05)
    assert dec["benchmark_fossil"] == pytest.approx(fossil_bench, abs=0.05)
    assert dec["occupancy_hours"] == 5400
    assert dec["separable_kwh_year"] == {"electricity": 7300.0, "fossil": 0.0}
    assert dec["separable_uses"] == ["regional server room (Servers, electricity)"]
    assert "2,190 degree days a year" in " ".join(dec["notes"])
    # kWh/m² is still the whole building's use: only the DEC takes the separable use out.
    assert row["kwh_per_m2_year"] == pytest.approx((36500 + 18250) / 100)


def test_without_outside_temperature_the_rating_says_weather_was_not_adjusted(site, viewer_api):
    office = MeterNode.objects.create(site=site, name="Office", kind="building",
                                      floor_area_m2=100, tm46_category="general_office")  # fmt: skip
    _days(_power_meter(office, "Main", "electricity"), 26.0)  # 9,490 kWh a year
    row = viewer_api.get(f"{API}/league?site={site.pk}&start={FIRST}&end={LAST}").json()[
        "buildings"
    ][0]
    assert row["dec"]["hdd_year"] is None and row["dec"]["benchmark_fossil"] == 120
    assert "weather: not adjusted (no outside temperature in the range)" in row["dec"]["notes"]
    assert "occupancy: standard hours (2,040 h a year) assumed" in row["dec"]["notes"]


def test_separable_use_larger_than_the_building_gives_no_rating_and_says_why(dec_site, viewer_api):
    office = MeterNode.objects.create(site=dec_site, name="Office", kind="building",
                                      floor_area_m2=100, tm46_category="general_office")  # fmt: skip
    _days(_power_meter(office, "Main", "electricity"), 10.0)
    _days(_power_meter(office, "Kiln", "electricity", separable_use="furnace",
                       counts_to_node=False), 30.0)  # fmt: skip
    row = viewer_api.get(f"{API}/league?site={dec_site.pk}&start={FIRST}&end={LAST}").json()[
        "buildings"
    ][0]
    assert row["operational_rating"] is None and row["dec_grade"] is None
    assert "separable uses take out more than the building uses" in row["warning"]


def test_staff_page_shows_the_adjusted_benchmark_and_what_adjusted_it(dec_site, client, viewer):
    office = MeterNode.objects.create(site=dec_site, name="Office", kind="building",
                                      floor_area_m2=100, tm46_category="general_office",
                                      annual_occupancy_hours=5400)  # fmt: skip
    _days(_power_meter(office, "Main", "electricity"), 100.0)
    _days(_power_meter(office, "Servers", "electricity", separable_use="server room",
                       counts_to_node=False), 20.0)  # fmt: skip
    client.force_login(viewer)
    page = client.get(f"/staff/energy/?site={dec_site.pk}&start={FIRST}&end={LAST}")
    assert page.status_code == 200
    html = page.content.decode()
    assert "(typical 95 + 120, adjusted)" in html
    assert "occupancy: 5,400 h a year counted (standard 2,040, maximum 8,760)" in html
    assert "server room (Servers, electricity)" in html


@pytest.mark.parametrize(
    ("payload", "field", "says"),
    [
        ({"tm46_category": "hotel", "annual_occupancy_hours": 6000},
         "annual_occupancy_hours", "does not adjust 'Hotel'"),
        ({"kind": "room", "annual_occupancy_hours": 3000},
         "annual_occupancy_hours", "only a building with a TM46 category"),
        ({"tm46_category": "general_office", "annual_occupancy_hours": 8785},
         "annual_occupancy_hours", "8784"),
    ],
)  # fmt: skip
def test_occupancy_hours_that_cannot_apply_are_refused_naming_the_field(
    engineer_api, site, payload, field, says
):
    body = {"site": site.pk, "name": "B", "kind": "building", "floor_area_m2": 500, **payload}
    r = engineer_api.post(f"{API}/nodes", body, format="json")
    assert r.status_code == 400, r.content
    assert field in r.content.decode() and says in r.content.decode()
    assert not MeterNode.objects.filter(name="B").exists()


def test_occupancy_hours_of_an_office_are_accepted(engineer_api, viewer_api, site):
    body = {"site": site.pk, "name": "B", "kind": "building", "floor_area_m2": 500,
            "tm46_category": "general_office", "annual_occupancy_hours": 3000}  # fmt: skip
    assert viewer_api.post(f"{API}/nodes", body, format="json").status_code == 403
    r = engineer_api.post(f"{API}/nodes", body, format="json")
    assert r.status_code == 201 and r.json()["annual_occupancy_hours"] == 3000


@pytest.mark.parametrize(
    ("node_kind", "fuel", "source", "says"),
    [
        ("building", "water", "cumulative", "water is not energy use of a building"),
        ("building", "electricity", "virtual", "not a virtual meter"),
        ("plant", "electricity", "cumulative", "is not in a building"),
    ],
)
def test_a_separable_use_must_be_metered_energy_inside_a_building(
    engineer_api, site, node_kind, fuel, source, says
):
    node = MeterNode.objects.create(site=site, name="N", kind=node_kind)
    feed = Feed.objects.create(name="f", tag="t", interval=60, unit="")
    body = {"node": node.pk, "name": "M", "fuel": fuel, "source": source,
            "separable_use": "server room"}  # fmt: skip
    if source != "virtual":
        body["feed"] = feed.pk
    r = engineer_api.post(f"{API}/meters", body, format="json")
    assert r.status_code == 400, r.content
    assert "separable_use" in r.content.decode() and says in r.content.decode()
    assert not Meter.objects.filter(name="M").exists()


def test_moving_a_room_with_a_separable_meter_out_of_its_building_is_refused(engineer_api, site):
    """Found by the outside check: a separable meter's room moved to the top of the tree, or
    its building turned into a floor, silently stopped being taken out of the rating."""
    office = MeterNode.objects.create(site=site, name="Office", kind="building")
    room = MeterNode.objects.create(site=site, parent=office, name="Server room", kind="room")
    _power_meter(room, "Servers", "electricity", separable_use="regional server room")

    r = engineer_api.patch(f"{API}/nodes/{room.pk}", {"parent": None}, format="json")
    assert r.status_code == 400, r.content
    body = r.content.decode()
    assert "parent" in body and "'Servers' (regional server room)" in body
    r = engineer_api.patch(f"{API}/nodes/{office.pk}", {"kind": "floor"}, format="json")
    assert r.status_code == 400 and "kind" in r.content.decode()
    room.refresh_from_db()
    office.refresh_from_db()
    assert room.parent_id == office.pk and office.kind == "building"
    # under another building it is still inside one: allowed
    other = MeterNode.objects.create(site=site, name="Library", kind="building")
    r = engineer_api.patch(f"{API}/nodes/{room.pk}", {"parent": other.pk}, format="json")
    assert r.status_code == 200, r.content


def test_the_admin_refuses_turning_the_building_into_a_floor(client, superuser, site):
    office = MeterNode.objects.create(site=site, name="Office", kind="building")
    room = MeterNode.objects.create(site=site, parent=office, name="Server room", kind="room")
    _power_meter(room, "Servers", "electricity", separable_use="server room")
    client.force_login(superuser)
    form = {"site": site.pk, "name": "Office", "kind": "floor", "floor_area_m2": "",
            "tm46_category": "", "annual_occupancy_hours": "", "baseline_start": "",
            "baseline_end": "", "meters-TOTAL_FORMS": "0", "meters-INITIAL_FORMS": "0",
            "meters-MIN_NUM_FORMS": "0", "meters-MAX_NUM_FORMS": "1000"}  # fmt: skip
    r = client.post(f"/admin/energy/meternode/{office.pk}/change/", form)
    assert r.status_code == 200  # the form again, with the error
    assert "would no longer be in a building" in r.content.decode()
    office.refresh_from_db()
    assert office.kind == "building"


def test_hours_outside_the_range_say_what_was_entered_and_what_counted(site, viewer_api):
    office = MeterNode.objects.create(site=site, name="Office", kind="building",
                                      floor_area_m2=100, tm46_category="general_office",
                                      annual_occupancy_hours=0)  # fmt: skip
    _days(_power_meter(office, "Main", "electricity"), 26.0)
    url = f"{API}/league?site={site.pk}&start={FIRST}&end={LAST}"
    notes = viewer_api.get(url).json()["buildings"][0]["dec"]["notes"]
    assert "occupancy: 0 h entered, under the standard: 2,040 h a year counted" in notes[1]
    office.annual_occupancy_hours = 8784
    office.save()
    notes = viewer_api.get(url).json()["buildings"][0]["dec"]["notes"]
    assert "occupancy: 8,784 h entered, over the maximum: 8,760 h a year counted" in notes[1]


def test_the_league_schema_names_every_field_it_gives_and_takes_the_site_slug(dec_site, viewer_api):
    """The OpenAPI schema of the league (an outside check found it a bare object) lists what
    a row holds; `site` takes the slug as the model upload does."""
    from energy.serializers import LeagueDecSerializer, LeagueRowSerializer

    office = MeterNode.objects.create(site=dec_site, name="Office", kind="building",
                                      floor_area_m2=100, tm46_category="general_office")  # fmt: skip
    _days(_power_meter(office, "Main", "electricity"), 26.0)
    r = viewer_api.get(f"{API}/league?site={dec_site.slug}&start={FIRST}&end={LAST}")
    assert r.status_code == 200, r.content
    row = r.json()["buildings"][0]
    assert set(row) == set(LeagueRowSerializer().fields)
    assert set(row["dec"]) == set(LeagueDecSerializer().fields)
    missing = viewer_api.get(f"{API}/league?site=no-such-site")
    assert missing.status_code == 400
    assert "no site with id or slug 'no-such-site'" in missing.content.decode()


def test_a_viewer_posting_the_admin_form_is_refused(client, viewer, site):
    office = MeterNode.objects.create(site=site, name="Office", kind="building",
                                      floor_area_m2=100, tm46_category="general_office")  # fmt: skip
    client.force_login(viewer)
    form = {"site": site.pk, "name": "Office", "kind": "building", "floor_area_m2": "100",
            "tm46_category": "general_office", "annual_occupancy_hours": "5400",
            "baseline_start": "", "baseline_end": "", "meters-TOTAL_FORMS": "0",
            "meters-INITIAL_FORMS": "0", "meters-MIN_NUM_FORMS": "0",
            "meters-MAX_NUM_FORMS": "1000"}  # fmt: skip
    r = client.post(f"/admin/energy/meternode/{office.pk}/change/", form)
    assert r.status_code == 403
    office.refresh_from_db()
    assert office.annual_occupancy_hours is None
