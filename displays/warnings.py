"""Warnings for a display that will not show what its author expects: a public display
whose panels use feeds that are not public shows "Feed not public" to everyone without a login.
Not refused (a display may be made public before its feeds are), but said at once on save: in
the admin as a warning message, in the API as `warnings` on the display and on each panel."""

from __future__ import annotations

from displays.models import Display, Panel
from feeds.models import Feed


def private_feed_warnings(display: Display, panels: list[Panel] | None = None) -> list[str]:
    """One sentence per panel of a public display that uses feeds not marked public."""
    if not display.public:
        return []
    warnings = []
    for panel in panels if panels is not None else display.panels.all():
        private = sorted(f"{f} (id {f.pk})" for f in panel.feeds.all() if not f.public)
        if private:
            warnings.append(
                f"Panel '{panel.label or panel.get_kind_display()}' of public display "
                f"'{display.slug}' uses feeds that are not public: {', '.join(private)}. Without "
                "a login it shows 'Feed not public'. Mark the feeds public (admin → Feeds, or "
                'PATCH /api/v1/feeds/<id> {"public": true}) or make the display private.'
            )
    return warnings


def public_displays_of_private_feed(feed: Feed) -> list[str]:
    """The same warning seen from the feed: made private while public displays show it."""
    if feed.public:
        return []
    slugs = sorted(
        set(
            Panel.objects.filter(feeds=feed, display__public=True).values_list(
                "display__slug", flat=True
            )
        )
    )
    if not slugs:
        return []
    return [
        f"Feed '{feed}' (id {feed.pk}) is not public, but public display(s) "
        f"{', '.join(repr(s) for s in slugs)} show it: without a login they show 'Feed not "
        "public'. Mark the feed public again or make those displays private."
    ]
