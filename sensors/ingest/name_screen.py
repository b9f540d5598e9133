"""A gateway flood of new node names, refused before its rows are read (issue #25 item 1).

A bulk request naming more than BMS_INGEST_MAX_NEW_NODES_PER_REQUEST new nodes registers none
of them (sensors/ingest/registration.py). Deciding that still cost ~50 ms of a web thread for
2,500 made-up names, all of it spent on rows that were then skipped: parsing every row's values
(40%), one database lookup of the 2,500 names (30%) and a Redis entry per refused name (20%),
and 12 clients flooding at once held gunicorn's threads so a kiosk waited 0.4-0.8 s (p95).

So a gateway's bulk rows are screened first, on the decoded JSON: the names of the gateway's
site (every node's name and radio id) are one set per site, cached per process (one query,
dropped with the other config caches when any node is saved: sensors/cache.py), and a name
not in it is new. When a request names more new nodes than the bound, their rows are left out
unparsed, with no lookup and nothing per name in Redis: one line on the gateway's input errors
counts them. A request within the bound goes on to registration as before, so what is
registered, and for which rows, does not change.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings

from sensors.cache import ProcessCache
from sensors.ingest.emoncms_input import Skipped
from sensors.models import Node

_site_names = ProcessCache()  # site id -> frozenset of names and "#<radio id>"
SHOWN_NAMES = 3


def site_names(site_id: int) -> frozenset[str]:
    """Every node name of the site and each radio id as "#<id>" (one query, then cached)."""
    names = _site_names.get(site_id)
    if names is None:
        rows = Node.objects.filter(site_id=site_id).values_list("name", "node_id")
        names = frozenset(
            [name for name, _ in rows] + [f"#{radio}" for _, radio in rows if radio is not None]
        )
        _site_names.set(site_id, names)
    return names


def _name_of(raw: Any) -> str | None:
    """The set member a row's node field would match, or None when the field is not a plain
    name or number (the parser then reads the row and says what is wrong with it)."""
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return f"#{raw}"
    if isinstance(raw, str):
        return raw
    return None


def _known(member: str, names: frozenset[str]) -> bool:
    if member in names:
        return True
    # A radio id may be sent as a number or as its digits, and a node may be named "10".
    if member.startswith("#"):
        return member[1:] in names
    return member.isdigit() and f"#{int(member)}" in names


@dataclass
class Screen:
    """The new names of a flood, and the rows of them left out."""

    new: frozenset[str]
    first_row: int
    rows: int = 0

    def left_out(self, raw: Any) -> bool:
        member = _name_of(raw)
        if member is None or member not in self.new:
            return False
        self.rows += 1
        return True

    def skipped(self) -> Skipped:
        shown = ", ".join(repr(m.lstrip("#")[:64]) for m in sorted(self.new)[:SHOWN_NAMES])
        return Skipped(
            self.first_row,
            "data[1]",
            f"{self.rows} row(s) name {len(self.new)} new nodes ({shown}, ...): more than "
            f"{settings.BMS_INGEST_MAX_NEW_NODES_PER_REQUEST} new nodes in one request registers "
            "none of them (BMS_INGEST_MAX_NEW_NODES_PER_REQUEST)",
        )


def screen(site_id: int, doc: list) -> Screen | None:
    """A Screen when the rows name more new nodes than the per-request bound, else None (the
    request is registered as it always was)."""
    names = site_names(site_id)
    new: set[str] = set()
    first = -1
    for index, item in enumerate(doc):
        if not isinstance(item, list) or len(item) < 2:
            continue
        member = _name_of(item[1])
        if member is not None and member not in new and not _known(member, names):
            new.add(member)
            first = index if first < 0 else first
    if len(new) <= settings.BMS_INGEST_MAX_NEW_NODES_PER_REQUEST:
        return None
    return Screen(frozenset(new), first)
