"""The ingest endpoints: REST `/api/v1/readings` and emoncms-compatible `/input/post`,
`/input/bulk` (also with `.json`, as emonhub posts).

A request is accepted once it is validated and its whole batch is appended to its node's
Redis Stream (sensors/ingest/stream.py), which workers drain: the web process never waits on
the feed store. Plain Django views, not DRF, because this is the hot path (hundreds of posts a second)
and every error must have the emoncms-friendly shape of core.api_errors anyway.

Throttling (core/throttle.py) is done here, around the key check, not by a decorator: a node is
charged only once its key matched (in the same script that stores its request: one round trip
for an accepted post), and a missing or wrong key is charged to the client address.

In production these views are reached through sensors/ingest/wsgi.py (bms/wsgi.py routes their
paths there, past the middleware they do not use); Django's URL conf names them too.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse, JsonResponse, QueryDict
from django.views.decorators.csrf import csrf_exempt

from core import throttle
from core.openapi import documented_by
from core.redis import REDIS_FAILURES, ReplicasBehind
from feeds.store import phpfina
from sensors import cache as _cache  # noqa: F401  (connects the invalidation signals)
from sensors.ingest import (
    emoncms_input,
    history_budget,
    input_budget,
    input_errors,
    name_screen,
    node_auth,
    registration,
)
from sensors.ingest import stream as ingest_stream
from sensors.ingest.docs import InputBulkDoc, InputPostDoc, ReadingsDoc
from sensors.ingest.emoncms_input import BulkBatch, Skipped
from sensors.ingest.node_auth import GatewayIdentity, Identity, NodeIdentity, key_from_request
from sensors.ingest.parse import (
    IngestError,
    Limits,
    NodeRef,
    Row,
    check_node_ref,
    parse_readings,
)

log = logging.getLogger(__name__)


def limits() -> Limits:
    return Limits(
        max_rows=settings.BMS_INGEST_MAX_ROWS,
        max_values=settings.BMS_INGEST_MAX_VALUES,
        max_future_s=settings.BMS_INGEST_MAX_FUTURE_S,
        max_decompressed_bytes=4 * max_body_bytes(),
    )


def max_body_bytes() -> int:
    return settings.DATA_UPLOAD_MAX_MEMORY_SIZE or 1_048_576


def _error(exc: IngestError) -> JsonResponse:
    return JsonResponse(exc.body(), status=exc.status)


def _read_body(request: HttpRequest) -> bytes:
    """The body, refused with 413 before it is read if the client says it is too big."""
    limit = max_body_bytes()
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        raise IngestError("Content-Length header is not a number", field="Content-Length") from None
    if declared > limit:
        raise IngestError(f"body is {declared} bytes (limit {limit})", status=413, field="body")
    try:
        body = request.body
    except RequestDataTooBig:
        raise IngestError(f"body is larger than {limit} bytes", status=413, field="body") from None
    if len(body) > limit:
        raise IngestError(f"body is larger than {limit} bytes", status=413, field="body")
    return body


BAD_REQUESTS = "too many requests with a missing or wrong node key or bad input from this address"


class Throttled(Exception):
    """A 429: the node's allowance, or the address's allowance of failed keys, is spent."""

    def __init__(self, retry_after: float, reason: str) -> None:
        super().__init__(reason)
        self.retry_after = retry_after
        self.reason = reason


def _identify(request: HttpRequest, key: str | None, *, address_charged: bool = False) -> Identity:
    """The key's node or gateway; a missing or wrong key charged to the address (401, or 429
    over that allowance) unless `address_charged` says it was already. A good key is not
    charged here: see `_charge_first` and `_charged`.

    A key is looked up in the database only if some node's key has its prefix (a random key is
    refused from memory), and that lookup is made even for an address over its allowance of
    failed keys: a real node behind the same NAT as a misconfigured device keeps posting."""
    identity = node_auth.known(key) if key else None
    if identity is None and key and node_auth.plausible(key):
        identity = node_auth.authenticate(key)
    request.ingest_counted = True  # type: ignore[attr-defined]
    if identity is None:
        wait = None if address_charged else throttle.count_failed_key(request)
        if wait is not None:
            raise Throttled(wait, BAD_REQUESTS)
        if not key:
            scheme = request.META.get("HTTP_AUTHORIZATION", "").split(" ", 1)[0]
            # A key sent as 'Token <key>' was not "missing": say which scheme to use instead.
            sent = (
                f"an Authorization header of scheme {scheme[:20]!r} is not read; " if scheme else ""
            )
            raise IngestError(
                f"missing node key: {sent}send 'Authorization: Bearer <key>' "
                "(or apikey= on /input/)",
                status=401,
                field="apikey",
            )
        raise IngestError("node key not recognised (or the node is disabled)", 401, field="apikey")
    return identity


NODE_THROTTLED = "too many requests for this node"
GATEWAY_THROTTLED = "too many requests for this gateway key"


def _throttled_text(identity: Identity) -> str:
    return GATEWAY_THROTTLED if isinstance(identity, GatewayIdentity) else NODE_THROTTLED


def _charge(identity: Identity) -> throttle.Charge | None:
    kind = "gateway" if isinstance(identity, GatewayIdentity) else "node"
    return throttle.ingest_charge(kind, identity.id)


def _charge_first(identity: Identity) -> None:
    """Count the request now (its own round trip): for a gateway key, whose request may
    register nodes in the database, which a throttled key must not reach."""
    charge = _charge(identity)
    wait = None if charge is None else charge.run()
    if wait is not None:
        raise Throttled(wait, _throttled_text(identity))


@contextmanager
def _charged(identity: NodeIdentity) -> Iterator[throttle.Charge | None]:
    """A node key's request is counted once: with its append when it is accepted (one round
    trip, sensors/ingest/stream.py), or alone when it is refused on the way (a 4xx or 503 then
    becomes a 429 if the node is over its allowance, as if it had been counted first). The
    steps inside have no side effect but the refusal, so counting them last changes nothing."""
    charge = _charge(identity)
    try:
        yield charge
    except (IngestError, DatabaseError):
        wait = None if charge is None else charge.run()
        if wait is not None:
            raise Throttled(wait, NODE_THROTTLED) from None
        raise


def _check_node(node: NodeRef, row: int | None, identity: NodeIdentity) -> None:
    """Every row must be for the key's own node: one node cannot write another's inputs.
    Called by the parser before the row's values are read, so a bad value for another node is
    refused as another node's (403), not as a bad value (400).

    Whether the named node exists is not said: the answer is the same for another node and for
    no node, so a key cannot be used to find out which node names exist."""
    if not identity.matches(node):
        raise IngestError(
            f"this key writes node '{identity.name}' only, not {str(node)[:64]!r}",
            status=403,
            field="node",
            row=row,
        )


def _check_nodes(rows: list[Row], identity: NodeIdentity) -> None:
    for index, row in enumerate(rows):
        _check_node(row.node, index if len(rows) > 1 else None, identity)


def _check_named(named: list[tuple[int, NodeRef]], identity: NodeIdentity) -> None:
    """The same rule for every row that names a node, including rows none of whose values
    could be used: skipping the values must not turn another node's 403 into `ok`."""
    for index, ref in named:
        if not identity.matches(ref):
            raise IngestError(
                f"this key writes node '{identity.name}' only, not {str(ref)[:64]!r}",
                status=403,
                field="node",
                row=index if len(named) > 1 else None,
            )


