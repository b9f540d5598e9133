"""The JSON parser of every DRF endpoint: bounded in size and in nesting depth.

DRF reads the request stream itself, past Django's DATA_UPLOAD_MAX_MEMORY_SIZE check, and
Python's json raises RecursionError (not ValueError) on deep nesting: `[` x 100,000 was a 500
on every write. Here a body over the size limit is a 413 and one nested deeper than
BMS_JSON_MAX_DEPTH (or too deep for the parser) a 400, before any view sees it.
"""

from __future__ import annotations

import io
from typing import Any

from django.conf import settings
from rest_framework import status
from rest_framework.exceptions import APIException, ParseError
from rest_framework.parsers import JSONParser


class BodyTooLarge(APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "Request body too large."
    default_code = "body_too_large"


def nesting_depth_exceeds(value: Any, limit: int) -> bool:
    """True if lists/objects nest more than `limit` levels (the top one is level 1).

    A loop with its own stack, not recursion: the check must not fail the way the parser did.
    """
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))
    return False


class BoundedJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None) -> Any:
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        raw = stream.read() if limit is None else stream.read(limit + 1)
        if limit is not None and len(raw) > limit:
            raise BodyTooLarge(f"Request body larger than {limit} bytes.")
        try:
            data = super().parse(io.BytesIO(raw), media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - nested too deeply.") from None
        max_depth = settings.BMS_JSON_MAX_DEPTH
        if isinstance(data, dict | list) and nesting_depth_exceeds(data, max_depth):
            raise ParseError(f"JSON parse error - nested deeper than {max_depth} levels.")
        return data
