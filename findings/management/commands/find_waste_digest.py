"""manage.py find_waste_digest: send the weekly findings digest now (as Monday's beat does)."""

from __future__ import annotations

from django.core.management.base import BaseCommand
from django.utils import timezone

from findings import digest


class Command(BaseCommand):
    help = "E-mail each site's open findings, most costly first, to its report recipients now."

    def handle(self, *args, **options) -> None:
        sent = digest.send_weekly(timezone.now())
        for s in sent:
            self.stdout.write(f"{s.site}: {s.findings} findings to {', '.join(s.recipients)}")
        self.stdout.write(f"{len(sent)} digests sent")
