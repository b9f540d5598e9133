"""Requests set aside (sensors/ingest/set_aside.py), for staff to look at, retry or discard.

    page(number) -> AsidePage          newest first, PAGE_SIZE a page, across nodes
    retry(node_id, entry) -> Aside     back onto its node's stream, as a new request
    discard(node_id, entry) -> Aside   gone for good

The nodes with requests set aside are in set_aside.INDEX_KEY, so a page reads those nodes'
aside streams only (each at most set_aside.ASIDE_MAXLEN entries). A retry or discard claims the
entry by deleting it (XDEL answers 1 to one caller only), so two clicks never post it twice.
Who did what is the view's to record (the node's admin history).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime

from core.redis import REDIS_FAILURES, get_redis
from sensors.ingest import stream
from sensors.ingest.set_aside import ASIDE_MAXLEN, ASIDE_PREFIX, INDEX_KEY

PAGE_SIZE = 20
MAX_PAGE = 1000  # a bound on what a caller may ask; the pages there are come from the data
ENTRY_ID_CHARS = 41  # "ms-seq": two unsigned 64-bit numbers and a dash


class NotFound(LookupError):
    """No such request set aside (retried or discarded already, or never there)."""


@dataclass(frozen=True)
class Aside:
    node_id: int
    entry: str  # its id in the node's aside stream, "ms-seq"
    requests: list[str]  # the ids the request(s) had in the node's ingest stream
    rows: list
    error: str

    @property
    def at(self) -> datetime:
        """When it was set aside: the stream id's milliseconds."""
        return datetime.fromtimestamp(int(self.entry.partition("-")[0]) / 1000, UTC)

    @property
    def values(self) -> int:
        return sum(len(r[1]) for r in self.rows if isinstance(r, list) and len(r) > 1)


@dataclass(frozen=True)
class AsidePage:
    items: list[Aside]
    number: int
    total: int

    @property
    def pages(self) -> int:
        return max(1, -(-self.total // PAGE_SIZE))


def _text(raw: bytes | str) -> str:
    return raw.decode() if isinstance(raw, bytes) else raw


def _aside(node_id: int, entry: bytes | str, fields: dict) -> Aside:
    def loads(name: bytes, default: list) -> list:
        try:
            value = json.loads(fields.get(name, b"null"))
        except ValueError:
            return default
        return value if isinstance(value, list) else default

    return Aside(
        node_id=node_id,
        entry=_text(entry),
        requests=[str(i) for i in loads(b"ids", [])],
        rows=loads(b"r", []),
        error=_text(fields.get(b"why", b"")),
    )


def _key(node_id: int) -> str:
    return f"{ASIDE_PREFIX}{int(node_id)}"


def page(number: int) -> AsidePage:
    """Page `number` (1-based, at most MAX_PAGE: the caller checks) of the requests set aside,
    newest first. Two round trips: the nodes' counts, then their newest entries up to the page's
    end (at most ASIDE_MAXLEN each)."""
    client = get_redis()
    nodes = [int(n) for n in client.zrange(INDEX_KEY, 0, -1)]
    pipe = client.pipeline(transaction=False)
    for node_id in nodes:
        pipe.xlen(_key(node_id))
    counts = dict(zip(nodes, pipe.execute(), strict=True))
    total = sum(counts.values())
    upto = min(number * PAGE_SIZE, ASIDE_MAXLEN)
    holding = [n for n in nodes if counts[n]]
    for node_id in holding:
        pipe.xrevrange(_key(node_id), count=upto)
    found = [
        _aside(node_id, entry, fields)
        for node_id, entries in zip(holding, pipe.execute() if holding else [], strict=True)
        for entry, fields in entries
    ]
    found.sort(key=lambda a: stream_order(a.entry), reverse=True)
    start = (number - 1) * PAGE_SIZE
    return AsidePage(found[start : start + PAGE_SIZE], number, total)


def one(node_id: int, entry: str) -> list[Aside]:
    """The one request `entry` of the node, if it is still set aside (the confirmation page)."""
    return [_aside(node_id, e, f) for e, f in get_redis().xrange(_key(node_id), entry, entry)]


def stream_order(entry: str) -> tuple[int, int]:
    ms, _, seq = entry.partition("-")
    return int(ms), int(seq or 0)


def valid_entry(entry: str) -> bool:
    """A stream id as Redis writes one ("1700000000000-0"): anything else is refused first."""
    ms, dash, seq = entry.partition("-")
    return len(entry) <= ENTRY_ID_CHARS and bool(dash) and ms.isdigit() and seq.isdigit()


def _claim(node_id: int, entry: str) -> Aside:
    """Take the entry out of the node's aside stream; NotFound if it is not there (any more)."""
    client = get_redis()
    key = _key(node_id)
    got = client.xrange(key, entry, entry)
    if not got or not client.xdel(key, entry):
        raise NotFound(f"no request {entry} of node {node_id} is set aside")
    if not client.xlen(key):
        client.zrem(INDEX_KEY, str(node_id))
    return _aside(node_id, *got[0])


def retry(node_id: int, entry: str) -> Aside:
    """Put the request back onto its node's stream, as a new request at the end (the drain is
    kicked). If it fails the same way again, it is set aside again. If Redis will not take it,
    it goes back where it was and the error is raised."""
    aside = _claim(node_id, entry)
    try:
        stream.append(node_id, aside.rows)
    except REDIS_FAILURES:
        _put_back(aside)
        raise
    return aside


def discard(node_id: int, entry: str) -> Aside:
    return _claim(node_id, entry)


def _put_back(aside: Aside) -> None:
    client = get_redis()
    fields = {"ids": json.dumps(aside.requests), "r": json.dumps(aside.rows), "why": aside.error}
    client.xadd(_key(aside.node_id), fields, maxlen=ASIDE_MAXLEN, approximate=False)
    client.zadd(INDEX_KEY, {str(aside.node_id): int(aside.at.timestamp() * 1000)})