def _check_input_budget(identity: NodeIdentity, rows: list[Row]) -> None:
    """REST only: a reading that would create an input beyond the bound is a 409 naming it
    (emonhub is answered `ok` and the worker skips and records it: sensors/ingest/input_budget.py)."""
    keys = {key for row in rows for key in row.values}
    over = input_budget.over_budget(identity.id, keys)
    if not over:
        return
    first = next(i for i, row in enumerate(rows) if over[0] in row.values)
    raise IngestError(
        f"node '{identity.name}' may not get more automatically created inputs "
        f"({input_budget.limits_text()}): {input_budget.shown(over)} would be new. "
        "Configure or delete its inputs in the admin, or stop sending these keys",
        status=409,
        field=f"values.{over[0]}",
        row=first if len(rows) > 1 else None,
    )


def _skip_unholdable(
    groups: list[tuple[NodeIdentity, list[Row]]], batch: BulkBatch, now: float
) -> list[tuple[NodeIdentity, list[Row]]]:
    """The emoncms paths' rows older than their node's feed files can hold (PHPFina's padding
    bound, history_budget.holdable_s) are skipped and recorded like any bad value, so one
    ancient row no longer makes the whole batch a 413 that emonhub resends forever. The budget
    alone still refuses a batch (_check_history)."""
    kept = []
    for node, rows in groups:
        if not rows:
            continue
        if min(row.t for row in rows) >= now - phpfina.MAX_PADDING_SLOTS:
            # Every file holds this far back (1 s slots at least): live rows cost no query.
            kept.append((node, rows))
            continue
        oldest = now - history_budget.holdable_s(node.id)
        old = [row for row in rows if row.t < oldest]
        for row in old:
            batch.skipped.append(
                Skipped(None, f"node '{node.name}' time {row.t}",
                        f"more than {int(now - oldest) // 86_400} days old: further back "
                        "than this node's feed files can hold")
            )  # fmt: skip
        live = [row for row in rows if row.t >= oldest] if old else rows
        if live:
            kept.append((node, live))
    return kept


