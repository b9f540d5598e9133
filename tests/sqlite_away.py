"""Take a SQLite test database away and bring it back: the database outage of the control
tests (tests/control/test_database_outage.py, tests/reliability/test_control_database_outage.py)
and of the status API (tests/control/test_status_api_outage.py)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from django.db import connection


@contextlib.contextmanager
def sqlite_file_away() -> Iterator[None]:
    """Move the database file aside and put a directory in its place, so every process that
    opens it fails as against a database that is down; restored afterwards."""
    db_file = Path(connection.settings_dict["NAME"])
    away = db_file.with_name(db_file.name + ".away")
    connection.close()
    os.rename(db_file, away)
    db_file.mkdir()
    try:
        yield
    finally:
        connection.close()
        db_file.rmdir()
        os.rename(away, db_file)


@contextlib.contextmanager
def database_away() -> Iterator[None]:
    """The database down for this process: on SQLite its file away (above); on PostgreSQL every
    query refused with the OperationalError a lost server gives."""
    from django.db import OperationalError

    if connection.vendor == "sqlite":
        with sqlite_file_away():
            yield
        return

    def refuse(*_args):
        raise OperationalError("server closed the connection unexpectedly (test outage)")

    with connection.execute_wrapper(refuse):
        yield
