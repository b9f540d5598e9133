"""At most MAX_BACNET_FEEDS feeds shown on BACnet, even when engineers choose the last ones at
once (feeds.models.choosing): a change's checks wait until the change before it committed.
Eight API PATCHes at once had made 202 (a fresh-eyes tester, #31)."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, connections
from rest_framework.test import APIClient

from feeds.models import MAX_BACNET_FEEDS, Feed, choosing
from tests.findings.test_concurrent_runs import _blocked_backends
from tests.wait import wait_for

WAIT_S = 30  # an upper bound on a busy 2-core machine, not a speed assertion


class _Choice(threading.Thread):
    """PATCH a feed onto BACnet through the API, on a connection of its own."""

    def __init__(self, user, feed: Feed) -> None:
        super().__init__(daemon=True)
        self.user, self.feed = user, feed
        self.status: int | None = None
        self.body: dict = {}

    def run(self) -> None:
        try:
            client = APIClient()
            client.force_authenticate(self.user)
            answer = client.patch(
                f"/api/v1/feeds/{self.feed.pk}", {"bacnet_export": True}, format="json"
            )
            self.status, self.body = answer.status_code, answer.json()
        finally:
            connections.close_all()


def test_the_last_feed_chosen_twice_at_once_is_shown_once_the_second_refused(
    engineer, transactional_db
):
    if connection.vendor == "sqlite":
        pytest.skip(
            "SQLite's transactions here begin IMMEDIATE: a second writer cannot begin while "
            "the first's is open, so there is no moment to race in"
        )
    Feed.objects.bulk_create(
        Feed(name=f"Feed {n}", bacnet_export=True) for n in range(MAX_BACNET_FEEDS - 1)
    )
    last, late = Feed.objects.create(name="Last"), Feed.objects.create(name="Late")
    release, chosen = threading.Event(), threading.Event()
    error: list[BaseException] = []

    def first() -> None:
        # The 200th, chosen and saved, its transaction still open.
        try:
            with choosing():
                last.bacnet_export = True
                last.full_clean()
                last.save()
                chosen.set()
                assert release.wait(WAIT_S), "never released"
        except BaseException as exc:  # reported by the test, not lost in the thread
            error.append(exc)
        finally:
            chosen.set()
            connections.close_all()

    holder = threading.Thread(target=first, daemon=True)
    holder.start()
    assert chosen.wait(WAIT_S) and not error, error
    second = _Choice(engineer, late)
    second.start()
    # Its checks wait for the first's commit; before the lock it counted 199 and saved a 201st.
    waiting = _blocked_backends()
    wait_for(lambda: waiting() > 0, WAIT_S, "the second choice to wait on the first")
    release.set()
    holder.join(WAIT_S)
    second.join(WAIT_S)
    assert not error, error
    assert second.status == 400 and "bacnet_export" in second.body["fields"]
    assert Feed.objects.filter(bacnet_export=True).count() == MAX_BACNET_FEEDS
    assert not Feed.objects.get(pk=late.pk).bacnet_export
