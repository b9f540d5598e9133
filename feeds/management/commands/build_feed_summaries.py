"""Bring the summaries of feeds up to date now (docs/FEEDS.md, "Summaries").

    manage.py build_feed_summaries [ID ...] [--wait 60]

Writes keep summaries exact and catch them up 64 superblocks a write; this builds them at once,
e.g. after importing years of history into feeds that get no new data. Each feed is built
holding the commit locks, so no commit writes its .dat meanwhile (a summary stamped after a
write it did not see would be served wrong); commits wait at most one feed's build (about
0.1 s per year of 10 s data).
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser

from feeds.models import Feed
from feeds.store import service, summaries


class Command(BaseCommand):
    help = "Build the summaries beside the feed files (all feeds, or the ids given)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("ids", nargs="*", type=int, help="feed ids (default: every feed)")
        parser.add_argument(
            "--wait", type=float, default=60.0, help="seconds to wait for a running commit"
        )

    def handle(self, *args, ids: list[int], wait: float, **options) -> None:
        feeds = Feed.objects.order_by("pk")
        if ids:
            feeds = feeds.filter(pk__in=ids)
            missing = sorted(set(ids) - set(feeds.values_list("pk", flat=True)))
            if missing:
                raise CommandError(f"no feed with id {', '.join(map(str, missing))}")
        built = 0
        for feed_id in feeds.values_list("pk", flat=True):
            try:
                held = service.acquire_all_commit_locks(service.layout().shards, wait)
            except TimeoutError as exc:
                raise CommandError(f"{exc}: a commit is still running; try again") from exc
            try:
                done = summaries.build(service.feed_dir(feed_id), feed_id)
            finally:
                service.release_commit_locks(held)
            if done:
                built += 1
                self.stdout.write(
                    f"feed {feed_id}: {done * summaries.SUPER_SLOTS:,} slots summarised"
                )
        self.stdout.write(
            f"{built} feed(s) summarised; feeds under {summaries.SUPER_SLOTS} slots need none."
        )
