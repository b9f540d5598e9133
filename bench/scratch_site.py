"""A scratch site for the in-process benchmarks: its own data dir, database and Redis db.

bench/control.py, energy.py, energy_model_upload.py and feeds.py each set Django up on a data
dir of their own (SQLite in it unless a database URL is given), migrate it and go; this is that
start, once.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def start(
    prefix: str,
    redis_url: str,
    *,
    database_url: str | None = None,
    parent: Path | None = None,
    **env: str,
) -> Path:
    """Make the scratch dir, point the settings at it, set Django up and migrate; the dir."""
    base = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    os.environ.update(
        BMS_DATA_DIR=str(base),
        DATABASE_URL=database_url or f"sqlite:///{base / 'bench.sqlite3'}",
        REDIS_URL=redis_url,
        DJANGO_SETTINGS_MODULE="bms.settings",
        ALLOWED_HOSTS="testserver,localhost",
        DEBUG="false",
        **env,
    )
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    return base
