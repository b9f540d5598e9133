"""Node write keys on the ingest path: where a request carries its key, and a cached lookup.

The database keeps each key's SHA-256 (sensors/keys.py); each process keeps a table of the
enabled keys' hashes (never a key itself), read in one query and dropped with the other config
caches, so a post costs no database query whatever the number of nodes. See sensors/cache.py
for how a rotated or disabled key stops working promptly.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from django.db.models import Q
from django.http import HttpRequest

from sensors import keys
from sensors.cache import ProcessCache, ProcessTable, check_generation
from sensors.models import GatewayKey, Node

# Wrong keys are remembered briefly so a misconfigured device cannot hammer the database.
NEGATIVE_TTL_S = 5.0
MAX_REFS = 4096

_by_ref = ProcessCache(max_entries=MAX_REFS)
_MISSING = object()


@dataclass(frozen=True)
class NodeIdentity:
    id: int
    name: str
    node_id: int | None
    enabled: bool = True
    site_id: int | None = None

    @classmethod
    def of(cls, node: Node) -> NodeIdentity:
        return cls(node.pk, node.name, node.node_id, node.enabled, node.site_id)

    def matches(self, ref: str | int | None) -> bool:
        """Does a `node` field in a post name this node (by name or radio node id)?"""
        if ref is None:
            return True
        if isinstance(ref, int):
            return ref == self.node_id or str(ref) == self.name
        return ref == self.name


@dataclass(frozen=True)
class GatewayIdentity:
    """A site's gateway key: may post for any node of its site (models.GatewayKey)."""

    id: int
    name: str
    site_id: int

    @classmethod
    def of(cls, gateway: GatewayKey) -> GatewayIdentity:
        return cls(gateway.pk, gateway.name, gateway.site_id)


Identity = NodeIdentity | GatewayIdentity


@dataclass(frozen=True)
class KeyTable:
    """The enabled write keys: their lookup prefixes, and each key's hash -> its holder."""

    prefixes: frozenset[str]
    by_hash: dict[str, Identity]


def key_from_request(request: HttpRequest, *, allow_params: bool) -> str | None:
    """`Authorization: Bearer <key>`; for emoncms paths also `apikey` / `devicekey` params."""
    header = request.META.get("HTTP_AUTHORIZATION", "")
    if header[:7].lower() == "bearer ":
        return header[7:].strip() or None
    if allow_params:
        for name in ("apikey", "devicekey"):
            value = request.GET.get(name) or request.POST.get(name)
            if value:
                return value.strip()
    return None


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def known(key: str) -> Identity | None:
    """The node or gateway of a key, from this process's table (no database, no Redis once
    it is read). A key of the wrong length is no key, without reading anything."""
    if len(key) != keys.KEY_LENGTH:
        return None
    return _key_table().by_hash.get(_digest(key))


def plausible(key: str) -> bool:
    """Could this be some enabled node's key? False for a key of the wrong length or whose
    prefix no node has: such a key (a random one, say) is refused without a database query."""
    if len(key) != keys.KEY_LENGTH:
        return False
    prefix = keys.key_prefix(key)
    if prefix in _key_table().prefixes:
        return True
    # A key just issued by another process (a rotation, a new node) is not in this process's
    # table until it next reads the config generation (once a second): read it now before
    # refusing, so a new key is never refused (one Redis GET, only for unknown prefixes).
    check_generation()
    return prefix in _key_table().prefixes


def _load_key_table() -> KeyTable:
    by_hash: dict[str, Identity] = {}
    prefixes = set()
    nodes = Node.objects.filter(enabled=True).exclude(key_hash="").order_by()
    for pk, name, node_id, site_id, prefix, digest in nodes.values_list(
        "pk", "name", "node_id", "site_id", "key_prefix", "key_hash"
    ):
        by_hash[digest] = NodeIdentity(pk, name, node_id, True, site_id)
        prefixes.add(prefix)
    gateways = GatewayKey.objects.filter(enabled=True).exclude(key_hash="").order_by()
    for pk, name, site_id, prefix, digest in gateways.values_list(
        "pk", "name", "site_id", "key_prefix", "key_hash"
    ):
        by_hash[digest] = GatewayIdentity(pk, name, site_id)
        prefixes.add(prefix)
    return KeyTable(frozenset(prefixes), by_hash)


