"""Warnings about a saved feed that come from apps above feeds (feeds may not import them): an
app registers a check, feed -> sentences, in its AppConfig.ready(); the feed admin shows them as
warning messages and the API as `warnings` on the feed. Used by displays: a feed made private
while a public display shows it (that display then says "Feed not public" to everyone)."""

from __future__ import annotations

from collections.abc import Callable

from feeds.models import Feed

Check = Callable[[Feed], list[str]]
_checks: list[Check] = []


def register(check: Check) -> None:
    if check not in _checks:
        _checks.append(check)


def feed_warnings(feed: Feed) -> list[str]:
    return [sentence for check in _checks for sentence in check(feed)]
