"""The metering tree through /api/v1/energy/: roles, virtual meters refused with a cycle or
mixed units (the message names them), the model CSV upload and the bounds."""

from __future__ import annotations

from datetime import date

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from energy import model_csv, refresh
from energy.models import ExpectedUse, Meter, MeterNode
from feeds.models import Feed

API = "/api/v1/energy"


@pytest.fixture
def feed(db) -> Feed:
    return Feed.objects.create(name="kwh", tag="t", interval=60)


def _meter(node, name, fuel, feed=None, source="cumulative") -> Meter:
    return Meter.objects.create(node=node, name=name, fuel=fuel, feed=feed, source=source)


def test_engineer_creates_tree_viewer_reads_but_may_not_write(engineer_api, viewer_api, site):
    r = engineer_api.post(f"{API}/nodes", {"site": site.pk, "name": "B1", "kind": "building",
                                           "floor_area_m2": 1200, "tm46_category": "general_office"},
                          format="json")  # fmt: skip
    assert r.status_code == 201, r.content
    room = engineer_api.post(
        f"{API}/nodes",
        {"site": site.pk, "parent": r.data["id"], "name": "Room 1", "kind": "room"},
        format="json",
    )
    assert room.status_code == 201
    assert viewer_api.get(f"{API}/nodes").status_code == 200
    refused = viewer_api.post(f"{API}/nodes", {"site": site.pk, "name": "B2"}, format="json")
    assert refused.status_code == 403
    assert MeterNode.objects.count() == 2


def test_anonymous_gets_401(anon_api, office):
    assert anon_api.get(f"{API}/nodes").status_code == 401
    assert anon_api.get(f"{API}/nodes/{office.pk}/consumption").status_code == 401


def test_node_parent_loop_is_refused_naming_the_nodes(engineer_api, site, office):
    room = MeterNode.objects.create(site=site, parent=office, name="Room", kind="room")
    r = engineer_api.patch(f"{API}/nodes/{office.pk}", {"parent": room.pk}, format="json")
    assert r.status_code == 400
    assert "'Room' is inside 'Office'" in r.json()["error"]


def test_virtual_meter_house_import_plus_pv_minus_export(engineer_api, office, feed):
    grid = _meter(office, "Grid import", "electricity", feed)
    pv = _meter(office, "PV", "generation", feed)
    export = _meter(office, "Export", "electricity", feed)
    r = engineer_api.post(
        f"{API}/meters",
        {"node": office.pk, "name": "House", "fuel": "electricity", "source": "virtual",
         "terms": [{"source": grid.pk, "sign": 1}, {"source": pv.pk, "sign": 1},
                   {"source": export.pk, "sign": -1}]},
        format="json",
    )  # fmt: skip
    assert r.status_code == 201, r.content
    house = Meter.objects.get(name="House")
    assert sorted((t.source.name, t.sign) for t in house.terms.all()) == [
        ("Export", -1), ("Grid import", 1), ("PV", 1)
    ]  # fmt: skip


def test_virtual_meter_mixing_gas_and_electricity_is_refused_naming_them(
    engineer_api, office, feed
):
    gas = _meter(office, "Gas main", "gas", feed)
    r = engineer_api.post(
        f"{API}/meters",
        {"node": office.pk, "name": "Mixed", "fuel": "electricity", "source": "virtual",
         "terms": [{"source": gas.pk, "sign": 1}]},
        format="json",
    )  # fmt: skip
    assert r.status_code == 400
    error = r.json()["error"]
    assert "units do not agree" in error and "'Gas main'" in error and "'Mixed'" in error
    assert not Meter.objects.filter(name="Mixed").exists()


def test_virtual_meter_cycle_is_refused_naming_the_chain(engineer_api, office, feed):
    main = _meter(office, "Main", "electricity", feed)
    a = _meter(office, "A", "electricity", source="virtual")
    a.terms.create(source=main, sign=1)
    b = _meter(office, "B", "electricity", source="virtual")
    b.terms.create(source=a, sign=1)
    r = engineer_api.patch(
        f"{API}/meters/{a.pk}", {"terms": [{"source": b.pk, "sign": 1}]}, format="json"
    )
    assert r.status_code == 400
    assert r.json()["error"] == "terms: cycle: 'A' -> 'B' -> 'A'"
    assert [t.source_id for t in a.terms.all()] == [main.pk]  # nothing lost
    itself = engineer_api.patch(
        f"{API}/meters/{a.pk}", {"terms": [{"source": a.pk, "sign": 1}]}, format="json"
    )
    assert itself.status_code == 400 and "cannot contain itself" in itself.json()["error"]


