"""The site energy model CSV (energy/model_csv.py), as the outside tester found it: the row
bound counted before rows are checked, dates bounded to 1970..2100, the unit column checked
against the fuel, duplicate rows of one file named, the site given by id or slug. Timings are
in bench/energy_model_upload.py (docs/BENCHMARKS.md "Energy"), not asserted here."""

from __future__ import annotations

import csv
from datetime import date, timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from energy import model_csv
from energy.models import ExpectedUse

API = "/api/v1/energy"
HEADER = "building,fuel,start,end,kwh\n"


def _upload(api, site, body: bytes | str, site_param=None):
    body = body.encode() if isinstance(body, str) else body
    return api.post(
        f"{API}/expected/upload",
        {"site": site.pk if site_param is None else site_param,
         "file": SimpleUploadedFile("model.csv", body, "text/csv")},
        format="multipart",
    )  # fmt: skip


def _daily_rows(n: int) -> str:
    """n one-day periods of Office, electricity then gas, none overlapping."""
    first = date(2000, 1, 1)
    half = (n + 1) // 2
    return "".join(
        f"Office,{'electricity' if i < half else 'gas'},"
        f"{first + timedelta(days=i % half)},{first + timedelta(days=i % half)},{i}\n"
        for i in range(n)
    )


def test_the_row_limit_accepts_10000_rows(engineer_api, site, office):
    body = HEADER + _daily_rows(model_csv.MAX_ROWS)
    r = _upload(engineer_api, site, body)
    assert r.status_code == 201, r.content[:300]
    assert r.json() == {"stored": model_csv.MAX_ROWS}
    assert ExpectedUse.objects.count() == model_csv.MAX_ROWS
    again = _upload(engineer_api, site, body)  # each row replaces its stored twin
    assert again.status_code == 201 and ExpectedUse.objects.count() == model_csv.MAX_ROWS


def test_10001_rows_are_refused_before_any_row_is_checked(engineer_api, site, office):
    # row 2 is bad too: the count is what is refused, so no row was parsed first
    body = HEADER + "Nope,gas,2024-01-01,2024-01-31,1\n" + _daily_rows(model_csv.MAX_ROWS)
    r = _upload(engineer_api, site, body)
    assert r.status_code == 400
    assert "more than 10000 rows" in r.json()["error"]
    assert not ExpectedUse.objects.exists()


@pytest.mark.parametrize(
    ("start", "end", "field"),
    [
        ("9999-01-01", "9999-12-31", "start"),
        ("1900-01-01", "1900-01-31", "start"),
        ("1969-12-31", "1970-01-30", "start"),  # a day before the bound
        ("2100-12-01", "2101-01-01", "end"),  # a day after it
    ],
)
def test_dates_outside_1970_2100_are_refused_naming_row_and_field(
    engineer_api, site, office, start, end, field
):
    r = _upload(engineer_api, site, HEADER + f"Office,gas,{start},{end},5\n")
    assert r.status_code == 400
    assert f"row 2, {field}: " in r.json()["error"]
    assert "outside 1970-01-01..2100-12-31" in r.json()["error"]
    assert not ExpectedUse.objects.exists()


def test_the_first_and_last_days_of_the_bound_are_accepted(engineer_api, site, office):
    body = HEADER + "Office,gas,1970-01-01,1970-01-31,5\nOffice,gas,2100-12-01,2100-12-31,5\n"
    assert _upload(engineer_api, site, body).status_code == 201
    assert ExpectedUse.objects.count() == 2


def test_the_model_api_refuses_a_period_outside_the_bound_too(engineer_api, office):
    r = engineer_api.post(f"{API}/expected", {"node": office.pk, "fuel": "gas",
                          "start": "9999-01-01", "end": "9999-12-31", "value": 5}, format="json")  # fmt: skip
    assert r.status_code == 400 and "start" in r.json()["fields"]


@pytest.mark.parametrize(
    ("line", "unit"),
    [("Office,water,2024-01-01,2024-01-31,5,kwh", "kwh"),
     ("Office,gas,2024-01-01,2024-01-31,5,m³", "m³"),
     ("Office,electricity,2024-01-01,2024-01-31,5,°C", "°C")],
)  # fmt: skip
def test_a_unit_that_does_not_fit_the_fuel_is_refused_naming_row_and_field(
    engineer_api, site, office, line, unit
):
    r = _upload(engineer_api, site, HEADER.replace("kwh\n", "kwh,unit\n") + line + "\n")
    assert r.status_code == 400
    assert f"row 2, unit: '{unit}'" in r.json()["error"]
    assert not ExpectedUse.objects.exists()


def test_the_unit_column_accepts_the_fuels_own_unit_and_may_be_empty(engineer_api, site, office):
    body = (HEADER.replace("kwh\n", "kwh,unit\n") + "Office,water,2024-01-01,2024-01-31,5,m3\n"
            "Office,water,2024-02-01,2024-02-29,5,m³\nOffice,gas,2024-01-01,2024-01-31,5,kWh\n"
            "Office,gas,2024-02-01,2024-02-29,5,\n")  # fmt: skip
    r = _upload(engineer_api, site, body)
    assert r.status_code == 201, r.content
    assert ExpectedUse.objects.count() == 4


