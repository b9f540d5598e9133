"""LimitOffsetPagination with bounds: `limit` above MAX_LIMIT is clamped (docs/API.md), and a
`limit` or `offset` that is not a whole number in range is a 400 naming it. DRF's own falls
back to its default without a word, so `?limit=0` or `?limit=ten` answered 100 rows as if
the client had not asked (fresh-eyes tester, #30); a huge `offset` was a database error."""

from __future__ import annotations

from rest_framework.exceptions import ValidationError
from rest_framework.pagination import LimitOffsetPagination

MAX_LIMIT = 1000
# PostgreSQL's OFFSET is a bigint: a larger one failed with "bigint out of range", a 500
# (found by schemathesis on PostgreSQL).
MAX_OFFSET = 2**63 - 1


def _whole_number(raw: str, name: str, least: int, most: int) -> int:
    """`raw` as a whole number from `least`; past `most` it is `most` + 1 (the caller clamps or
    refuses), read without converting thousands of digits (int() refuses past 4,300)."""
    # isascii: str.isdigit takes other scripts' digits ('²', '٣'), which int() may refuse.
    refused = ValidationError({name: [f"must be a whole number from {least}"]})
    if not (raw.isascii() and raw.isdigit()):
        raise refused
    digits = raw.lstrip("0") or "0"
    value = most + 1 if len(digits) > len(str(most)) else min(int(digits), most + 1)
    if value < least:
        raise refused
    return value


class BoundedLimitOffsetPagination(LimitOffsetPagination):
    max_limit = MAX_LIMIT

    def get_limit(self, request) -> int:
        raw = request.query_params.get(self.limit_query_param)
        if raw is None:
            return self.default_limit
        return min(_whole_number(raw, self.limit_query_param, 1, self.max_limit), self.max_limit)

    def get_offset(self, request) -> int:
        raw = request.query_params.get(self.offset_query_param)
        if raw is None:
            return 0
        offset = _whole_number(raw, self.offset_query_param, 0, MAX_OFFSET)
        if offset > MAX_OFFSET:
            raise ValidationError({self.offset_query_param: [f"must be at most {MAX_OFFSET}"]})
        return offset
