"""manage.py shift_daily_slots: a daily feed written at local noon (before the daily
processes followed emoncms) moved to emoncms's day slot."""

from __future__ import annotations

from datetime import UTC, datetime
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from feeds.models import Feed
from feeds.store import phpfina

pytestmark = pytest.mark.django_db


def utc(y, m, d):
    return int(datetime(y, m, d, tzinfo=UTC).timestamp())


def test_summer_days_move_back_one_slot_winter_days_stay(feed_dir, redis_client, settings):
    settings.TIME_ZONE = "Europe/London"
    feed = Feed.objects.create(name="kwhd", tag="t", interval=86400)
    # Written at local noon: 4, 5 and 6 July in the slots of 4, 5, 6 July; 5 January in its own.
    old = {utc(2024, 1, 5): 9.0, utc(2024, 7, 4): 4.0, utc(2024, 7, 5): 5.0, utc(2024, 7, 6): 6.0}
    for t, v in old.items():
        phpfina.write(feed_dir, feed.pk, 86400, t, v)
    out = StringIO()
    call_command("shift_daily_slots", str(feed.pk), stdout=out)
    assert "3 slots move" in out.getvalue()
    meta, data = phpfina.open_feed(feed_dir, feed.pk)
    got = {meta.start_time + i * 86400: float(v) for i, v in enumerate(data) if v == v}
    # Local midnight of 5 July (BST) is 23:00 UTC on 4 July: emoncms's slot of 4 July.
    assert got == {utc(2024, 1, 5): 9.0, utc(2024, 7, 3): 4.0, utc(2024, 7, 4): 5.0,
                   utc(2024, 7, 5): 6.0}  # fmt: skip
    with pytest.raises(CommandError, match="already moved"):
        call_command("shift_daily_slots", str(feed.pk), stdout=out)


def test_only_daily_feeds(feed_dir, redis_client):
    feed = Feed.objects.create(name="p", tag="t", interval=10)
    with pytest.raises(CommandError, match="not a daily"):
        call_command("shift_daily_slots", str(feed.pk))
