"""manage.py shift_daily_slots: move a daily feed written at local noon to emoncms's day slot.

Before they followed emoncms, the daily processes (kwh_to_kwhd, max_value, min_value) wrote a day's figure
at local noon, which a 86400 s feed stores in the slot of that UTC date. emoncms (and these
processes now) write at local midnight (getstartday), which east of UTC in summer is the slot
of the previous UTC date. This rewrites such a feed so each day sits where emoncms puts it;
where two days now share a slot (the day after the spring change), the later day wins, as in
emoncms. Run it once per feed (the feed's description records it), with the workers stopped.
"""

from __future__ import annotations

import os
import tempfile
from datetime import UTC, datetime

import numpy as np
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from feeds.models import Feed
from feeds.processes.steps import DayClock
from feeds.store import phpfina, service

DAY_S = 86_400
MARK = "[daily slots: emoncms]"


def shifted(times: np.ndarray, values: np.ndarray, clock: DayClock) -> dict[int, float]:
    """New slot -> value: the slot held the figure of its UTC date (written at local noon);
    it moves to the slot holding that date's local midnight."""
    out: dict[int, float] = {}
    for t, v in zip(times.tolist(), values.tolist(), strict=True):
        day = datetime.fromtimestamp(t, UTC).date().toordinal()
        out[clock.start_of(day) // DAY_S * DAY_S] = v  # in date order: a later day wins
    return out


class Command(BaseCommand):
    help = (
        "Move daily feeds written the old way (a day's figure at local noon) to emoncms's "
        "day slot (local midnight floored to 86400 s). Stop the workers first; once per feed."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("feeds", nargs="+", type=int, help="ids of daily (86400 s) feeds")
        parser.add_argument("--timezone", default=None, help="zone the days were counted in")
        parser.add_argument("--dry-run", action="store_true", help="say what would move")

    def handle(self, *args, **opts) -> None:
        clock = DayClock(opts["timezone"] or settings.TIME_ZONE)
        service.commit_all(sync=True)  # buffered points into the files first
        for feed_id in opts["feeds"]:
            feed = Feed.objects.filter(pk=feed_id).first()
            if feed is None or feed.interval != DAY_S:
                raise CommandError(f"feed {feed_id}: not a daily (86400 s) feed")
            if MARK in feed.description:
                raise CommandError(f"feed {feed_id}: already moved to emoncms's day slots")
            meta, data = phpfina.open_feed(service.feed_dir(feed_id), feed_id)
            finite = np.flatnonzero(np.isfinite(data))
            if meta is None or finite.size == 0:
                self.stdout.write(f"feed {feed_id}: no data")
                continue
            times = meta.start_time + finite * DAY_S
            moved = shifted(times, data[finite].astype(float), clock)
            changed = sum(
                1
                for t in times.tolist()
                if clock.start_of(datetime.fromtimestamp(t, UTC).date().toordinal())
                // DAY_S
                * DAY_S
                != t
            )
            self.stdout.write(f"feed {feed_id}: {len(finite)} days, {changed} slots move")
            if opts["dry_run"]:
                continue
            self._rewrite(feed_id, moved)
            feed.description = (feed.description + "\n" + MARK).strip()
            feed.save(update_fields=["description"])

    def _rewrite(self, feed_id: int, points: dict[int, float]) -> None:
        directory = service.feed_dir(feed_id)
        times = sorted(points)
        # A new pair beside the old one, then renamed over it: a crash leaves one or the other.
        with tempfile.TemporaryDirectory(dir=directory) as tmp:
            phpfina.create(tmp, feed_id, DAY_S)
            phpfina.write_points(
                tmp, feed_id, DAY_S, times, [points[t] for t in times], now=times[-1] + DAY_S
            )
            os.replace(phpfina.dat_path(tmp, feed_id), phpfina.dat_path(directory, feed_id))
            os.replace(phpfina.meta_path(tmp, feed_id), phpfina.meta_path(directory, feed_id))
        buffer = service.get_buffer()
        buffer.redis.hset(buffer.last_key, feed_id, f"{times[-1]} {points[times[-1]]!r}")
