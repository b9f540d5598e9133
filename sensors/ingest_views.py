"""The ingest endpoints: REST `/api/v1/readings` and emoncms-compatible `/input/post`,
`/input/bulk` (also with `.json`, as emonhub posts).

A request is accepted once it is validated and its whole batch is appended to its node's
Redis Stream (sensors/ingest_stream.py), which workers drain: the web process never waits on
the feed store. Plain Django views, not DRF, because this is the hot path (hundreds of posts a second)
and every error must have the emoncms-friendly shape of bms.api_errors anyway.

Throttling (bms/throttle.py) is done here, around the key check, not by a decorator: a node is
charged only once its key matched, and a missing or wrong key is charged to the client address.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse, JsonResponse, QueryDict
from django.views.decorators.csrf import csrf_exempt

from bms import throttle
from bms.redis import REDIS_FAILURES
from sensors import cache as _cache  # noqa: F401  (connects the invalidation signals)
from sensors import ingest_stream, input_budget, node_auth
from sensors.ingest import IngestError, Limits, Row, parse_bulk, parse_post, parse_readings
from sensors.node_auth import NodeIdentity, key_from_request

log = logging.getLogger(__name__)


def limits() -> Limits:
    return Limits(
        max_rows=getattr(settings, "BMS_INGEST_MAX_ROWS", Limits.max_rows),
        max_values=getattr(settings, "BMS_INGEST_MAX_VALUES", Limits.max_values),
        max_future_s=getattr(settings, "BMS_INGEST_MAX_FUTURE_S", Limits.max_future_s),
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


def _authenticate(request: HttpRequest, key: str | None) -> NodeIdentity:
    """The key's node, charged one request; a missing or wrong key charged to the address.

    A key is looked up in the database only if some node's key has its prefix (a random key is
    refused from memory), and that lookup is made even for an address over its allowance of
    failed keys: a real node behind the same NAT as a misconfigured device keeps posting."""
    identity = node_auth.known(key) if key else None
    if identity is None and key and node_auth.plausible(key):
        identity = node_auth.authenticate(key)
    request.ingest_counted = True  # type: ignore[attr-defined]
    if identity is None:
        wait = throttle.count_failed_key(request)
        if wait is not None:
            raise Throttled(wait, BAD_REQUESTS)
        if not key:
            raise IngestError(
                "missing node key: send 'Authorization: Bearer <key>' (or apikey= on /input/)",
                status=401,
                field="apikey",
            )
        raise IngestError("node key not recognised (or the node is disabled)", 401, field="apikey")
    wait = throttle.charge_node(identity.id)
    if wait is not None:
        raise Throttled(wait, "too many requests for this node")
    return identity


def _check_nodes(rows: list[Row], identity: NodeIdentity) -> None:
    """Every row must be for the key's own node: one node cannot write another's inputs.

    Whether the named node exists is not said: the answer is the same for another node and for
    no node, so a key cannot be used to find out which node names exist."""
    for index, row in enumerate(rows):
        if not identity.matches(row.node):
            raise IngestError(
                f"this key writes node '{identity.name}' only, not {str(row.node)[:64]!r}",
                status=403,
                field="node",
                row=index if len(rows) > 1 else None,
            )


def _check_input_budget(identity: NodeIdentity, rows: list[Row]) -> None:
    """REST only: a reading that would create an input beyond the bound is a 409 naming it
    (emonhub is answered `ok` and the worker skips and records it: sensors/input_budget.py)."""
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


def _enqueue(identity: NodeIdentity, rows: list[Row]) -> None:
    try:
        ingest_stream.append(identity.id, [[row.t, row.values] for row in rows])
    except REDIS_FAILURES as exc:
        log.error("could not queue a batch for node %s: %s", identity.name, exc)
        raise IngestError("ingest queue unavailable, try again", status=503) from exc


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


@_guarded
def readings(request: HttpRequest) -> HttpResponse:
    """POST one reading or a list: {"node": ..., "time": ..., "values": {"key": number}}."""
    if request.method != "POST":
        raise IngestError("use POST", status=405)
    body = _read_body(request)
    identity = _authenticate(request, key_from_request(request, allow_params=False))
    rows = parse_readings(body, time.time(), limits())
    _check_nodes(rows, identity)
    _check_input_budget(identity, rows)
    _enqueue(identity, rows)
    n_values = sum(len(r.values) for r in rows)
    return JsonResponse({"success": True, "rows": len(rows), "values": n_values}, status=202)


def _emoncms_params(request: HttpRequest) -> tuple[dict[str, str], QueryDict | None]:
    """GET and POST parameters merged (POST wins); with `cb=1` the body is zlib form data."""
    params = {k: request.GET[k] for k in request.GET}
    form: QueryDict | None = None
    if request.method == "POST":
        body = _read_body(request)
        if request.GET.get("cb") == "1":
            from sensors.ingest import decompress_body

            raw = decompress_body(body, limits())
            try:
                form = QueryDict(raw, encoding="utf-8")
            except UnicodeDecodeError:
                raise IngestError("body: not UTF-8 form data", field="body") from None
        else:
            form = request.POST
        params.update({k: form[k] for k in form})
    elif request.method != "GET":
        raise IngestError("use GET or POST", status=405)
    return params, form


def _emoncms_key(request: HttpRequest, params: dict[str, str]) -> str | None:
    header = key_from_request(request, allow_params=False)
    return header or params.get("apikey") or params.get("devicekey") or None


@_guarded
def input_post(request: HttpRequest) -> HttpResponse:
    """emoncms input/post: node, fulljson | json | csv, time. Replies `ok`."""
    params, _ = _emoncms_params(request)
    identity = _authenticate(request, _emoncms_key(request, params))
    row, fulljson = parse_post(params, time.time(), limits())
    _check_nodes([row], identity)
    _enqueue(identity, [row])
    if fulljson:
        return JsonResponse({"success": True})
    return HttpResponse("ok", content_type="text/plain")


@_guarded
def input_bulk(request: HttpRequest) -> HttpResponse:
    """emoncms input/bulk: data=[[t, node, v1, ...], ...] with sentat/offset/time. Replies `ok`."""
    params, _ = _emoncms_params(request)
    identity = _authenticate(request, _emoncms_key(request, params))
    rows = parse_bulk(params, time.time(), limits())
    _check_nodes(rows, identity)
    if rows:
        _enqueue(identity, rows)
    if "fulljson" in params:
        return JsonResponse({"success": True})
    return HttpResponse("ok", content_type="text/plain")
