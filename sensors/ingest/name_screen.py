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
        rows = list(Node.objects.filter(site_id=site_id).values_list("name", "node_id"))
        names = frozenset(
            [name for name, _ in rows] + [f"#{radio}" for _, radio in rows if radio is not None]
        )
        _site_names.set(site_id, names)
    return names


@dataclass
class Screen:
    """A flood's new names, the rows left to read (those of known nodes, or not plain names)
    and how many rows were left out."""

    new: frozenset[str]
    first_row: int
    keep: list[int]
    rows: int

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
    request is registered as it always was). One pass, no call per row: it runs on every
    gateway bulk request, and a flood's 2,500 rows are what it is for."""
    names = site_names(site_id)
    new: set[str] = set()
    keep: list[int] = []
    first = -1
    for index, item in enumerate(doc):
        # A row whose node field is not a plain name or number is left to the parser, which
        # says what is wrong with it (type() is exact: True is not taken for radio id 1).
        if type(item) is not list or len(item) < 2:
            keep.append(index)
            continue
        raw = item[1]
        kind = type(raw)
        if kind is str:
            # A radio id may be sent as its digits, and a node may be named "10".
            if raw in names or (
                raw.isascii() and raw.isdigit() and len(raw) < 10 and f"#{int(raw)}" in names
            ):
                keep.append(index)
                continue
            member = raw
        elif kind is int:
            member = f"#{raw}"
            if member in names or str(raw) in names:
                keep.append(index)
                continue
        else:
            keep.append(index)
            continue
        new.add(member)
        if first < 0:
            first = index
    if len(new) <= settings.BMS_INGEST_MAX_NEW_NODES_PER_REQUEST:
        return None
    return Screen(frozenset(new), first, keep, len(doc) - len(keep))
