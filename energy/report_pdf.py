"""The monthly report as a PDF, drawn with ReportLab (platypus for the flow, reportlab.graphics
for the charts): a summary table, then per fuel a chart of use against the model per day and
the CUSUM line, and the table of days. docs/ENERGY.md "Monthly report".

The standard PDF fonts cover Latin-1 only, so text here writes CO2 and m2 plainly (² is in
Latin-1 and kept; the subscript ₂ is not).
"""

from __future__ import annotations

import io
from datetime import date
from xml.sax.saxutils import escape

from reportlab.graphics.charts.barcharts import VerticalBarChart
from reportlab.graphics.charts.legends import Legend
from reportlab.graphics.charts.lineplots import LinePlot
from reportlab.graphics.shapes import Drawing, Line, String
from reportlab.lib import colors
from reportlab.lib.pagesizes import A4
from reportlab.lib.styles import ParagraphStyle, getSampleStyleSheet
from reportlab.lib.units import cm
from reportlab.platypus import (
    KeepTogether,
    Paragraph,
    SimpleDocTemplate,
    Spacer,
    Table,
    TableStyle,
)

from energy import report
from energy.monthly import MonthlyReport

ACTUAL = colors.HexColor("#2f6db5")
EXPECTED = colors.HexColor("#b0b7c3")
CUSUM = colors.HexColor("#c0392b")
WIDTH = 17 * cm


def _n(x: float | None, digits: int = 1) -> str:
    return "–" if x is None else f"{x:,.{digits}f}"


def _text(raw: object) -> str:
    """Plain text for a Paragraph, whose text is parsed as ReportLab's XML-like markup."""
    return escape(str(raw))


def _money(x: float | None, currency: str) -> str:
    symbol = report.SYMBOLS.get(currency)
    if x is None:
        return "–"
    return f"{symbol}{x:,.2f}" if symbol else f"{x:,.2f} {currency}"


def _table(rows: list[list], widths: list[float], header_rows: int = 1) -> Table:
    t = Table(rows, colWidths=widths, repeatRows=header_rows)
    t.setStyle(
        TableStyle(
            [
                ("FONT", (0, 0), (-1, -1), "Helvetica", 8.5),
                ("FONT", (0, 0), (-1, header_rows - 1), "Helvetica-Bold", 8.5),
                ("ALIGN", (1, 0), (-1, -1), "RIGHT"),
                ("LINEBELOW", (0, header_rows - 1), (-1, header_rows - 1), 0.6, colors.black),
                ("ROWBACKGROUNDS", (0, header_rows), (-1, -1), [colors.white, colors.whitesmoke]),
                ("TOPPADDING", (0, 0), (-1, -1), 1.5),
                ("BOTTOMPADDING", (0, 0), (-1, -1), 1.5),
            ]
        )
    )
    return t


def _bars(fuel: dict) -> Drawing:
    """Actual (blue) and expected (grey) per day; a gap day has no bar."""
    rows = fuel["rows"]
    d = Drawing(WIDTH, 5.2 * cm)
    chart = VerticalBarChart()
    chart.x, chart.y = 1.6 * cm, 0.8 * cm
    chart.width, chart.height = WIDTH - 2.2 * cm, 3.8 * cm
    chart.data = [
        [r["actual"] if r["actual"] is not None else None for r in rows],
        [r["expected"] if r["expected"] is not None else None for r in rows],
    ]
    chart.bars[0].fillColor = ACTUAL
    chart.bars[1].fillColor = EXPECTED
    chart.bars.strokeWidth = 0
    chart.groupSpacing = 1.5
    chart.categoryAxis.categoryNames = [
        str(date.fromisoformat(r["start"]).day) if i % 2 == 0 else "" for i, r in enumerate(rows)
    ]
    chart.categoryAxis.labels.fontSize = 6.5
    chart.valueAxis.valueMin = 0
    chart.valueAxis.labels.fontSize = 7
    chart.valueAxis.visibleGrid = True
    chart.valueAxis.gridStrokeColor = colors.lightgrey
    d.add(chart)
    d.add(String(0, 5.0 * cm, f"{fuel['fuel'].capitalize()} per day ({fuel['unit']})",
                 fontName="Helvetica-Bold", fontSize=9))  # fmt: skip
    legend = Legend()
    legend.x, legend.y = WIDTH - 5.5 * cm, 5.15 * cm
    legend.alignment = "right"
    legend.columnMaximum = 1
    legend.fontSize = 7.5
    legend.colorNamePairs = [(ACTUAL, "actual"), (EXPECTED, "expected (model)")]
    d.add(legend)
    return d


