"""One open finding per key, even when two runs judge the same week at once (#30): the hourly
beat and a `find_waste` or the staff "run now" (findings/evaluate.py `_keep`)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta

import pytest
from django.db import IntegrityError, connection, connections, transaction

from findings.evaluate import Summary, evaluate
from findings.models import Finding
from tests.findings.conftest import MONDAY, WEEK, command
from tests.wait import wait_for

H = timedelta(hours=1)
WAIT_S = 30  # an upper bound on a busy 2-core machine, not a speed assertion


def _finding(key: str, closed: bool = False) -> Finding:
    return Finding(
        rule="r", key=key, subject="s", period_start=MONDAY, period_end=MONDAY + H,
        last_seen=MONDAY + H, detail="d", what_to_check="w",
        closed_at=MONDAY + WEEK if closed else None,
    )  # fmt: skip


def test_a_second_open_finding_of_a_key_is_refused_by_the_database(db):
    _finding("r:zone:1").save()
    with pytest.raises(IntegrityError), transaction.atomic():
        _finding("r:zone:1").save()


def test_a_closed_finding_does_not_stop_its_key_opening_again(db):
    _finding("r:zone:1", closed=True).save()
    _finding("r:zone:1", closed=True).save()
    _finding("r:zone:1").save()
    assert Finding.objects.filter(key="r:zone:1", closed_at__isnull=True).count() == 1


class _Run(threading.Thread):
    """evaluate() on a connection of its own; `hold` keeps its transaction open until set."""

    def __init__(self, hold: threading.Event | None = None) -> None:
        super().__init__(daemon=True)
        self.hold, self.evaluated = hold, threading.Event()
        self.summary: Summary | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with transaction.atomic():
                self.summary = evaluate(MONDAY, MONDAY + WEEK)
                self.evaluated.set()
                if self.hold is not None:
                    assert self.hold.wait(WAIT_S), "never released"
        except BaseException as exc:  # reported by the test, not lost in the thread
            self.error = exc
        finally:
            self.evaluated.set()
            connections.close_all()


def _blocked_backends() -> Callable[[], int]:
    def count() -> int:
        with connections["default"].cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
            return cursor.fetchone()[0]

    return count


def test_two_runs_at_once_keep_one_open_finding_and_the_loser_updates_it(
    site_model, transactional_db
):
    if connection.vendor == "sqlite":
        pytest.skip(
            "SQLite lets one writer at a time hold the whole database, so the second run "
            "cannot insert while the first's row is uncommitted: the race needs PostgreSQL"
        )
    valve = site_model["valve"]
    command(valve, MONDAY + 8 * H, True)
    command(valve, MONDAY + 21 * H, False)  # on four hours past the schedule: one finding
    release = threading.Event()
    first = _Run(hold=release)
    first.start()
    assert first.evaluated.wait(WAIT_S) and first.error is None, first.error
    # The first run's finding is inserted, not committed: the second finds no open finding,
    # inserts its own and waits on the open-key index for the first to finish.
    second = _Run()
    second.start()
    wait_for(_blocked_backends(), WAIT_S, "the second run to wait on the first's insert")
    release.set()
    first.join(WAIT_S)
    second.join(WAIT_S)
    assert first.error is None and second.error is None, second.error
    assert first.summary is not None and first.summary.opened == 1
    assert second.summary is not None
    assert (second.summary.opened, second.summary.updated) == (0, 1)
    assert Finding.objects.filter(closed_at__isnull=True).count() == 1