def test_changing_a_used_meter_to_another_fuel_is_refused(engineer_api, office, feed):
    main = _meter(office, "Main", "electricity", feed)
    v = _meter(office, "V", "electricity", source="virtual")
    v.terms.create(source=main, sign=1)
    r = engineer_api.patch(f"{API}/meters/{main.pk}", {"fuel": "gas"}, format="json")
    assert r.status_code == 400
    assert "'V'" in r.json()["error"] and "gas" in r.json()["error"]


def test_physical_meter_needs_a_feed_and_virtual_has_none(engineer_api, office, feed):
    r = engineer_api.post(f"{API}/meters", {"node": office.pk, "name": "M", "fuel": "gas",
                                            "source": "cumulative"}, format="json")  # fmt: skip
    assert r.status_code == 400 and r.json()["fields"]["feed"]
    r = engineer_api.post(f"{API}/meters", {"node": office.pk, "name": "V", "fuel": "gas",
                                            "source": "virtual", "feed": feed.pk,
                                            "terms": []}, format="json")  # fmt: skip
    assert r.status_code == 400


def test_terms_bound(engineer_api, office, feed):
    sources = [_meter(office, f"m{i}", "electricity", feed) for i in range(51)]
    r = engineer_api.post(
        f"{API}/meters",
        {"node": office.pk, "name": "Big", "fuel": "electricity", "source": "virtual",
         "terms": [{"source": m.pk, "sign": 1} for m in sources]},
        format="json",
    )  # fmt: skip
    assert r.status_code == 400 and "at most 50 terms" in r.json()["error"]


CSV_OK = b"building,fuel,start,end,kwh\nOffice,gas,2024-01-01,2024-01-31,3100\nOffice,gas,2024-02-01,2024-02-29,2900\n"


def _upload(api, site, body: bytes):
    return api.post(
        f"{API}/expected/upload",
        {"site": site.pk, "file": SimpleUploadedFile("model.csv", body, "text/csv")},
        format="multipart",
    )


def test_model_csv_upload_stores_rows(engineer_api, site, office):
    r = _upload(engineer_api, site, CSV_OK)
    assert r.status_code == 201 and r.json() == {"stored": 2}
    assert ExpectedUse.objects.get(start="2024-02-01").value == 2900
    again = _upload(engineer_api, site, CSV_OK)  # same periods: replaced, not doubled
    assert again.status_code == 201 and ExpectedUse.objects.count() == 2


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b"building,fuel,start,end,kwh\nOffice,gas,2024-01-01,2024-01-31,lots\n", "row 2, kwh"),
        (b"building,fuel,start,end,kwh\nOffice,gas,2024-01-01,2024-01-31,1\nNope,gas,2024-01-01,2024-01-31,1\n", "row 3, building"),
        (b"building,fuel,start,end,kwh\nOffice,petrol,2024-01-01,2024-01-31,1\n", "row 2, fuel"),
        (b"building,fuel,start,end,kwh\nOffice,gas,2024-01-31,2024-01-01,1\n", "row 2, end"),
        (b"building,fuel,start,end,kwh\nOffice,gas,2024-01-01,2024-01-31,1\nOffice,gas,2024-01-15,2024-02-15,1\n", "row 3, start"),
        (b"building,fuel,start\nOffice,gas,2024-01-01\n", "header lacks column(s) end, kwh"),
        (b"building,fuel,start,end,kwh\nOffice,gas,2024-1-1,2024-01-31,1\n", "row 2, start"),
    ],
)  # fmt: skip
def test_model_csv_bad_row_is_400_naming_row_and_field(engineer_api, site, office, body, expected):
    r = _upload(engineer_api, site, body)
    assert r.status_code == 400
    assert expected in r.json()["error"]
    assert ExpectedUse.objects.count() == 0  # all or nothing