def _cusum(fuel: dict) -> Drawing:
    """The running sum of actual - expected: it turns down on the day savings start."""
    pts = [(i + 1, r["cusum"]) for i, r in enumerate(fuel["rows"]) if r["cusum"] is not None]
    d = Drawing(WIDTH, 4.2 * cm)
    d.add(String(0, 4.0 * cm, f"CUSUM of actual - expected ({fuel['unit']})",
                 fontName="Helvetica-Bold", fontSize=9))  # fmt: skip
    if len(pts) < 2:
        d.add(String(1.6 * cm, 2 * cm, "No expected use this month: no CUSUM.", fontSize=8))
        return d
    plot = LinePlot()
    plot.x, plot.y = 1.6 * cm, 0.6 * cm
    plot.width, plot.height = WIDTH - 2.2 * cm, 3.0 * cm
    plot.data = [pts]
    plot.lines[0].strokeColor = CUSUM
    plot.lines[0].strokeWidth = 1.6
    plot.xValueAxis.valueMin = 1
    plot.xValueAxis.valueMax = len(fuel["rows"])
    plot.xValueAxis.valueSteps = list(range(1, len(fuel["rows"]) + 1, 2))
    plot.xValueAxis.labels.fontSize = 6.5
    plot.yValueAxis.labels.fontSize = 7
    plot.yValueAxis.visibleGrid = True
    plot.yValueAxis.gridStrokeColor = colors.lightgrey
    low = min(0.0, *(y for _x, y in pts))
    high = max(0.0, *(y for _x, y in pts))
    plot.yValueAxis.valueMin, plot.yValueAxis.valueMax = low, high if high > low else low + 1
    d.add(plot)
    # the zero line: below it the building used less than the model
    y0 = plot.y + plot.height * (0 - low) / ((high if high > low else low + 1) - low)
    d.add(Line(plot.x, y0, plot.x + plot.width, y0, strokeColor=colors.black, strokeWidth=0.5))
    return d