def _check_history(groups: list[tuple[NodeIdentity, list[Row]]], now: float | None = None) -> None:
    """History is charged to its site's budget before the answer: over it, the request is a
    413 naming `time` and nothing of it is queued (sensors/ingest/history_budget.py)."""
    by_site: dict[int | None, dict[int, tuple[float, set[str]]]] = {}
    for node, rows in groups:
        if rows:
            keys = {key for row in rows for key in row.values}
            earliest = min(row.t for row in rows)
            by_site.setdefault(node.site_id, {})[node.id] = (earliest, keys)
    now = time.time() if now is None else now
    for site_id, earliest in by_site.items():
        try:
            refusal = history_budget.charge(site_id, earliest, now)
        except REDIS_FAILURES as exc:
            log.error("could not charge history to site %s: %s", site_id, exc)
            raise IngestError("ingest queue unavailable, try again", status=503) from exc
        if refusal is not None:
            raise IngestError(refusal.text(), status=413, field="time")


def _enqueue(
    groups: list[tuple[NodeIdentity, list[Row]]],
    charge: throttle.Charge | None = None,
    clean: str | None = None,
) -> None:
    """Count the request against `charge`, store each node's rows and, for `clean` (the input
    errors' subject of a batch with nothing skipped), ask whether its alarm is due to clear:
    one round trip (a due alarm is then cleared, once an hour at most per subject)."""
    batches = [(node.id, [[row.t, row.values] for row in rows]) for node, rows in groups]
    if not batches and charge is None and clean is None:
        return
    try:
        wait, due = ingest_stream.append_charged(charge, batches, clean)
    except REDIS_FAILURES as exc:
        names = ", ".join(node.name for node, _ in groups)
        log.error("could not queue a batch for node(s) %s: %s", names, exc)
        if isinstance(exc, ReplicasBehind):  # BMS_REDIS_WAIT_REPLICAS: not yet safe to say ok
            raise IngestError(
                "ingest queue unavailable: no Redis replica acknowledged the reading (a failover "
                "or resync in progress?), try again",
                status=503,
            ) from exc
        raise IngestError("ingest queue unavailable, try again", status=503) from exc
    if wait is not None:
        raise Throttled(wait, NODE_THROTTLED)
    if due and clean is not None:
        input_errors.close(clean)


