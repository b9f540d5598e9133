"""manage.py simulate_fault_week: a simulated week with faults injected at known times, on a
site of its own ("Fault week"), and the findings rules run over it, so the findings page has
the week's faults ranked by cost (docs/FINDINGS.md "Try it on the demo").

The live simulator (simulate_site) runs on wall-clock time: a week of it takes a week. This steps
the demo's rooms and boiler on a simulated clock instead (demo/fdd.py, the code bench/fdd.py
scores), writing what a live site would: each room's temperature through the feed store and
each relay change as an audit row.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from demo import fdd
from demo.faults import FaultError, FaultPlan, parse
from findings.models import Finding
from findings.rules import RULES
from sensors.models import Site

MAX_FAULTS = 20  # by hand on a command line: more is a typo


def default_start(now: datetime) -> datetime:
    """Midnight (UTC) seven days before today's: the last whole week before now, so the hourly
    findings task's own look back over the last week keeps seeing it."""
    today = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return today - fdd.WEEK


class Command(BaseCommand):
    help = (
        "Simulate a week of the demo's four rooms and boiler on a site of its own ('Fault week') "
        "with faults injected at known times, then run the findings rules over it: the findings "
        "page (/staff/findings/) shows the week's faults, most costly first."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--start",
            help="The week's first day, YYYY-MM-DD (UTC midnight; default: 7 days before today)",
        )
        parser.add_argument(
            "--fault",
            action="append",
            default=[],
            metavar="KIND:TARGET@START[/END]",
            help="A fault instead of the default three (repeat for more; docs/DEMO.md, Faults), "
            "e.g. window_open:workshop@2030-01-08T09:00+00:00",
        )
        parser.add_argument("--seed", type=int, default=1, help="Random seed (default 1)")

    def handle(self, *args, **opts) -> None:
        start = self._start(opts["start"])
        if len(opts["fault"]) > MAX_FAULTS:
            raise CommandError(f"--fault: at most {MAX_FAULTS}")
        try:
            faults = [parse(text) for text in opts["fault"]] or fdd.week_faults(start)
        except FaultError as exc:
            raise CommandError(f"--fault: {exc}") from exc
        for fault in faults:
            if not start <= fault.start < start + fdd.WEEK:
                raise CommandError(
                    f"--fault: {fault.kind} starts outside the week from {start:%Y-%m-%d}"
                )
        if Site.objects.filter(slug=fdd.WEEK_SITE_SLUG).exists():
            raise CommandError(
                f"The site '{fdd.WEEK_SITE_NAME}' is there already: its findings are on the "
                "findings page. Run it again on a fresh database (docs/FINDINGS.md)."
            )
        with transaction.atomic():
            rig, summary = fdd.fault_week(start, FaultPlan.of(faults), seed=opts["seed"])
        self.stdout.write(
            f"Simulated {start:%a %d %b %Y} to {start + fdd.WEEK - timedelta(minutes=1):%a %d %b %Y %H:%M} UTC "
            f"on the site '{rig.site.name}', with:"
        )
        for f in faults:
            self.stdout.write(f"  {f.kind} in {f.target} from {f.start:%a %H:%M}")
        self.stdout.write(f"Findings: {summary.opened} opened, most costly first:")
        for finding in Finding.objects.filter(key__in=summary.keys, closed_at__isnull=True):
            title = RULES[finding.rule].title if finding.rule in RULES else finding.rule
            cost = (
                f"{finding.waste_money_week:.2f} {finding.currency} a week"
                if finding.waste_money_week is not None
                else "no cost estimated"
            )
            self.stdout.write(f"  {title}: {finding.subject}: {cost}")
        self.stdout.write("Open: /staff/findings/")

    def _start(self, text: str | None) -> datetime:
        if text is None:
            return default_start(datetime.now(UTC))
        try:
            day = datetime.strptime(text, "%Y-%m-%d").replace(tzinfo=UTC)
        except ValueError as exc:
            raise CommandError("--start: a day as YYYY-MM-DD") from exc
        if day + fdd.WEEK > datetime.now(UTC):
            raise CommandError(
                "--start: a week that has ended (readings from the future are refused)"
            )
        return day
