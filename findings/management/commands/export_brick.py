"""manage.py export_brick [--site S] [-o site.ttl]: the site as a Brick model (docs/BRICK.md)."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from rest_framework.exceptions import ValidationError

from energy.api import SiteIdOrSlugField
from findings import brick


class Command(BaseCommand):
    help = (
        "Write the site's Brick model (Turtle): every site, building, zone, plant, meter, "
        "sensor and actuator with its Brick class. Without --site: every site."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("--site", help="the site's slug or id (default: every site)")
        parser.add_argument("-o", "--output", help="file to write (default: standard output)")

    def handle(self, *args, site: str | None, output: str | None, **options) -> None:
        chosen = None
        if site is not None:
            try:  # the API's lookup: an id first, then a slug, bounded
                chosen = SiteIdOrSlugField().to_internal_value(site)
            except ValidationError as exc:
                raise CommandError(f"--site: {exc.detail[0]}") from None
        ttl = brick.export(chosen)
        if output is None:
            self.stdout.write(ttl)
            return
        try:
            Path(output).write_text(ttl, encoding="utf-8")
        except OSError as exc:  # a missing directory, a directory, no permission
            raise CommandError(f"--output {output}: {exc.strerror}") from None
        self.stderr.write(f"Wrote {output} ({len(ttl.encode())} bytes)")
