"""E-mail the monthly report (PDF and CSV attached) of each building to its recipients:
those of the building and those of its whole site (ReportRecipient). docs/ENERGY.md.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.conf import settings
from django.core.mail import EmailMessage

from energy import monthly, report
from energy.models import MeterNode, ReportRecipient

log = logging.getLogger(__name__)


@dataclass
class Sent:
    building: str
    recipients: list[str]


def recipients_by_building(site) -> dict[int, list[str]]:
    """Building id -> addresses (its own and the site-wide ones), each once, sorted."""
    site_wide: set[str] = set()
    own: dict[int, set[str]] = {}
    for node_id, email in ReportRecipient.objects.filter(site=site).values_list("node", "email"):
        if node_id is None:
            site_wide.add(email.lower())
        else:
            own.setdefault(node_id, set()).add(email.lower())
    buildings = MeterNode.objects.filter(site=site, kind=MeterNode.Kind.BUILDING)
    out = {}
    for b in buildings:
        emails = site_wide | own.get(b.pk, set())
        if emails:
            out[b.pk] = sorted(emails)
    return out


def message(rep: monthly.MonthlyReport, to: list[str]) -> EmailMessage:
    totals = rep.totals()
    lines = [
        f"The energy report of {rep.node.name} ({rep.node.site.name}) for "
        f"{rep.first:%B %Y} is attached as PDF and CSV.",
        "",
    ]
    for f in rep.fuels:
        # the difference in words, never a signed "saved -288.1" (energy/wording.py)
        lines.append(
            f"{f['fuel']}: {_said(f['total'], f['unit'])} used, expected "
            f"{_said(f['expected_total'], f['unit'])}: "
            f"{f.get('against_expected') or 'nothing to compare with'}"
        )
    kg = totals["saved_kg_co2e"]
    lines += [
        "",
        f"Emissions {totals['kg_co2e']} kg CO2e; "
        + (f"{abs(kg)} kg CO2e {'less' if kg > 0 else 'more'} than expected." if kg else
           "as expected."),
    ]  # fmt: skip
    mail = EmailMessage(
        # a name with a line break would be a header injection (Django refuses it, and the
        # whole month's run stopped): one line
        subject=" ".join(f"[BMS] {rep.title}".split()),
        body="\n".join(lines),
        from_email=settings.DEFAULT_FROM_EMAIL,
        to=to,
    )
    # Imported here: reportlab and PIL are 8 MB in every Celery process (beat and the control
    # worker too, which load this module with the tasks), for one task run once a month.
    from energy import report_pdf

    mail.attach(rep.filename("pdf"), report_pdf.render(rep), "application/pdf")
    mail.attach(rep.filename("csv"), monthly.to_csv(rep), "text/csv")
    return mail


def send_month(site, year: int, month: int, only: set[int] | None = None) -> list[Sent]:
    """One e-mail per building that has recipients. A failure to send one building's report
    is logged and the others still go (the next run does not resend: reports are monthly)."""
    tree = report.Tree.load(site)
    sent = []
    for node_id, to in recipients_by_building(site).items():
        if only is not None and node_id not in only:
            continue
        rep = monthly.build(tree.nodes[node_id], year, month, tree)
        try:
            message(rep, to).send(fail_silently=False)
        except OSError as exc:  # SMTP refused or unreachable: say which building
            log.error("energy report %s %d-%02d not sent: %s", rep.node, year, month, exc)
            continue
        sent.append(Sent(rep.node.name, to))
    return sent


def _said(value: float | None, unit: str) -> str:
    # a gap is "no data", never "None kWh" or 0
    return "no data" if value is None else f"{value} {unit}"
