"""The ingest endpoints: REST `/api/v1/readings` and emoncms-compatible `/input/post`,
`/input/bulk` (also with `.json`, as emonhub posts).

A request is accepted once it is validated and its whole batch is handed to ONE Celery task
(`sensors.tasks.ingest_batch`, queue `ingest`): the web process never waits on the feed
store. Plain Django views, not DRF, because this is the hot path (hundreds of posts a second)
and every error must have the emoncms-friendly shape of bms.api_errors anyway.
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
from kombu.exceptions import OperationalError

from bms.redis import REDIS_FAILURES
from bms.throttle import ingest_throttle
from sensors import cache as _cache  # noqa: F401  (connects the invalidation signals)
from sensors.ingest import IngestError, Limits, Row, parse_bulk, parse_post, parse_readings
from sensors.node_auth import NodeIdentity, authenticate, key_from_request, lookup_ref
from sensors.publish import publish_ingest_batch

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


def _authenticate(key: str | None) -> NodeIdentity:
    if not key:
        raise IngestError(
            "missing node key: send 'Authorization: Bearer <key>' (or apikey= on /input/)",
            status=401,
            field="apikey",
        )
    identity = authenticate(key)
    if identity is None:
        raise IngestError("node key not recognised (or the node is disabled)", 401, field="apikey")
    return identity


def _check_nodes(rows: list[Row], identity: NodeIdentity) -> None:
    """Every row must be for the key's own node: one node cannot write another's inputs."""
    checked: set = set()
    for index, row in enumerate(rows):
        if row.node in checked or identity.matches(row.node):
            checked.add(row.node)
            continue
        other = lookup_ref(row.node)
        where = {"field": "node", "row": index if len(rows) > 1 else None}
        if other is None:
            raise IngestError(f"unknown node {row.node!r}", status=404, **where)
        raise IngestError(
            f"this key belongs to node '{identity.name}', not '{other.name}'", status=403, **where
        )


def _enqueue(identity: NodeIdentity, rows: list[Row]) -> None:
    try:
        # One LPUSH of the task message Celery would send (sensors/publish.py says why).
        publish_ingest_batch(identity.id, [[row.t, row.values] for row in rows])
    except (OperationalError, *REDIS_FAILURES) as exc:
        log.error("could not queue a batch for node %s: %s", identity.name, exc)
        raise IngestError("ingest queue unavailable, try again", status=503) from exc


def _guarded(view: Callable[[HttpRequest], HttpResponse]) -> Callable[[HttpRequest], HttpResponse]:
    def wrapper(request: HttpRequest) -> HttpResponse:
        try:
            return view(request)
        except IngestError as exc:
            return _error(exc)
        except DatabaseError as exc:
            # Node keys are cached, but a cache miss (new key, cache refreshed) reads the
            # database: while it is away, the gateway must retry (503), not see a server error.
            log.error("database unavailable during ingest: %s", exc)
            return _error(IngestError("database unavailable, try again", status=503))

    wrapper.__name__ = view.__name__
    wrapper.__doc__ = view.__doc__
    return csrf_exempt(wrapper)


@ingest_throttle
@_guarded
def readings(request: HttpRequest) -> HttpResponse:
    """POST one reading or a list: {"node": ..., "time": ..., "values": {"key": number}}."""
    if request.method != "POST":
        raise IngestError("use POST", status=405)
    body = _read_body(request)
    identity = _authenticate(key_from_request(request, allow_params=False))
    rows = parse_readings(body, time.time(), limits())
    _check_nodes(rows, identity)
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


@ingest_throttle
@_guarded
def input_post(request: HttpRequest) -> HttpResponse:
    """emoncms input/post: node, fulljson | json | csv, time. Replies `ok`."""
    params, _ = _emoncms_params(request)
    identity = _authenticate(_emoncms_key(request, params))
    row, fulljson = parse_post(params, time.time(), limits())
    _check_nodes([row], identity)
    _enqueue(identity, [row])
    if fulljson:
        return JsonResponse({"success": True})
    return HttpResponse("ok", content_type="text/plain")


@ingest_throttle
@_guarded
def input_bulk(request: HttpRequest) -> HttpResponse:
    """emoncms input/bulk: data=[[t, node, v1, ...], ...] with sentat/offset/time. Replies `ok`."""
    params, _ = _emoncms_params(request)
    identity = _authenticate(_emoncms_key(request, params))
    rows = parse_bulk(params, time.time(), limits())
    _check_nodes(rows, identity)
    if rows:
        _enqueue(identity, rows)
    if "fulljson" in params:
        return JsonResponse({"success": True})
    return HttpResponse("ok", content_type="text/plain")
