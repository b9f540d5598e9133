"""What the site's own BACnet device shows the plant LAN (docs/BACNET.md section 7), on the staff
BACnet page: each zone with its two write switches (Zone.bacnet_setpoint_writable /
bacnet_occupancy_writable) and the feeds shown (Feed.bacnet_export), with a search to add one.

Every staff role sees the state; engineers switch it. A switch goes through the API's own
serializer (so the same bounds refuse the same things: the 201st feed, naming
`bacnet_export`) and into the change history as the API and the admin record it
(control/change_audit.py), with this page named as where it was changed. The running
`manage.py bacnet_server` decides each write by the zone's switches as it arrives, and shows
a feed from its next refresh.

A site may have thousands of feeds: the page lists only those shown (at most MAX_BACNET_FEEDS)
and at most FEED_MATCHES of a search by name, tag or id; the zones are bounded as the server
serves them (MAX_ZONES)."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.base_user import AbstractBaseUser
from django.db import transaction
from django.db.models import Q

from control.bacnet_server import FEED_INSTANCE_BASE, MAX_ZONES
from control.change_audit import (
    feed_bacnet,
    record_feed_bacnet,
    record_zone_bacnet,
    zone_bacnet,
)
from control.models import ProgrammeChange, Zone
from control.serializers import ZoneSerializer
from feeds.models import MAX_BACNET_FEEDS, Feed, choosing
from feeds.web.serializers import FeedSerializer

# The change history's "why" for a switch made here, beside the API's and the admin's.
STAFF_REASON = "changed on the staff BACnet page"
FEED_MATCHES = 20  # a search's feeds listed: narrow it to find one among thousands
MAX_SEARCH = 100  # characters: a feed's name is at most 100
RECENT = 10  # changes listed under the section
# The switches a POST may name, by the words the page uses.
ZONE_SWITCHES = {"setpoint": "bacnet_setpoint_writable", "occupancy": "bacnet_occupancy_writable"}
ON_OFF = {"on": True, "off": False}


@dataclass(frozen=True)
class FeedSearch:
    """A search's matches (at most FEED_MATCHES, the chosen ones left out), whether more
    matched, and its refusal in words naming the field."""

    text: str
    matches: list[Feed]
    more: bool
    error: str = ""


def search_feeds(text: str) -> FeedSearch:
    """Feeds not yet shown whose name or tag holds `text`, or whose id it is ("tag:name" as the
    feed is listed works too)."""
    text = text.strip()
    if not text:
        return FeedSearch("", [], False)
    if len(text) > MAX_SEARCH:
        return FeedSearch(text[:MAX_SEARCH], [], False, f"feed: at most {MAX_SEARCH} characters")
    match = Q(name__icontains=text) | Q(tag__icontains=text)
    tag, colon, name = text.partition(":")
    if colon:
        match |= Q(tag__iexact=tag.strip(), name__icontains=name.strip())
    if text.isascii() and text.isdigit() and len(text) <= 10:  # "²" is a digit int() refuses
        match |= Q(pk=int(text))
    found = list(
        Feed.objects.filter(match, bacnet_export=False).order_by("tag", "name", "pk")[
            : FEED_MATCHES + 1
        ]
    )
    return FeedSearch(text, found[:FEED_MATCHES], len(found) > FEED_MATCHES)


def context(search: str = "") -> dict:
    """The page's section: the zones with their switches, the feeds shown, a search's matches
    and the recent changes of these switches."""
    zones = Zone.objects.order_by("name")
    shown = Feed.objects.filter(bacnet_export=True).order_by("tag", "name", "pk")
    # The switches' entries: every label of theirs says BACnet (control/change_audit.py).
    audited = (Q(subject__startswith="zone '") | Q(subject__startswith="feed '")) & Q(
        change__contains="BACnet"
    )
    return {
        "zones": [
            {
                "zone": zone,
                "switches": [
                    ("setpoint", zone.bacnet_setpoint_writable),
                    ("occupancy", zone.bacnet_occupancy_writable),
                ],
            }
            for zone in zones[:MAX_ZONES]
        ],
        "zones_total": zones.count(),
        "max_zones": MAX_ZONES,
        "shown_feeds": [
            {"feed": feed, "instance": FEED_INSTANCE_BASE + feed.pk}
            for feed in shown[:MAX_BACNET_FEEDS]
        ],
        "shown_total": shown.count(),
        "max_feeds": MAX_BACNET_FEEDS,
        "feed_search": search_feeds(search),
        "feed_search_max": MAX_SEARCH,
        "bacnet_changes": ProgrammeChange.objects.filter(audited)[:RECENT],
    }


def on_off(value: str, field: str) -> bool:
    """'on' or 'off' as sent by the page's buttons; anything else refused naming the field."""
    try:
        return ON_OFF[value]
    except KeyError:
        raise ValueError(f"{field}: '{value[:20]}' is neither 'on' nor 'off'") from None


def _refusal(errors: dict) -> str:
    field, words = next(iter(errors.items()))
    return f"{field}: {' '.join(map(str, words))}"


def switch_zone(by: AbstractBaseUser, zone: Zone, setting: str, to: str) -> list[str]:
    """Switch one of the zone's BACnet writes on or off, audited; returns what changed in
    words (nothing when it already was). A bad setting or value is a ValueError naming it."""
    field = ZONE_SWITCHES.get(setting)
    if field is None:
        raise ValueError(f"setting: '{setting[:20]}' is neither 'setpoint' nor 'occupancy'")
    value = on_off(to, "to")
    serializer = ZoneSerializer(zone, data={field: value}, partial=True)
    if not serializer.is_valid():
        raise ValueError(_refusal(serializer.errors))
    before = zone_bacnet(zone)
    with transaction.atomic():
        serializer.save()
        change = record_zone_bacnet(by, zone, before, STAFF_REASON)
    return [change.change] if change else []


def switch_feed(by: AbstractBaseUser, feed: Feed, to: str) -> list[str]:
    """Show a feed on BACnet or take it off, audited, checked as the API checks it (at most
    MAX_BACNET_FEEDS: the next refused naming bacnet_export)."""
    value = on_off(to, "to")
    with choosing():  # counted and saved one change at a time, on the feed as stored now
        feed.refresh_from_db()
        serializer = FeedSerializer(feed, data={"bacnet_export": value}, partial=True)
        if not serializer.is_valid():
            raise ValueError(_refusal(serializer.errors))
        before = feed_bacnet(feed)
        serializer.save()
        change = record_feed_bacnet(by, feed, before, STAFF_REASON)
    return [change.change] if change else []
