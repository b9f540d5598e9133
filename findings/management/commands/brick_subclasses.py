"""Write findings/brick_subclasses.json: each Brick class the rules name with its subclasses,
from the Brick ontology brickschema ships (run after a rule names a new class)."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand

from findings.site_model import SUBCLASSES_FILE, derive, named_classes


class Command(BaseCommand):
    help = "Derive findings/brick_subclasses.json from the Brick ontology."

    def handle(self, *args, **options) -> None:
        table = derive(named_classes())
        SUBCLASSES_FILE.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
        self.stdout.write(f"{len(table)} classes written to {SUBCLASSES_FILE}")