def test_a_cell_beyond_the_header_is_refused_not_dropped(engineer_api, site, office):
    # the tester's `water,...,kwh` without a unit column: the unit was silently dropped
    r = _upload(engineer_api, site, HEADER + "Office,water,2024-01-01,2024-01-31,5,kwh\n")
    assert r.status_code == 400 and "row 2, file: 'kwh' is beyond" in r.json()["error"]
    r = _upload(engineer_api, site, HEADER.replace("\n", ",units\n") + "Office,gas,2024-01-01,"
                "2024-01-31,5,kwh\n")  # fmt: skip
    assert r.status_code == 400 and "unknown column(s) units" in r.json()["error"]
    r = _upload(engineer_api, site, HEADER.replace("\n", ",\n") + "Office,gas,2024-01-01,"
                "2024-01-31,5,kwh\n")  # fmt: skip
    assert r.status_code == 400 and "row 2, file: 'kwh' is beyond" in r.json()["error"]
    # a trailing empty cell (a spreadsheet's export) is fine
    r = _upload(engineer_api, site, HEADER + "Office,gas,2024-01-01,2024-01-31,5,\n")
    assert r.status_code == 201
    assert ExpectedUse.objects.count() == 1


def test_a_duplicate_row_of_the_file_names_both_rows(engineer_api, site, office):
    body = HEADER + ("Office,gas,2024-03-01,2024-03-31,1\nOffice,gas,2024-01-01,2024-01-31,5\n"
                     "Office,electricity,2024-01-01,2024-01-31,5\n"
                     "Office,gas,2024-01-01,2024-01-31,6\n")  # fmt: skip
    r = _upload(engineer_api, site, body)
    assert r.status_code == 400 and "row 5, start: overlaps row 3" in r.json()["error"]
    assert not ExpectedUse.objects.exists()


def test_a_row_overlapping_a_stored_period_it_does_not_replace_is_named(engineer_api, site, office):
    assert _upload(engineer_api, site, HEADER + "Office,gas,2024-01-01,2024-01-31,5\n").status_code == 201  # fmt: skip
    body = HEADER + "Office,gas,2023-12-01,2023-12-31,5\nOffice,gas,2024-01-31,2024-02-28,5\n"
    r = _upload(engineer_api, site, body)
    assert r.status_code == 400
    assert "row 3, start: overlaps the model period 2024-01-01..2024-01-31" in r.json()["error"]
    assert ExpectedUse.objects.count() == 1  # all or nothing


def test_the_site_is_given_by_id_or_slug(engineer_api, site, office):
    row = HEADER + "Office,gas,2024-01-01,2024-01-31,5\n"
    assert _upload(engineer_api, site, row, site_param="cat-demo").status_code == 201
    assert _upload(engineer_api, site, row, site_param=str(site.pk)).status_code == 201
    assert ExpectedUse.objects.count() == 1
    r = _upload(engineer_api, site, row, site_param="nope")
    assert (
        r.status_code == 400 and "no site with id or slug 'nope'" in r.json()["fields"]["site"][0]
    )


@pytest.mark.parametrize("bad", ["\x00", "cat\x00demo", "a b", "../x"])
def test_a_site_that_cannot_be_a_slug_is_a_400_naming_site(engineer_api, site, office, bad):
    """Never looked up: a NUL in a text lookup is an error on PostgreSQL (the schema fuzz test
    found it as a 500)."""
    row = HEADER + "Office,gas,2024-01-01,2024-01-31,5\n"
    r = _upload(engineer_api, site, row, site_param=bad)
    assert r.status_code == 400 and "site" in r.json()["fields"]
    assert ExpectedUse.objects.count() == 0


def _over_long(column: str) -> bytes:
    """A model whose row 3 has a cell one character over csv's field limit in `column`."""
    cells = {"building": "Office", "fuel": "gas", "start": "2024-02-01",
             "end": "2024-02-28", "kwh": "1"}  # fmt: skip
    cells[column] = "x" * (csv.field_size_limit() + 1)
    row = ",".join(cells[c] for c in model_csv.COLUMNS)
    return (HEADER + "Office,gas,2024-01-01,2024-01-31,1\n" + row + "\n").encode()


@pytest.mark.parametrize("column", ["building", "kwh"])
def test_a_cell_over_the_csv_field_limit_is_a_400_naming_row_and_column(
    engineer_api, site, office, column
):
    """A field over 131,072 characters was csv.Error, a 500."""
    r = _upload(engineer_api, site, _over_long(column))
    assert r.status_code == 400, r.content[:300]
    assert f"row 3, {column}: a cell longer than" in r.json()["error"]
    assert r.json()["fields"]["row"] == ["3"]
    assert not ExpectedUse.objects.exists()


def test_a_quoted_over_long_cell_is_named_too(engineer_api, site, office):
    long = '"' + "a,b" * (csv.field_size_limit() // 3 + 1) + '"'
    body = HEADER + f"Office,gas,2024-01-01,2024-01-31,{long}\n"
    r = _upload(engineer_api, site, body)
    assert r.status_code == 400 and "row 2, kwh: a cell longer than" in r.json()["error"]


def test_the_staff_page_names_the_row_of_an_over_long_cell(client, engineer, site, office):
    client.force_login(engineer)
    upload = SimpleUploadedFile("model.csv", _over_long("fuel"), "text/csv")
    r = client.post("/staff/energy/model/", {"site": site.pk, "file": upload}, follow=True)
    assert r.status_code == 200
    page = r.content.decode()
    assert "Model not imported (no row was stored): row 3, fuel: a cell longer than" in page
    assert not ExpectedUse.objects.exists()