def _guarded(view: Callable[[HttpRequest], HttpResponse]) -> Callable[[HttpRequest], HttpResponse]:
    def wrapper(request: HttpRequest) -> HttpResponse:
        try:
            return view(request)
        except IngestError as exc:
            if exc.status < 500 and not getattr(request, "ingest_counted", False):
                # Refused before its key was looked at (a bad body, a wrong method): counted
                # against the address like a wrong key, so such a flood is throttled too.
                wait = throttle.count_failed_key(request)
                if wait is not None:
                    return throttle.too_many(throttle.INGEST_SCOPE, wait, BAD_REQUESTS)
            return _error(exc)
        except Throttled as exc:
            return throttle.too_many(throttle.INGEST_SCOPE, exc.retry_after, exc.reason)
        except DatabaseError as exc:
            # Node keys are cached, but a cache miss (new key, cache refreshed) reads the
            # database: while it is away, the gateway must retry (503), not see a server error.
            log.error("database unavailable during ingest: %s", exc)
            return _error(IngestError("database unavailable, try again", status=503))

    wrapper.__name__ = view.__name__
    wrapper.__doc__ = view.__doc__
    return csrf_exempt(wrapper)


@documented_by(ReadingsDoc)
@_guarded
def readings(request: HttpRequest) -> HttpResponse:
    """POST one reading or a list: {"node": ..., "time": ..., "values": {"key": number}}."""
    if request.method != "POST":
        raise IngestError("use POST", status=405)
    body = _read_body(request)
    identity = _identify(request, key_from_request(request, allow_params=False))
    if isinstance(identity, GatewayIdentity):
        _charge_first(identity)
        raise IngestError(
            "a gateway key posts to /input/bulk or /input/post (emoncms API); use the node's "
            "own key here",
            status=403,
            field="apikey",
        )
    with _charged(identity) as charge:
        rows = parse_readings(
            body,
            time.time(),
            limits(),
            authorize=lambda node, row: _check_node(node, row, identity),
        )
        _check_input_budget(identity, rows)
        _check_history([(identity, rows)])
    # Nothing is skipped here (a bad value is a 4xx), so an accepted post is a clean batch: it
    # clears input errors the worker recorded (late readings) as an emoncms post does.
    _enqueue([(identity, rows)], charge, clean=input_errors.node_subject(identity.id))
    n_values = sum(len(r.values) for r in rows)
    return JsonResponse({"success": True, "rows": len(rows), "values": n_values}, status=202)


def _emoncms_params(request: HttpRequest) -> tuple[dict[str, str], bytes | None]:
    """The query parameters, and the raw body of a POST: read (bounded), not yet parsed.

    The body is parsed only once the key is known (`_read_form`, `_bulk_text`): a form or a
    compressed body from a refused key is never opened."""
    params = {k: request.GET[k] for k in request.GET}
    if request.method == "GET":
        return params, None
    if request.method != "POST":
        raise IngestError("use GET or POST", status=405)
    return params, _read_body(request)


def _read_form(request: HttpRequest, params: dict[str, str], body: bytes | None) -> None:
    """Merge a POST's form into `params` (the form wins, as before). Not for `cb`, whose body
    is the compressed data itself (emoncms reads it from php://input then, never as a form)."""
    if body is None or "cb" in params or getattr(request, "ingest_form_read", False):
        return
    request.ingest_form_read = True  # type: ignore[attr-defined]
    params.update({k: request.POST[k] for k in request.POST})


def _emoncms_key(request: HttpRequest, params: dict[str, str]) -> str | None:
    header = key_from_request(request, allow_params=False)
    return header or params.get("apikey") or params.get("devicekey") or None


