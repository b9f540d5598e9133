"""The weekly digest e-mail: each site's open findings, most costly first, with links
(docs/FINDINGS.md, "Where to see them").

Sent to the site's energy report recipients (energy.ReportRecipient: the people staff already
name, in the admin or the API, to receive the site's energy figures), each address once,
whether named for the whole site or one of its buildings. A site with no open finding gets
no message: an empty digest teaches people to ignore the next one. Findings marked a false
alarm are left out; acknowledged ones stay (acknowledged is not fixed).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from django.conf import settings
from django.core.mail import EmailMessage

from core.dates import day_text, when_text
from core.words import one_line
from energy.models import ReportRecipient
from findings.models import Finding
from findings.rules import RULES
from sensors.models import Site

log = logging.getLogger(__name__)

LISTED = 20  # findings named in one message; the rest are counted, with the page's link
FINDINGS_PATH = "/staff/findings/"
SYMBOLS = {"GBP": "£", "EUR": "€", "USD": "$"}


@dataclass(frozen=True)
class Sent:
    site: str
    recipients: list[str]
    findings: int


def recipients(site: Site) -> list[str]:
    """The site's report recipients, each address once (site-wide and per building)."""
    emails = ReportRecipient.objects.filter(site=site).values_list("email", flat=True)
    return sorted({e.lower() for e in emails})


def open_findings(site: Site):
    """Open findings of the site, most costly first (the model's order)."""
    return Finding.objects.filter(site=site, closed_at__isnull=True).exclude(
        state=Finding.State.FALSE_ALARM
    )


def _money(f: Finding) -> str:
    if f.waste_money_week is None:
        return ""
    symbol = SYMBOLS.get(f.currency)
    return (
        f"{symbol}{f.waste_money_week:.2f}" if symbol else f"{f.waste_money_week:.2f} {f.currency}"
    )


def _cost(f: Finding) -> str:
    if f.waste_kwh_week is None:
        return "no cost estimate"
    parts = [_money(f), f"{f.waste_kwh_week:.1f} kWh", f"{f.waste_kg_co2_week or 0:.1f} kg CO2e"]
    return " · ".join(p for p in parts if p) + " a week"


def message(site: Site, findings: list[Finding], total: int, to: list[str], now: datetime):
    tz = ZoneInfo(settings.TIME_ZONE)
    base = settings.BMS_SITE_URL.rstrip("/")
    money = {}
    for f in findings:
        if f.waste_money_week is not None:
            money[f.currency] = money.get(f.currency, 0.0) + f.waste_money_week
    worth = ", ".join(
        f"{SYMBOLS[c]}{v:.2f}" if c in SYMBOLS else f"{v:.2f} {c}" for c, v in money.items()
    )
    lines = [
        f"Open findings at {one_line(site.name)}, week to {day_text(now.astimezone(tz))}, most costly "
        "first. Estimates to rank the faults, with the method on each finding's page.",
        "",
    ]
    for n, f in enumerate(findings, 1):
        title = RULES[f.rule].title if f.rule in RULES else f.rule
        # Each finding's lines start with its number or an indent: a name or text with a
        # line break (a finding stored before names were made one line) must not start one.
        lines += [
            f"{n}. {one_line(title)}: {one_line(f.subject)}",
            f"   {_cost(f)}; {f.get_state_display()}",
            f"   {one_line(f.detail)}",
            f"   {when_text(f.period_start, tz)} to {when_text(f.period_end, tz)}",
            f"   What to check: {one_line(f.what_to_check)}",
            f"   {base}{FINDINGS_PATH}#finding-{f.pk}",
            "",
        ]
    if total > len(findings):
        lines.append(f"... and {total - len(findings)} more: {base}{FINDINGS_PATH}")
    subject = f"[BMS] {one_line(site.name)}: {total} open finding{'s' if total != 1 else ''}"
    if worth:
        subject += f", {worth} a week"
    return EmailMessage(
        subject=" ".join(subject.split()),  # one line: a name with a break is refused
        body="\n".join(lines),
        from_email=settings.DEFAULT_FROM_EMAIL,
        to=to,
    )


def send_weekly(now: datetime) -> list[Sent]:
    """One message per site with recipients and open findings. A site whose message the mail
    server refuses is logged and the others still go."""
    sent = []
    for site in Site.objects.order_by("pk"):
        to = recipients(site)
        if not to:
            continue
        found = open_findings(site)
        listed = list(found[:LISTED])
        if not listed:
            continue
        total = found.count()
        try:
            message(site, listed, total, to, now).send(fail_silently=False)
        except OSError as exc:  # SMTP refused or unreachable: say which site
            log.error("findings digest of %s not sent: %s", site, exc)
            continue
        sent.append(Sent(site.name, to, total))
    return sent