def test_model_csv_size_bound(engineer_api, site, office):
    line = b"Office,gas,2024-01-01,2024-01-31,1\n"
    big = b"building,fuel,start,end,kwh\n" + line * (model_csv.MAX_BYTES // len(line) + 1)
    r = _upload(engineer_api, site, big)
    assert r.status_code == 400 and "larger than" in r.json()["error"]


def test_model_csv_upload_refused_for_viewer(viewer_api, site, office):
    assert _upload(viewer_api, site, CSV_OK).status_code == 403
    assert ExpectedUse.objects.count() == 0


def test_consumption_range_bound_names_the_field(viewer_api, office):
    r = viewer_api.get(f"{API}/nodes/{office.pk}/consumption?start=2020-01-01&end=2024-01-01")
    assert r.status_code == 400 and r.json()["fields"]["end"]
    ok = viewer_api.get(f"{API}/nodes/{office.pk}/consumption?start=2021-01-07&end=2024-01-10")
    assert ok.status_code == 200  # 1099 days: inside the bound
    bad = viewer_api.get(f"{API}/nodes/{office.pk}/consumption?period=hour")
    assert bad.status_code == 400 and "period" in bad.json()["error"]


def test_refresh_is_for_engineers(viewer_api, engineer_api, site):
    assert viewer_api.post(f"{API}/refresh", {"site": site.pk}, format="json").status_code == 403
    r = engineer_api.post(f"{API}/refresh", {"site": site.pk}, format="json")
    assert r.status_code == 200
    too_long = engineer_api.post(
        f"{API}/refresh",
        {"site": site.pk, "start": "2023-01-01", "end": "2024-03-01"},
        format="json",
    )
    assert too_long.status_code == 400 and "at most 400 days" in too_long.json()["error"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ([None, None], "body"),  # found by schemathesis: a JSON list was a 500
        ("site", "body"),
        ({"site": [1]}, "site"),
        ({"site": {"a": 1}}, "site"),
        ({"site": "9" * 19}, "site"),
        ({"site": True}, "site"),
        ({"site": "SITE", "start": 20240101}, "start"),
        ({"site": "SITE", "end": ["2024-01-01"]}, "end"),
    ],
)
def test_refresh_refuses_malformed_bodies_naming_the_field(engineer_api, site, body, field):
    if isinstance(body, dict) and body.get("site") == "SITE":
        body = {**body, "site": site.pk}
    r = engineer_api.post(f"{API}/refresh", body, format="json")
    assert r.status_code == 400, r.content[:200]
    assert field in r.json()["fields"]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("start=9999-12-30&end=9999-12-31", "end"),
        ("start=0001-01-01&end=0001-01-02", "end"),
        ("start=1969-12-31&end=1970-01-02", "start"),
        ("start=2100-12-30&end=2101-01-01", "end"),
    ],
)
def test_consumption_dates_outside_1970_2100_are_400_naming_the_field(
    viewer_api, office, query, field
):
    r = viewer_api.get(f"{API}/nodes/{office.pk}/consumption?fuel=gas&{query}")
    assert r.status_code == 400 and field in r.json()["fields"], r.content[:200]
    ok = viewer_api.get(f"{API}/nodes/{office.pk}/consumption?start=2100-12-01&end=2100-12-31")
    assert ok.status_code == 200  # the last day inside the bound


def test_refresh_refuses_years_no_feed_holds_and_writes_nothing(engineer_api, site, office, feed):
    from energy.models import MeterDay

    _meter(office, "Elec", "electricity", feed=feed, source="power")
    for start, end in (("9999-12-01", "9999-12-31"), ("0001-01-01", "0001-01-31")):
        r = engineer_api.post(f"{API}/refresh", {"site": site.pk, "start": start, "end": end},
                              format="json")  # fmt: skip
        assert r.status_code == 400 and r.json()["fields"], r.content[:200]
    assert not MeterDay.objects.exists()
    with pytest.raises(ValueError, match="within 1970-01-01..2100-12-31"):
        refresh.refresh(Meter.objects.all(), date(9999, 12, 1), date(9999, 12, 2))


def test_model_csv_row_for_a_room_is_refused_the_model_is_per_building(engineer_api, site, office):
    MeterNode.objects.create(site=site, parent=office, name="Room 1", kind="room")
    body = b"building,fuel,start,end,kwh\nRoom 1,gas,2024-01-01,2024-01-31,5\n"
    r = _upload(engineer_api, site, body)
    assert r.status_code == 400 and "the model is per building" in r.json()["error"]
    assert not ExpectedUse.objects.exists()