# Every enabled node and gateway key, read in one query and kept per process like any config
# (sensors/cache.py's ProcessTable: dropped within a second of a change by the config
# generation, after 60 s in case Redis missed it). A key is then checked in memory. Before,
# each key was cached on its own and each entry ran out after 60 s: at 10,000 nodes every web
# worker looked each node up again once a minute (three queries each, about half of its posts
# at 1,000 req/s), one query a minute now (docs/BENCHMARKS.md, "CPU per post"). While the
# database is away (issue 27 item 8) the last table read still checks keys: nothing can rotate
# or disable a key meanwhile.
_keys = ProcessTable(_load_key_table)


def _key_table() -> KeyTable:
    return _keys.get()


def authenticate(key: str) -> Identity | None:
    """A node's key, else a site's gateway key (both random 128-bit: they cannot collide).

    Looked up by the key's SHA-256, the hash the database keeps (sensors/keys.py): comparing
    hashes leaks nothing of the key, as comparing hashes in constant time did before."""
    identity = known(key)
    if identity is None and plausible(key):
        # The prefix is some key's: the table may be older than this key (plausible() re-read
        # the generation, so a table dropped since is read again here).
        identity = known(key)
    return identity


def _ref_key(ref: str | int, site_id: int | None) -> tuple[int | None, str | int]:
    # Names and radio ids are unique per site (models.Node): a ref means a node only within
    # a site, so the cache is keyed by both.
    return (site_id, ref)


def _pick(ref: str | int, nodes: list[Node]) -> Node | None:
    """The node a ref names among `nodes` (one site's, or all for a caller with no site): a
    numeric ref is first a radio id, then a name; two nodes it could equally mean (the same
    radio id in two sites, for a caller with no site) is no node, never a guess."""
    if isinstance(ref, int) and ref <= 255:
        by_radio = [n for n in nodes if n.node_id == ref]
        if by_radio:
            return by_radio[0] if len(by_radio) == 1 else None
    by_name = [n for n in nodes if n.name == str(ref)]
    return by_name[0] if len(by_name) == 1 else None


def _matching(refs: list[str | int], site_id: int | None) -> list[Node]:
    radio_ids = [r for r in refs if isinstance(r, int) and r <= 255]
    names = [str(r) for r in refs]
    match = Q(name__in=names) | Q(node_id__in=radio_ids) if radio_ids else Q(name__in=names)
    nodes = Node.objects.filter(match)
    if site_id is not None:
        nodes = nodes.filter(site_id=site_id)
    return list(nodes)


def lookup_ref(ref: str | int, site_id: int | None = None) -> NodeIdentity | None:
    """The node a `node` field names (name, or radio id if numeric) in site `site_id`, enabled
    or not: callers that accept readings without a key (MQTT) must check `enabled` themselves.
    Without a site (MQTT has none) a ref two sites' nodes answer to names no node."""
    return lookup_refs([ref], site_id)[ref]


# What `cached_ref` answers for a ref this process looked up recently and found no node for.
NOT_FOUND = NodeIdentity(id=0, name="", node_id=None, enabled=False)


def cached_ref(ref: str | int, site_id: int | None = None) -> NodeIdentity | None:
    """The node a ref names if this process knows (no query): NOT_FOUND if it knows there is
    none, None if it does not know."""
    cached = _by_ref.get(_ref_key(ref, site_id), _MISSING)
    if cached is _MISSING:
        return None
    return NOT_FOUND if cached is None else cached


def lookup_refs(
    refs: list[str | int], site_id: int | None = None
) -> dict[str | int, NodeIdentity | None]:
    """`lookup_ref` for many refs at once: the process cache first, then one query for the
    rest (a bulk request naming 2,500 nodes costs one query, not 2,500)."""
    found: dict[str | int, NodeIdentity | None] = {}
    missing = []
    for ref in refs:
        cached = _by_ref.get(_ref_key(ref, site_id), _MISSING)
        if cached is _MISSING:
            missing.append(ref)
        else:
            found[ref] = cached
    if not missing:
        return found
    nodes = _matching(missing, site_id)
    for ref in missing:
        node = _pick(ref, nodes)
        identity = NodeIdentity.of(node) if node is not None else None
        _by_ref.set(_ref_key(ref, site_id), identity, None if identity else NEGATIVE_TTL_S)
        found[ref] = identity
    return found


def remember_ref(ref: str | int, identity: NodeIdentity) -> None:
    """A node this process just registered: found at once, not after the negative TTL."""
    _by_ref.set(_ref_key(ref, identity.site_id), identity)


def forget_ref(ref: str | int, site_id: int | None = None) -> None:
    _by_ref.set(_ref_key(ref, site_id), _MISSING, 0.0)
