"""Refuse a NUL byte in the query string before any view sees it.

PostgreSQL text cannot hold NUL (0x00): a lookup such as `/kiosk/?rotate=%00` raised a
DataError (a 500) there while SQLite answered 404. No parameter of ours has a use for a NUL,
so one check here covers every view instead of a guard in each.
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from core.api_errors import error_response


class RefuseNulBytesMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        for name, values in request.GET.lists():
            if "\x00" in name or any("\x00" in value for value in values):
                shown = name.replace("\x00", "\\x00")
                said = "NUL bytes are not allowed in a query parameter."
                # `fields` as every API refusal has it (docs/API.md "Errors"); `field` as the
                # ingest and feed paths' clients read it (docs/INGEST.md).
                return error_response(f"{shown}: {said}", field=shown, fields={shown: [said]})
        return self.get_response(request)
