"""One shape for every API error: {"error": "...", "fields": {...}} with a 4xx status.

Clients (and the people reading logs) see the field named, never an HTML 500 page.
"""

from __future__ import annotations

from typing import Any

from django.http import JsonResponse
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import exception_handler


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


def json_exception_handler(exc: Exception, context: dict) -> Response | None:
    response = exception_handler(exc, context)
    if response is None:
        return None
    detail = response.data
    body: dict[str, Any] = {"success": False, "error": _first_message(detail)}
    if isinstance(exc, ValidationError) and isinstance(detail, dict):
        body["fields"] = detail
    response.data = body
    return response
