"""manage.py energy_report --site SLUG [--month YYYY-MM] [--building NAME] [--out DIR] [--send]

Writes the monthly report (PDF and CSV) of each building of a site to --out, and/or e-mails
it to the recipients (--send), as the beat task does on the 1st. Default: last month.
"""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from energy import monthly, refresh, report, report_mail, report_pdf
from sensors.models import Site


class Command(BaseCommand):
    help = "Write and/or e-mail the monthly energy report of a site's buildings (docs/ENERGY.md)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--site", required=True, help="site slug")
        parser.add_argument("--month", help="YYYY-MM (default: last month in the site's zone)")
        parser.add_argument("--building", help="only this building (name)")
        parser.add_argument("--out", type=Path, help="directory to write PDF and CSV files to")
        parser.add_argument("--send", action="store_true", help="e-mail to the recipients")

    def handle(self, *args, site, month=None, building=None, out=None, send=False, **options):
        the_site = Site.objects.filter(slug=site).first()
        if the_site is None:
            raise CommandError(f"no site with slug {site!r}")
        if out is None and not send:
            raise CommandError("say what to do: --out DIR and/or --send")
        try:
            year, mon = (
                monthly.parse_month(month)
                if month
                else monthly.previous_month(refresh.local_today(refresh.site_zone(the_site)))
            )
        except monthly.BadMonth as exc:
            raise CommandError(f"--month: {exc}") from None
        tree = report.Tree.load(the_site)
        buildings = [n for n in tree.buildings() if building in (None, n.name)]
        if not buildings:
            raise CommandError(f"no building {building!r} at {site!r}" if building else
                               f"site {site!r} has no buildings")  # fmt: skip
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)
            for node in sorted(buildings, key=lambda n: n.name):
                rep = monthly.build(node, year, mon, tree)
                (out / rep.filename("pdf")).write_bytes(report_pdf.render(rep))
                (out / rep.filename("csv")).write_bytes(monthly.to_csv(rep))
                self.stdout.write(f"wrote {out / rep.filename('pdf')} and .csv")
        if send:
            only = {n.pk for n in buildings}
            for s in report_mail.send_month(the_site, year, mon, only):
                self.stdout.write(f"sent {s.building} to {', '.join(s.recipients)}")