def render(rep: MonthlyReport) -> bytes:
    buf = io.BytesIO()
    doc = SimpleDocTemplate(
        buf, pagesize=A4, leftMargin=2 * cm, rightMargin=2 * cm, topMargin=1.6 * cm,
        bottomMargin=1.6 * cm, title=rep.title, author="Open BMS",
        subject=f"Monthly energy report {rep.year}-{rep.month:02d}",
    )  # fmt: skip
    styles = getSampleStyleSheet()
    story: list = [
        # Paragraph text is ReportLab markup: every name a person typed is escaped, so
        # `Hall <b>` is printed as written, not parsed (a 500) or obeyed (a link, a font)
        Paragraph(_text(rep.title), styles["Title"]),
        Paragraph(
            _text(
                f"{rep.node.site.name} · {rep.first.isoformat()} to {rep.last.isoformat()} "
                f"(local days, {rep.node.site.time_zone or 'site time zone'})"
            ),
            styles["Normal"],
        ),
        Spacer(1, 0.4 * cm),
    ]
    totals = rep.totals()
    b = rep.building or {}
    dec = b.get("dec")
    summary = [
        ["Figure", "Value"],
        ["Cost (all fuels)", _money(totals["cost"], rep.currency)],
        ["Emissions (kg CO2e)", _n(totals["kg_co2e"])],
        ["Saved against the model (kg CO2e)", _n(totals["saved_kg_co2e"])],
        ["Saved against the model (money)", _money(totals["saved_money"], rep.currency)],
        ["Energy this month (kWh/m²)", _n(b.get("kwh_per_m2"), 2)],
        # a month with gap days (the current one: today on) is annualised on the days it has
        [f"Energy annualised (kWh/m² a year, on {b.get('days_with_data', 0)} of "
         f"{b.get('days', 0)} days with data)", _n(b.get("kwh_per_m2_year"))],
        ["TM46 typical, electricity + fossil (kWh/m² a year)",
         f"{_n(b.get('tm46_typical_electricity'), 0)} + {_n(b.get('tm46_typical_fossil'), 0)}"
         if b.get("tm46_category") else "no category set"],
        ["TM46 benchmark for this building, electricity + fossil (kWh/m² a year)",
         f"{_n(dec['benchmark_electricity'], 0)} + {_n(dec['benchmark_fossil'], 0)}"
         if dec else "–"],
        ["DEC operational rating",
         f"{_n(b.get('operational_rating'), 0)} ({b.get('dec_grade') or '–'})"],
    ]  # fmt: skip

    story.append(_table(summary, [11 * cm, 6 * cm]))
    # what adjusted the benchmark and what was taken out, in the words of the staff page
    note_style = ParagraphStyle("dec-note", parent=styles["Normal"], fontSize=8, leading=10)
    if b.get("warning"):  # why there is no rating, as the staff page says it
        story.append(Paragraph(_text(f"Warning: {b['warning']}"), note_style))
    for note in dec["notes"] if dec else []:
        story.append(Paragraph(_text(f"DEC {note}"), note_style))
    story.append(Spacer(1, 0.3 * cm))
    per_fuel = [["Fuel", "Actual", "Expected", "CUSUM", "Saved", "Cost", "kg CO2e", "Gap days"]]
    for f in rep.fuels:
        per_fuel.append([
            f"{f['fuel']} ({f['unit']})", _n(f["total"]), _n(f["expected_total"]), _n(f["cusum"]),
            _n(f["savings"]["kwh"]), _money(f["cost"], rep.currency), _n(f["kg_co2e"]),
            str(f["gap_days"]),
        ])  # fmt: skip
    story.append(_table(per_fuel, [3.4 * cm] + [1.95 * cm] * 7))
    if not rep.fuels:
        story.append(Paragraph("This building has no meters yet.", styles["Normal"]))
    for f in rep.fuels:
        story.append(Spacer(1, 0.4 * cm))
        story.append(KeepTogether([_bars(f), _cusum(f)]))
    for f in rep.fuels:
        days = [["Day", f"Actual ({f['unit']})", "Status", "Expected", "CUSUM", "Cost",
                 "kg CO2e", "HDD"]]  # fmt: skip
        for r in f["rows"]:
            days.append([r["start"], _n(r["actual"]), r["status"], _n(r["expected"]),
                         _n(r["cusum"]), _money(r["cost"], rep.currency), _n(r["kg_co2e"]),
                         _n(r["hdd"])])  # fmt: skip
        story.append(Spacer(1, 0.4 * cm))
        story.append(Paragraph(_text(f"{f['fuel'].capitalize()} by day"), styles["Heading3"]))
        story.append(_table(days, [2.4 * cm, 2.4 * cm, 2 * cm] + [2.04 * cm] * 5))
    story.append(Spacer(1, 0.4 * cm))
    story.append(
        Paragraph(
            "Expected use: the site energy model where it covers a day, else the baseline "
            "performance line at that day's heating degree days. CUSUM: running sum of actual "
            "minus expected; a falling line is saving. Grid electricity uses each day's "
            "carbon factor. Methods: docs/ENERGY.md.",
            styles["Italic"],
        )
    )
    doc.build(story)
    return buf.getvalue()
