"""One shape for every API error: {"error": "...", "fields": {...}} with a 4xx status, or a
503 while the database is unavailable.

Clients (and the people reading logs) see the field named, never an HTML 500 page.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import InterfaceError, OperationalError
from django.db.models import ProtectedError, RestrictedError
from django.http import JsonResponse
from rest_framework import status
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import exception_handler

log = logging.getLogger(__name__)

# What a client should wait before asking again while the database is unavailable.
DATABASE_RETRY_AFTER_S = 30


def error_response(message: str, status: int = 400, **extra: Any) -> JsonResponse:
    """Plain-Django views (emoncms-compatible paths, healthz) use this helper."""
    return JsonResponse({"success": False, "error": message, **extra}, status=status)


def _first_message(detail: Any) -> str:
    if isinstance(detail, dict):
        for field, value in detail.items():
            label = "" if field == "non_field_errors" else f"{field}: "
            return label + _first_message(value)
    if isinstance(detail, list) and detail:
        return _first_message(detail[0])
    return str(detail)


def _protected_conflict(exc: ProtectedError | RestrictedError) -> Response:
    """Deleting an object others still point at (a site with nodes): 409 naming what blocks it."""
    objects = exc.protected_objects if isinstance(exc, ProtectedError) else exc.restricted_objects
    blocking = sorted({f"{o._meta.verbose_name} '{o}'" for o in list(objects)[:5]})
    message = "still in use by " + ", ".join(blocking) + ": delete or move those first"
    return Response(
        {"success": False, "error": message, "blocking": blocking}, status=status.HTTP_409_CONFLICT
    )


def _database_unavailable(exc: Exception, context: dict) -> Response:
    """The database cannot be reached (down, restarting, its file gone, locked past the
    timeout): a 503 the client may retry, not a 500 that reads as a bug of ours. Integrity and
    data errors are not this: they stay 500s. Logged, as the 500 would have been."""
    view = context.get("view")
    log.error("API %s: database unavailable: %s", type(view).__name__ if view else "?", exc)
    return Response(
        {"success": False, "error": "database unavailable, try again"},
        status=status.HTTP_503_SERVICE_UNAVAILABLE,
        headers={"Retry-After": str(DATABASE_RETRY_AFTER_S)},
    )


def json_exception_handler(exc: Exception, context: dict) -> Response | None:
    if isinstance(exc, OperationalError | InterfaceError):
        return _database_unavailable(exc, context)
    if isinstance(exc, ProtectedError | RestrictedError):
        return _protected_conflict(exc)
    if isinstance(exc, RequestDataTooBig):
        # Django's own answer is an HTML 400; an API client gets JSON and the right status.
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        return Response(
            {"success": False, "error": f"Request body larger than {limit} bytes."},
            status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
        )
    response = exception_handler(exc, context)
    if response is None:
        return None
    detail = response.data
    body: dict[str, Any] = {"success": False, "error": _first_message(detail)}
    if isinstance(exc, ValidationError) and isinstance(detail, dict):
        body["fields"] = detail
    response.data = body
    return response


# Paths whose clients read JSON: a refusal before any view (a Host not in ALLOWED_HOSTS, a
# suspicious request) answers them in the same {"error", "field"} shape as every other refusal,
# not Django's HTML "Bad Request (400)" page (found by an outside check of the ingest paths).
JSON_PATH_PREFIXES = ("/api/", "/input/", "/feed/")


def _too_much(exception: Exception | None) -> str:
    """Plain words for a request over Django's bounds (an outside tester got a bare page)."""
    from django.conf import settings
    from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent

    if isinstance(exception, TooManyFieldsSent):
        return (
            f"Too many fields in one form: at most {settings.DATA_UPLOAD_MAX_NUMBER_FIELDS} "
            "are read."
        )
    if isinstance(exception, TooManyFilesSent):
        return f"Too many files in one form: at most {settings.DATA_UPLOAD_MAX_NUMBER_FILES}."
    if isinstance(exception, RequestDataTooBig):
        return f"Too much in one form: at most {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes."
    return ""


def bad_request(request, exception: Exception | None = None):
    """handler400 (bms/urls.py): JSON for API, ingest and feed paths, Django's page elsewhere;
    a form over Django's bounds is said in plain words on either."""
    from django.core.exceptions import DisallowedHost
    from django.shortcuts import render
    from django.views.defaults import bad_request as django_bad_request

    path = request.path_info
    said = _too_much(exception)
    if not (path.startswith(JSON_PATH_PREFIXES) or path.endswith(".json")):
        if said:
            return render(request, "core/too_much.html", {"said": said}, status=400)
        return django_bad_request(request, exception)
    if said:
        return error_response(said)
    if isinstance(exception, DisallowedHost):
        host = request.META.get("HTTP_HOST", "")[:80]
        return error_response(f"Host: {host!r} is not a host this site answers to", field="Host")
    return error_response("bad request")


def not_found(request, exception: Exception | None = None):
    """handler404 (bms/urls.py): an unknown /api/v1/... path (or ingest, feed path) is a JSON 404
    naming the path, as every other API answer is JSON; pages keep Django's HTML page."""
    from django.urls import Resolver404
    from django.views.defaults import page_not_found

    path = request.path_info
    if not (path.startswith(JSON_PATH_PREFIXES) or path.endswith(".json")):
        return page_not_found(request, exception)
    if exception is None or isinstance(exception, Resolver404) or not str(exception):
        # A Resolver404's text is the URL patterns tried: the path is what the client needs.
        return error_response(f"no such path: {path[:200]!r}", 404, field="path")
    return error_response(str(exception)[:200], 404)
