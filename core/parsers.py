"""The JSON parser of every DRF endpoint: bounded in nesting depth.

Python's json raises RecursionError (not ValueError) on deep nesting, which DRF's parser does
not catch: `[` x 100,000 was a 500 on every write. Here a body nested deeper than
BMS_JSON_MAX_DEPTH (or too deep for the json module at all) is a 400 before any view sees it.
The body's size is bounded before parsing: DRF reads it through Django's request.body, which
enforces DATA_UPLOAD_MAX_MEMORY_SIZE (a 413 from core/api_errors.py).
"""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser


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


class NestedTooDeeply(Exception):
    """JSON nested deeper than BMS_JSON_MAX_DEPTH: the text says how deep may go."""


def loads_bounded(text: str | bytes, **kwargs: Any) -> Any:
    """json.loads for JSON in a query or form field, bounded as the API's bodies are: past
    BMS_JSON_MAX_DEPTH (or too deep for the json module, whose RecursionError is no
    ValueError) it raises NestedTooDeeply; malformed JSON still raises ValueError."""
    max_depth = settings.BMS_JSON_MAX_DEPTH
    try:
        data = json.loads(text, **kwargs)
    except RecursionError:
        raise NestedTooDeeply(f"JSON nested deeper than {max_depth} levels") from None
    if isinstance(data, dict | list) and nesting_depth_exceeds(data, max_depth):
        raise NestedTooDeeply(f"JSON nested deeper than {max_depth} levels")
    return data


class BoundedJSONParser(JSONParser):
    def parse(self, stream, media_type=None, parser_context=None) -> Any:
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - nested too deeply.") from None
        max_depth = settings.BMS_JSON_MAX_DEPTH
        if isinstance(data, dict | list) and nesting_depth_exceeds(data, max_depth):
            raise ParseError(f"JSON parse error - nested deeper than {max_depth} levels.")
        return data
