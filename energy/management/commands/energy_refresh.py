"""manage.py energy_refresh [--site slug] [--days N | --start D --end D]: recompute MeterDay."""

from __future__ import annotations

from datetime import date, timedelta

from django.core.management.base import BaseCommand, CommandError

from energy import refresh
from energy.models import Meter


class Command(BaseCommand):
    help = "Recompute each meter's daily use from its feed (docs/ENERGY.md)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--site", help="site slug (default: all)")
        parser.add_argument("--days", type=int, default=3, help="the last N days (default 3)")
        parser.add_argument("--start", type=date.fromisoformat)
        parser.add_argument("--end", type=date.fromisoformat)

    def handle(self, *args, site=None, days=3, start=None, end=None, **options) -> None:
        meters = Meter.objects.select_related("node__site", "feed")
        if site:
            meters = meters.filter(node__site__slug=site)
        last = end or date.today()
        first = start or last - timedelta(days=max(1, days) - 1)
        if last < first:
            raise CommandError("--end is before --start")
        try:
            written = refresh.refresh(meters, first, last)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"wrote {written} meter-days {first}..{last}")