def _outside_key(request: HttpRequest, params: dict[str, str], body: bytes | None) -> str | None:
    """The key from the header or the query string; from the form only when neither has one
    (so a 1 MiB form from a refused key in the URL is never parsed). A `cb` body is not read
    here at all: see `_legacy_compressed_form`."""
    key = _emoncms_key(request, params)
    if key is None and "cb" not in params:
        _read_form(request, params, body)
        key = _emoncms_key(request, params)
    return key


def _compressed(params: dict[str, str]) -> bool:
    return "cb" in params or "c" in params


def _bulk_text(request: HttpRequest, params: dict[str, str], body: bytes | None) -> str:
    """The bulk JSON. With `cb`, the body decompresses to the JSON itself (emoncms, emonhub);
    our earlier clients compressed the whole form (`data=...&apikey=...`): still read."""
    text = emoncms_input.bulk_text(params, body, limits())
    if body is not None and "cb" in params and not text.lstrip().startswith("["):
        form = QueryDict(text, encoding="utf-8")
        params.update({k: form[k] for k in form if k != "cb"})
        if "data" not in form:
            raise IngestError("body: cb=1 data is neither a JSON list nor a form", field="cb")
        return form["data"]
    return text


def _legacy_compressed_form(
    request: HttpRequest, params: dict[str, str], body: bytes | None
) -> tuple[Identity, str]:
    """A `cb` body with no key outside it: our earlier clients compressed the whole form, key
    included, so the body must be inflated to find the key. It is charged to the address as a
    failed key first (429 over that allowance, before anything is inflated), so what an
    address can make the server inflate without a key is bounded by BMS_THROTTLE_INGEST_FAILED."""
    wait = throttle.count_failed_key(request)
    request.ingest_counted = True  # type: ignore[attr-defined]
    if wait is not None:
        raise Throttled(wait, BAD_REQUESTS)
    text = _bulk_text(request, params, body)
    return _identify(request, _emoncms_key(request, params), address_charged=True), text


def _split_by_node(identity: Identity, batch: BulkBatch) -> list[tuple[NodeIdentity, list[Row]]]:
    """Each node's rows, in the order the nodes first appear; rows that cannot go to a node are
    added to batch.skipped. A node key keeps the strict rule of our API (403 for another node);
    a gateway key's new nodes are registered within their bounds (sensors/ingest/registration.py)."""
    if isinstance(identity, NodeIdentity):
        _check_nodes(batch.rows, identity)
        _check_named(batch.named, identity)
        return [(identity, batch.rows)] if batch.rows else []
    refs = list(dict.fromkeys(row.node for row in batch.rows if row.node is not None))
    resolution = registration.resolve(identity, refs)
    groups: dict[int, tuple[NodeIdentity, list[Row]]] = {}
    for index, row in enumerate(batch.rows):
        if row.node is None:
            batch.skipped.append(Skipped(index, "data[1]", "a gateway key needs the node"))
            continue
        node = resolution.nodes.get(row.node)
        if node is None:
            batch.skipped.append(Skipped(index, "data[1]", resolution.refused[row.node]))
            continue
        groups.setdefault(node.id, (node, []))[1].append(row)
    return list(groups.values())


