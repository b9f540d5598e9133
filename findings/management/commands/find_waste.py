"""manage.py find_waste --from 2030-01-01 --to 2030-02-01: run the rules over history."""

from __future__ import annotations

from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from findings.evaluate import RangeError, evaluate_range

MAX_DAYS = 3660  # ten years of weeks: a typo in a year is refused, not run for hours


def _day(text: str, flag: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError as e:
        raise CommandError(f"{flag}: a date as YYYY-MM-DD, not {text!r}") from e


class Command(BaseCommand):
    help = "Run the find-the-waste rules over a range of history (local days, 'to' exclusive)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--from", dest="start", required=True, help="first day, YYYY-MM-DD")
        parser.add_argument("--to", dest="end", required=True, help="day after the last")

    def handle(self, *args, start: str, end: str, **options) -> None:
        first, last = _day(start, "--from"), _day(end, "--to")
        if last - first > timedelta(days=MAX_DAYS):
            raise CommandError(f"at most {MAX_DAYS} days at a time")
        tz = ZoneInfo(settings.TIME_ZONE)
        t0 = datetime.combine(first, time(), tz)
        t1 = datetime.combine(last, time(), tz)
        try:
            summaries = evaluate_range(t0, t1)
        except RangeError as e:
            raise CommandError(str(e)) from e
        opened = sum(s.opened for s in summaries)
        updated = sum(s.updated for s in summaries)
        closed = sum(s.closed for s in summaries)
        self.stdout.write(
            f"{len(summaries)} weeks evaluated: {opened} findings opened, "
            f"{updated} updated, {closed} closed"
        )
