"""manage.py energy_import_model <site slug> <file.csv>: the site energy model (model_csv.py)."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from energy import model_csv
from sensors.models import Site


class Command(BaseCommand):
    help = "Import expected use per building, fuel and period from CSV (docs/ENERGY.md)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("site", help="site slug")
        parser.add_argument("csv", type=Path)

    def handle(self, *args, site: str, csv: Path, **options) -> None:
        target = Site.objects.filter(slug=site).first()
        if target is None:
            raise CommandError(f"no site with slug {site!r}")
        if not csv.is_file():
            raise CommandError(f"{csv}: no such file")
        if csv.stat().st_size > model_csv.MAX_BYTES:
            raise CommandError(f"{csv}: larger than {model_csv.MAX_BYTES} bytes")
        try:
            stored = model_csv.store(model_csv.parse(csv.read_bytes(), target))
        except model_csv.BadModelCsv as exc:
            raise CommandError(f"{csv}: {exc}") from None
        self.stdout.write(f"stored {stored} model periods for {target}")