def _deliver(
    identity: Identity, parse: Callable[[], BulkBatch], *, charged: bool = False
) -> BulkBatch:
    """Parse, then queue each node's rows and record what was skipped.

    A node key's request is counted with its append (one round trip); a gateway key's first,
    since splitting its rows may register nodes. `charged`: already counted by `_charge_first`
    (a compressed body, counted before it is inflated)."""
    # A batch with nothing skipped asks whether the sender's input-error alarm is due to clear
    # inside its append (`clean`): no round trip of its own (issue #29).
    if isinstance(identity, GatewayIdentity):
        if not charged:
            _charge_first(identity)
        subject = input_errors.gateway_subject(identity.id)
        label = f"Gateway key '{identity.name}'"
        batch = parse()
        groups, now = _split_by_node(identity, batch), time.time()
        groups = _skip_unholdable(groups, batch, now)
        _check_history(groups, now)
        _enqueue(groups, clean=None if batch.skipped else subject)
    elif charged:
        subject, label = input_errors.node_subject(identity.id), f"Node '{identity.name}'"
        batch = parse()
        groups, now = _split_by_node(identity, batch), time.time()
        groups = _skip_unholdable(groups, batch, now)
        _check_history(groups, now)
        _enqueue(groups, clean=None if batch.skipped else subject)
    else:
        subject, label = input_errors.node_subject(identity.id), f"Node '{identity.name}'"
        with _charged(identity) as charge:  # a refusal inside is counted as the request
            batch = parse()
            groups, now = _split_by_node(identity, batch), time.time()
            groups = _skip_unholdable(groups, batch, now)
            _check_history(groups, now)
        _enqueue(groups, charge, clean=None if batch.skipped else subject)
    if batch.skipped:
        input_errors.record(subject, label, batch.skipped, count=batch.skip_count())
    return batch


@documented_by(InputPostDoc)
@_guarded
def input_post(request: HttpRequest) -> HttpResponse:
    """emoncms input/post: node, fulljson | json | csv, time. Replies `ok`."""
    params, body = _emoncms_params(request)
    identity = _identify(request, _outside_key(request, params, body))
    _read_form(request, params, body)
    if isinstance(identity, NodeIdentity):
        # Checked before the values: a post whose every value is skipped still names a node,
        # and another node's name is a 403 whatever the values.
        _check_nodes([Row(check_node_ref(params.get("node"), "node"), 0)], identity)
    fulljson = False

    def parse() -> BulkBatch:
        nonlocal fulljson
        batch, fulljson = emoncms_input.parse_post(params, time.time(), limits())
        return batch

    _deliver(identity, parse)
    if fulljson:
        return JsonResponse({"success": True})
    return HttpResponse("ok", content_type="text/plain")


def _parse_bulk(identity: Identity, text: str, params: dict[str, str]) -> BulkBatch:
    """The bulk rows; a gateway's rows for a flood of new names are left out unread and counted
    as one skip (sensors/ingest/name_screen.py)."""
    screen: name_screen.Screen | None = None

    def select(doc: list) -> list[int] | None:
        nonlocal screen
        if isinstance(identity, GatewayIdentity):
            screen = name_screen.screen(identity.site_id, doc)
        return None if screen is None else screen.keep

    batch = emoncms_input.parse_bulk(text, params, time.time(), limits(), select)
    if screen is not None:
        batch.skipped.append(screen.skipped())
        batch.unlisted += screen.rows - 1
    return batch


@documented_by(InputBulkDoc)
@_guarded
def input_bulk(request: HttpRequest) -> HttpResponse:
    """emoncms input/bulk: data=[[t, node, v1 | {"name": v}, ...], ...] as form, `cb` raw zlib
    JSON body or `c` hex; sentat/offset/time. Replies `ok`, skipping (and recording) bad values.

    The key is identified, and for a compressed body charged, before anything is inflated or
    parsed: a 4 KB `cb` body inflating to 4 MB cost 0.48 s of CPU, and a refused key (unknown,
    or over its allowance) paid it as well as a good one."""
    params, body = _emoncms_params(request)
    charged = False
    key = _outside_key(request, params, body)
    if key is None and "cb" in params and body is not None:
        identity, text = _legacy_compressed_form(request, params, body)
    else:
        identity = _identify(request, key)
        _read_form(request, params, body)
        if _compressed(params):
            _charge_first(identity)  # a throttled key gets its 429 before the inflate
            charged = True
        text = _bulk_text(request, params, body)
    _deliver(identity, lambda: _parse_bulk(identity, text, params), charged=charged)
    if "fulljson" in params:
        return JsonResponse({"success": True})
    return HttpResponse("ok", content_type="text/plain")
