"""The monthly report of one building: the staff page's figures for a calendar month, as data
and as CSV (energy/report_pdf.py draws the PDF, energy/report_mail.py sends both).

Per fuel: use per day against the model, the CUSUM, cost and kg CO2e (grid electricity per
day's factor), savings; for the building: kWh/m² of the month and annualised, the DEC
operational rating. Methods: docs/ENERGY.md.
"""

from __future__ import annotations

import calendar
import io
import re
from dataclasses import dataclass
from datetime import date

from core import csv_safe
from energy import report
from energy.models import EnergySite, MeterNode

MIN_YEAR, MAX_YEAR = 2000, 2100
_MONTH = re.compile(r"(\d{4})-(\d{2})")


class BadMonth(ValueError):
    """A month that is not YYYY-MM between MIN_YEAR and MAX_YEAR."""


def parse_month(raw: object) -> tuple[int, int]:
    if raw is None or raw == "":
        raise BadMonth("month is required, as YYYY-MM")
    if not isinstance(raw, str) or not _MONTH.fullmatch(raw):
        raise BadMonth(f"{str(raw)[:20]!r} is not a month (YYYY-MM)")
    year, month = int(raw[:4]), int(raw[5:])
    if not (MIN_YEAR <= year <= MAX_YEAR and 1 <= month <= 12):
        raise BadMonth(f"{raw!r}: a month from {MIN_YEAR}-01 to {MAX_YEAR}-12")
    return year, month


def previous_month(today: date) -> tuple[int, int]:
    return (today.year - 1, 12) if today.month == 1 else (today.year, today.month - 1)


@dataclass
class MonthlyReport:
    node: MeterNode
    year: int
    month: int
    first: date
    last: date
    currency: str
    fuels: list[dict]  # report.node_report per fuel, by day
    building: dict | None  # the building's row of report.league for the month

    @property
    def title(self) -> str:
        return f"{self.node.name}: energy in {calendar.month_name[self.month]} {self.year}"

    def filename(self, ext: str) -> str:
        name = re.sub(r"[^A-Za-z0-9]+", "-", self.node.name).strip("-").lower() or "building"
        return f"energy-{name}-{self.year}-{self.month:02d}.{ext}"

    def totals(self) -> dict:
        """Over all fuels: cost, kg CO2e and savings (kWh of energy fuels only)."""
        out = {"cost": 0.0, "kg_co2e": 0.0, "saved_kg_co2e": 0.0, "saved_money": 0.0}
        for f in self.fuels:
            out["cost"] += f["cost"] or 0.0
            out["kg_co2e"] += f["kg_co2e"] or 0.0
            out["saved_kg_co2e"] += f["savings"]["kg_co2e"] or 0.0
            out["saved_money"] += f["savings"]["money"] or 0.0
        return {k: round(v, 2) for k, v in out.items()}


def build(node: MeterNode, year: int, month: int, tree: report.Tree | None = None) -> MonthlyReport:
    tree = tree or report.Tree.load(node.site)
    first = date(year, month, 1)
    last = date(year, month, calendar.monthrange(year, month)[1])
    fuels = [
        report.node_report(tree, node, fuel, first, last, "day") for fuel in tree.fuels(node.pk)
    ]
    building = next(
        (row for row in report.league(tree, first, last) if row["node"] == node.pk), None
    )
    settings_row = EnergySite.objects.filter(site=node.site).first()
    currency = settings_row.currency if settings_row else "GBP"
    return MonthlyReport(node, year, month, first, last, currency, fuels, building)


CSV_COLUMNS = [
    "building", "fuel", "unit", "day", "actual", "status", "expected", "cusum",
    "cost", "kg_co2e", "hdd",
]  # fmt: skip


def to_csv(rep: MonthlyReport) -> bytes:
    """One row per fuel and day, then one total row per fuel (day = "total"). A name that
    starts like a formula gets a leading quote (core/csv_safe.py): the file is mailed."""
    out = io.StringIO()
    w = csv_safe.writer(out, lineterminator="\r\n")
    w.writerow(CSV_COLUMNS)
    for f in rep.fuels:
        for row in f["rows"]:
            w.writerow([rep.node.name, f["fuel"], f["unit"], row["start"], _c(row["actual"]),
                        row["status"], _c(row["expected"]), _c(row["cusum"]), _c(row["cost"]),
                        _c(row["kg_co2e"]), _c(row["hdd"])])  # fmt: skip
        w.writerow([rep.node.name, f["fuel"], f["unit"], "total", _c(f["total"]),
                    f"{f['gap_days']} gap days", _c(f["expected_total"]), _c(f["cusum"]),
                    _c(f["cost"]), _c(f["kg_co2e"]), ""])  # fmt: skip
    return out.getvalue().encode("utf-8")


def _c(x: float | None) -> str:
    # A gap is an empty cell, never 0.
    return "" if x is None else f"{x:g}"
